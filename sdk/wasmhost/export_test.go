package wasmhost

// Pooled reports whether m reuses instances (for tests).
func Pooled(m *Module) bool { return m.pool != nil }

// WithoutLocations is the request a module of ABI version 1 gets (for tests).
var WithoutLocations = withoutLocations

// WithoutIPv6 is the request a module of ABI version 4 or older gets,
// before its encoding (for tests).
var WithoutIPv6 = withoutIPv6

// EncodeRequest is the generate request as a module of ABI version abi
// gets it (for tests).
var EncodeRequest = encodeRequest
