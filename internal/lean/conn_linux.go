package lean

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

// Supported says whether Dial can check its peer on this system.
const Supported = true

// Dial connects to the socket at path and checks that its peer runs as
// our uid (a *PeerError if not).
func Dial(path string) (*Conn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c := &Conn{fd: fd}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err == nil {
		var uid int
		if uid, err = PeerUID(fd); err == nil {
			err = CheckUID(uid)
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// PeerUID returns the uid of the process at the other end of the unix
// socket fd (SO_PEERCRED).
func PeerUID(fd int) (int, error) {
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return -1, fmt.Errorf("safesock: peer credentials: %w", err)
	}
	return int(cred.Uid), nil
}

// Readable reports whether a read would not block, waiting up to d (none
// when d is not positive) for it to become so (ppoll: any fd number).
func (c *Conn) Readable(d time.Duration) bool {
	if len(c.buf) > 0 {
		return true
	}
	d = max(d, 0) // ppoll refuses a negative time
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(c.fd), events: 1} // POLLIN
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno != 0 || n > 0
	}
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd int) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
