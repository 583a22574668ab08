package safesock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerUID returns the uid of the process at the other end of c (LOCAL_PEERCRED).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("safesock: %w", err)
	}
	var cred *unix.Xucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("safesock: %w", err)
	}
	if cerr != nil {
		return -1, fmt.Errorf("safesock: peer credentials: %w", cerr)
	}
	return int(cred.Uid), nil
}
