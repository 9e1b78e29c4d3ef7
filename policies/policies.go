// Package policies embeds the default Rego policies of the CCM so that the
// binary works without a mounted policy directory. The same files are what
// users copy, change and test with stock `opa test policies/`; keeping them
// as plain .rego files next to this tiny package (instead of strings in Go)
// means there is exactly one copy of the defaults.
package policies

import (
	"embed"
	"io/fs"
)

//go:embed *.rego
var files embed.FS

// FS holds the default policies and their _test.rego files at its root. The
// host excludes the tests when it loads them, exactly as it does for a
// mounted directory.
var FS fs.FS = files
