//go:build !linux || race

package rawio

import "syscall"

// read is one read(2) of fd into p, again after EINTR: an ordinary call.
func read(fd uintptr, p []byte) (int, syscall.Errno) {
	return again(func() (int, error) { return syscall.Read(int(fd), p) })
}

// write is one write(2) of p to fd, again after EINTR: an ordinary call.
func write(fd uintptr, p []byte) (int, syscall.Errno) {
	return again(func() (int, error) { return syscall.Write(int(fd), p) })
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
