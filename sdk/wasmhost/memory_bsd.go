//go:build darwin || freebsd

package wasmhost

const mapNoReserve = 0
