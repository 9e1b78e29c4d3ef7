//go:build wasip1

// Command command is a WASI command, not a reactor, without the ABI's
// exports: the host must refuse it before running any of it.
package main

func main() {}
