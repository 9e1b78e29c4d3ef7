// Package wiretag holds the magic and the value tags of the binary
// generate response (ABI version 3): the SDK writes them in the guest
// (sdk/wireresp.go, where the layout is described) and the host reads them
// (sdk/wasmhost/decodewire.go), so both take them from here.
package wiretag

// Magic opens a binary response.
const Magic = "CCMR"

// Value tags.
const (
	Null byte = iota
	False
	True
	Number // a string: an integer as JSON writes it
	String
	Array  // a count, then as many values
	Object // a count, then as many names each followed by a value
	JSON   // a string: any other value, as JSON
)
