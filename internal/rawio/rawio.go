// Package rawio reads and writes sockets with system calls that the Go
// scheduler does not hear of, waiting for them through its poller as net
// does.
//
// Every system call that os and net make tells the scheduler first, and
// that wakes the runtime's monitor thread when it sleeps because the
// process was idle. A program that waits for a reply is idle between its
// request and the reply, so each read and write of a round trip paid that
// wake-up: the monitor's switches in and out, two to three a round trip
// in the client package, on a machine where the hub and the worker want
// the same cores.
//
// Only sockets, and only where the peer cannot make a call sleep. A
// pipe's read and write share a lock, which the kernel holds while it
// copies to or from the peer's memory: a peer whose memory faults slowly
// (swapped out, mapped from a network file, a userfaultfd) would hold a
// raw call, and with it the thread the scheduler counts on to run
// everything else. A Unix socket's peer may pass descriptors, which a read
// that does not take them closes: the close of a TCP socket that lingers
// sleeps, inside the read. So TCP connections (Conn), Unix sockets to a
// peer the program trusts (Trusted: the client package's to its own hub),
// and Unix sockets that refuse descriptors (Unix: Linux 6.16 and later
// can make a socket refuse them, RefuseRights, and then a peer's sendmsg
// that passes one fails); pipes, files and other Unix sockets are left to
// os and net. Elsewhere than on Linux, and under the race detector (which
// sees only the calls syscall makes), the calls are ordinary ones.
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Conn is c read and written with raw system calls when it is a TCP
// connection the poller waits for; otherwise it is c.
func Conn(c net.Conn) net.Conn {
	if tc, ok := c.(*net.TCPConn); ok {
		return raw(tc, "tcp")
	}
	return c
}

// Trusted is c read and written with raw system calls: c's peer must be
// one that passes no descriptors (see the package's comment).
func Trusted(c *net.UnixConn) net.Conn { return raw(c, "unix") }

// RefuseRights makes the Unix socket or listener c refuse descriptors
// (SO_PASSRIGHTS): a peer's sendmsg that passes one fails with EPERM,
// and a socket that a listener accepts refuses them as the listener
// does, from its connect on. It fails where the kernel cannot (before
// Linux 6.16; other systems).
func RefuseRights(c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = refuseRights(fd) }); err != nil {
		return err
	}
	return serr
}

// RefuseRightsOnDial is a net.Dialer's Control that makes the socket
// refuse descriptors (RefuseRights) before it connects, so that the peer
// can pass none from its first byte on. Where the kernel cannot, the
// socket is left as it is and the dial goes on.
func RefuseRightsOnDial(network, address string, c syscall.RawConn) error {
	c.Control(func(fd uintptr) { refuseRights(fd) })
	return nil
}

// Unix is c read and written with raw system calls when c refuses
// descriptors (RefuseRights, on c or the listener that accepted it);
// otherwise it is c.
func Unix(c *net.UnixConn) net.Conn {
	rc, err := c.SyscallConn()
	if err != nil {
		return c
	}
	refuses := false
	if rc.Control(func(fd uintptr) { refuses = refusesRights(fd) }) != nil || !refuses {
		return c
	}
	return raw(c, "unix")
}

// raw is c read and written with raw system calls, when its descriptor
// is nonblocking.
func raw(c interface {
	net.Conn
	syscall.Conn
}, network string) net.Conn {
	rc, err := c.SyscallConn()
	if err != nil {
		return c
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		return c
	}
	// A blocking descriptor would block a raw call; net makes its own
	// nonblocking, but one from a file (net.FileConn) may not be.
	if flags&unix.O_NONBLOCK == 0 {
		return c
	}
	return conn{Conn: c, rc: rc, network: network}
}

type conn struct {
	net.Conn
	rc      syscall.RawConn
	network string
}

// Read reads once into p, waiting until the socket has bytes; it returns
// io.EOF at the end.
func (c conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := c.rc.Read(func(fd uintptr) bool {
		n, errno = read(fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting while the socket has no room.
func (c conn) Write(p []byte) (int, error) {
	var (
		done  int
		errno syscall.Errno
	)
	err := c.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			var n int
			n, errno = write(fd, p[done:])
			if errno == syscall.EAGAIN {
				errno = 0
				return false
			}
			if errno != 0 {
				return true
			}
			done += n
		}
		return true
	})
	switch {
	case err != nil:
		return done, c.opError("write", err)
	case errno != 0:
		return done, c.opError("write", errno)
	}
	return done, nil
}

// opError says which call failed on what, as net does; the poller's own
// errors (a deadline, a close) come as net's already.
func (c conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: c.network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
