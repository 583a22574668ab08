//go:build linux && (amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64 || ppc64le || s390x)

package rawio

import (
	"golang.org/x/sys/unix"
)

// soPassRights is Linux's SO_PASSRIGHTS (6.16 and later), the same on
// these architectures (asm-generic's).
const soPassRights = 83

func refuseRights(fd uintptr) error {
	return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soPassRights, 0)
}

func refusesRights(fd uintptr) bool {
	v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPassRights)
	return err == nil && v == 0
}
