package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOM is one platform's CycloneDX document: the Go modules its CCM
// binary was linked from, as the binary's own build information lists
// them (what `go version -m` prints), so it says what was built, not what
// go.mod allows.
type SBOM struct {
	Platform string // os/arch
	Created  string // RFC 3339, the build's one timestamp
	JSON     []byte
}

// FileName is the SBOM's name in its artifact (its layer's title).
func (s SBOM) FileName() string {
	return "cloud-provider-equinix-metal." + strings.ReplaceAll(s.Platform, "/", "-") + ".cdx.json"
}

// sbomSpec is the CycloneDX version written: 1.6, which the common
// scanners read (cyclonedx-go's default is newer).
const sbomSpec = cdx.SpecVersion1_6

// MakeSBOM reads b's binary and describes it. Everything in the document
// comes from the binary and m: no clock, no random serial number (it is
// derived from the rest of the document), so one build gives one SBOM.
func MakeSBOM(b Binary, m Meta) (SBOM, error) {
	plat := b.Platform.OS + "/" + b.Platform.Architecture
	f, err := os.Open(b.Path)
	if err != nil {
		return SBOM{}, err
	}
	defer func() { _ = f.Close() }() // read only
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return SBOM{}, err
	}
	bi, err := buildinfo.Read(f)
	if err != nil {
		return SBOM{}, fmt.Errorf("%s: no Go build information: %w", b.Path, err)
	}
	if built := setting(bi, "GOOS") + "/" + setting(bi, "GOARCH"); built != plat {
		return SBOM{}, fmt.Errorf("%s is the %s binary but was built for %s", b.Path, plat, built)
	}
	return sbomFor(bi, m, filepath.Base(b.Path), hex.EncodeToString(sum.Sum(nil)))
}

// sbomFor is the SBOM of a binary with this build information, name and
// SHA-256.
func sbomFor(bi *debug.BuildInfo, m Meta, binName, binSHA256 string) (SBOM, error) {
	js, err := encodeSBOM(sbomOf(bi, m, binName, binSHA256))
	if err != nil {
		return SBOM{}, err
	}
	plat := setting(bi, "GOOS") + "/" + setting(bi, "GOARCH")
	return SBOM{Platform: plat, Created: m.Created.UTC().Format(time.RFC3339), JSON: js}, nil
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func sbomOf(bi *debug.BuildInfo, m Meta, binName, binSHA256 string) *cdx.BOM {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	qualifiers := "?goarch=" + settings["GOARCH"] + "&goos=" + settings["GOOS"] + "&type=module"
	mainRef := purl(bi.Main.Path, m.Version) + qualifiers
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: m.Created.UTC().Format(time.RFC3339),
		Tools:     &cdx.ToolsChoice{Components: toolComponents(bi.Main.Path)},
		Component: &cdx.Component{
			BOMRef:     mainRef,
			Type:       cdx.ComponentTypeApplication,
			Name:       bi.Main.Path,
			Version:    m.Version,
			PackageURL: mainRef,
			Licenses:   &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}},
			Properties: &[]cdx.Property{
				{Name: "org.opencontainers.image.revision", Value: m.Revision},
			},
		},
		Properties: &[]cdx.Property{
			{Name: "cdx:gomod:binary:name", Value: binName},
			{Name: "cdx:gomod:binary:hash:SHA-256", Value: binSHA256},
			{Name: "cdx:gomod:build:env:GOOS", Value: settings["GOOS"]},
			{Name: "cdx:gomod:build:env:GOARCH", Value: settings["GOARCH"]},
			{Name: "cdx:gomod:build:env:CGO_ENABLED", Value: settings["CGO_ENABLED"]},
			{Name: "cdx:gomod:build:env:GOVERSION", Value: bi.GoVersion},
			{Name: "cdx:gomod:build:compiler", Value: settings["-compiler"]},
		},
	}
	if m.Source != "" {
		bom.Metadata.Component.ExternalReferences = &[]cdx.ExternalReference{{Type: cdx.ERTypeVCS, URL: m.Source}}
	}
	std := cdx.Component{
		BOMRef:      purl("std", bi.GoVersion) + "?type=module",
		Type:        cdx.ComponentTypeLibrary,
		Name:        "std",
		Version:     bi.GoVersion,
		PackageURL:  purl("std", bi.GoVersion) + "?type=module",
		Description: "the Go standard library",
	}
	comps := []cdx.Component{std}
	for _, d := range bi.Deps {
		comps = append(comps, moduleComponent(d, m.Version))
	}
	slices.SortFunc(comps, func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	refs := make([]string, len(comps))
	for i, c := range comps {
		refs[i] = c.BOMRef
	}
	deps := []cdx.Dependency{{Ref: mainRef, Dependencies: &refs}}
	for _, r := range refs {
		deps = append(deps, cdx.Dependency{Ref: r})
	}
	bom.Components = &comps
	bom.Dependencies = &deps
	return bom
}

