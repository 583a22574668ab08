//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

// read is one read(2) of fd into p (not empty), again after EINTR.
func read(fd uintptr, p []byte) (int, syscall.Errno) { return call(syscall.SYS_READ, fd, p) }

// write is one write(2) of p (not empty) to fd, again after EINTR.
func write(fd uintptr, p []byte) (int, syscall.Errno) { return call(syscall.SYS_WRITE, fd, p) }

func call(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e == 0 {
			return int(n), 0
		}
		if e != syscall.EINTR {
			return 0, e
		}
	}
}
