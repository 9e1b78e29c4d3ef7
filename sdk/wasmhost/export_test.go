package wasmhost

// Pooled reports whether m reuses instances (for tests).
func Pooled(m *Module) bool { return m.pool != nil }
