//go:build !linux || !(amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64 || ppc64le || s390x)

package rawio

import "syscall"

func refuseRights(uintptr) error { return syscall.ENOPROTOOPT }

func refusesRights(uintptr) bool { return false }
