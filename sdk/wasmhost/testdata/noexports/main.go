//go:build wasip1

// Command noexports is a valid WASI module without the ABI's exports: the
// host must refuse it before running any of it.
package main

func main() {}
