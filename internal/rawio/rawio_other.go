//go:build !linux

package rawio

import "syscall"

// Read is one read(2) of fd into p, again after EINTR. Elsewhere than on
// Linux it is an ordinary system call.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	return again(func() (int, error) { return syscall.Read(int(fd), p) })
}

// Write is one write(2) of p to fd, again after EINTR.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	return again(func() (int, error) { return syscall.Write(int(fd), p) })
}

// Pwrite is one pwrite(2) of p to fd at off, again after EINTR.
func Pwrite(fd uintptr, p []byte, off int64) (int, syscall.Errno) {
	return again(func() (int, error) { return syscall.Pwrite(int(fd), p, off) })
}

func again(call func() (int, error)) (int, syscall.Errno) {
	for {
		n, err := call()
		switch e := err.(type) {
		case nil:
			return n, 0
		case syscall.Errno:
			if e != syscall.EINTR {
				return 0, e
			}
		default:
			return 0, syscall.EIO
		}
	}
}

// localFS is false: elsewhere than on Linux, files are written as os
// writes them.
func localFS(fd uintptr) bool { return false }
