package safesock

import (
	"fmt"
	"net"

	"github.com/replhub/replhub/internal/lean"
)

// PeerUID returns the uid of the process at the other end of c (SO_PEERCRED).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("safesock: %w", err)
	}
	uid, uerr := -1, error(nil)
	if err := raw.Control(func(fd uintptr) { uid, uerr = lean.PeerUID(int(fd)) }); err != nil {
		return -1, fmt.Errorf("safesock: %w", err)
	}
	return uid, uerr
}
