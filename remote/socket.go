package remote

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/crypto/ssh"
)

// A worker that lingers on its host after its link drops serves a unix
// socket there; the hub reaches it over a new connection through OpenSSH's
// streamlocal forwarding (direct-streamlocal@openssh.com), which
// x/crypto/ssh dials like any other address. That starts nothing on the
// host and costs one channel open: the reattach is one handshake plus a
// round trip. sshd opens the socket as the ssh user, whom the worker
// checks (SO_PEERCRED). A server that forbids it (AllowStreamLocalForwarding
// no, DisableForwarding) cannot reattach; DialSocket says so.

// ErrForwardingRefused is a server that does not allow streamlocal
// forwarding.
var ErrForwardingRefused = errors.New("the ssh server does not allow forwarding to unix sockets (AllowStreamLocalForwarding)")

// ErrNoSocket is a socket path nothing serves on the host.
var ErrNoSocket = errors.New("no worker serves that socket")

// DialSocket connects to the unix socket at path on the connection's host.
func (c *Conn) DialSocket(path string) (net.Conn, error) {
	sc, err := c.client.Dial("unix", path)
	if err == nil {
		return sc, nil
	}
	var oe *ssh.OpenChannelError
	if errors.As(err, &oe) {
		switch oe.Reason {
		case ssh.Prohibited:
			return nil, ErrForwardingRefused
		case ssh.ConnectionFailed:
			return nil, fmt.Errorf("%w (%s)", ErrNoSocket, oe.Message)
		}
	}
	if lost := c.LostErr(); lost != nil {
		return nil, lost
	}
	return nil, err
}

// Lost is closed when the connection is gone.
func (c *Conn) Lost() <-chan struct{} { return c.lost }