// toolComponents names what wrote the SBOM: this program, and the
// cyclonedx-go it was built with.
func toolComponents(mainPath string) *[]cdx.Component {
	tools := []cdx.Component{{
		Type:        cdx.ComponentTypeApplication,
		Name:        "hack/image",
		Description: "make image, in " + mainPath,
	}}
	if self, ok := debug.ReadBuildInfo(); ok {
		for _, d := range self.Deps {
			if d.Path == "github.com/CycloneDX/cyclonedx-go" {
				tools = append(tools, cdx.Component{Type: cdx.ComponentTypeLibrary, Name: d.Path, Version: d.Version, PackageURL: purl(d.Path, d.Version) + "?type=module"})
			}
		}
	}
	return &tools
}

// moduleComponent describes one required module as linked: a module
// replaced by another one is that one (its path and version are what was
// built); a module replaced by a directory of this repository (the SDK)
// carries the CCM's version.
func moduleComponent(d *debug.Module, version string) cdx.Component {
	c := cdx.Component{Type: cdx.ComponentTypeLibrary, Scope: cdx.ScopeRequired, Name: d.Path, Version: d.Version}
	sum := d.Sum
	switch {
	case d.Replace != nil && isDirectory(d.Replace.Path):
		c.Version = version
		c.Description = "built from " + d.Replace.Path + " of this repository"
		sum = ""
	case d.Replace != nil:
		c.Name, c.Version, sum = d.Replace.Path, d.Replace.Version, d.Replace.Sum
		c.Description = "replaces " + d.Path + " " + d.Version
	}
	c.PackageURL = purl(c.Name, c.Version) + "?type=module"
	c.BOMRef = c.PackageURL
	// The go.sum hash (h1:, SHA-256 of the module's file list) as
	// cyclonedx-gomod writes it.
	if h, ok := strings.CutPrefix(sum, "h1:"); ok {
		if raw, err := base64.StdEncoding.DecodeString(h); err == nil {
			c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}}
		}
	}
	return c
}

// isDirectory: a replacement by a directory, not a module (go.mod's rule:
// a path starting with ./, ../ or /).
func isDirectory(path string) bool {
	return strings.HasPrefix(path, "./") || strings.HasPrefix(path, "../") || filepath.IsAbs(path)
}

// purl is the package URL of a Go module (pkg:golang/path@version; the
// path's segments and the version escaped as the purl spec says).
func purl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = purlEscape(s)
	}
	return "pkg:golang/" + strings.Join(segs, "/") + "@" + purlEscape(version)
}

func purlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// encodeSBOM writes bom as JSON with a serial number made of the rest of
// the document: the same modules, binary and version give the same
// number, and any other document another.
func encodeSBOM(bom *cdx.BOM) ([]byte, error) {
	bom.SerialNumber = ""
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).EncodeVersion(bom, sbomSpec); err != nil {
		return nil, err
	}
	bom.SerialNumber = contentUUID(buf.Bytes())
	buf.Reset()
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false).EncodeVersion(bom, sbomSpec); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// contentUUID is a name-based UUID (version 8, RFC 9562) of b's SHA-256, as
// a urn:uuid: serial number.
func contentUUID(b []byte) string {
	h := sha256.Sum256(b)
	u := h[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	x := hex.EncodeToString(u)
	return "urn:uuid:" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
