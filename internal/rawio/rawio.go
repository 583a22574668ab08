// Package rawio reads and writes nonblocking descriptors with system calls
// that the Go scheduler does not see, waiting for them through its poller
// as os and net do.
//
// Every system call that os and net make tells the scheduler first, and
// that wakes the runtime's monitor thread when it sleeps because the
// process was idle. The hub is idle between a cell's request and its
// reply, so each read and write of a round trip paid that wake-up: the
// monitor's switches in and out, about three a round trip, on a machine
// where the worker and the client want the same cores. A read or write of
// a nonblocking descriptor returns at once, so the scheduler need not hear
// of it: here it is a raw system call, and a descriptor that has nothing
// to read (or no room) waits in the poller (syscall.RawConn). Elsewhere
// than on Linux the calls are ordinary ones.
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Stream reads and writes one descriptor.
type Stream struct {
	rc   syscall.RawConn
	name string // for errors, as os names a file
}

// SyscallConner is what os.File and the net package's connections are.
type SyscallConner interface {
	SyscallConn() (syscall.RawConn, error)
}

// New returns a Stream on x's descriptor, or false when x has none that the
// poller waits for: then x is read and written as it is. name is what an
// error calls it.
func New(x any, name string) (*Stream, bool) {
	rc, ok := Polled(x)
	if !ok {
		return nil, false
	}
	return &Stream{rc: rc, name: name}, true
}

// Polled returns x's descriptor when it is nonblocking and the poller
// waits for it (an os.File from os.Pipe, a net.Conn): its reads and
// writes may then be Read and Write.
func Polled(x any) (syscall.RawConn, bool) {
	sc, ok := x.(SyscallConner)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		return nil, false
	}
	// A blocking descriptor would block a raw call, and with it a thread
	// the scheduler counts on; os and net make theirs nonblocking when
	// the poller takes them.
	return rc, flags&unix.O_NONBLOCK != 0
}

// Reader returns r as a Stream when it can be one, else r.
func Reader(r io.Reader, name string) io.Reader {
	if s, ok := New(r, name); ok {
		return s
	}
	return r
}

// WriteCloser returns w writing through a Stream when it can, else w.
func WriteCloser(w io.WriteCloser, name string) io.WriteCloser {
	if s, ok := New(w, name); ok {
		return struct {
			io.Writer
			io.Closer
		}{s, w}
	}
	return w
}

// Read reads once into p, waiting until the descriptor has bytes; it
// returns io.EOF at the end.
func (s *Stream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := s.rc.Read(func(fd uintptr) bool {
		n, errno = Read(fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, s.wrap("read", err)
	case errno != 0:
		return 0, s.wrap("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting while the descriptor has no room.
func (s *Stream) Write(p []byte) (int, error) {
	var (
		done  int
		errno syscall.Errno
	)
	err := s.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			var n int
			n, errno = Write(fd, p[done:])
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
		return done, s.wrap("write", err)
	case errno != 0:
		return done, s.wrap("write", errno)
	}
	return done, nil
}

func (s *Stream) wrap(op string, err error) error {
	return &os.PathError{Op: op, Path: s.name, Err: err}
}

// Conn is c read and written through a Stream, when it can be.
func Conn(c net.Conn, name string) net.Conn {
	if s, ok := New(c, name); ok {
		return conn{c, s}
	}
	return c
}

type conn struct {
	net.Conn
	s *Stream
}

func (c conn) Read(b []byte) (int, error)  { return c.s.Read(b) }
func (c conn) Write(b []byte) (int, error) { return c.s.Write(b) }
