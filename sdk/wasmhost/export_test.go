package wasmhost

// Pooled reports whether m reuses instances (for tests).
func Pooled(m *Module) bool { return m.pool != nil }

// WithoutLocations is the request a module of ABI version 1 gets (for tests).
var WithoutLocations = withoutLocations
