package wasmhost

import "syscall"

const mapNoReserve = syscall.MAP_NORESERVE
