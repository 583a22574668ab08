package lean

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// PeerError reports a peer whose uid is not ours.
type PeerError struct {
	Want, Got int
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("safesock: peer runs as uid %d, not uid %d", e.Got, e.Want)
}

// CheckUID returns a *PeerError unless uid, a peer's, is ours.
func CheckUID(uid int) error {
	if uid != os.Getuid() {
		return &PeerError{Want: os.Getuid(), Got: uid}
	}
	return nil
}

// Conn is a blocking connection to the hub, read and written with plain
// system calls: no poller, no goroutine.
type Conn struct {
	fd  int
	buf []byte // read past the last line
}

// Close closes the connection.
func (c *Conn) Close() error { return syscall.Close(c.fd) }

// Write writes all of b.
func (c *Conn) Write(b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(c.fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// ErrLineTooLong is ReadLine's error for a line over MaxLine.
var ErrLineTooLong = errors.New("lean: line too long")

// ReadLine reads one line, newline included, of at most MaxLine bytes
// before it (as wire.ReadLine): ErrHubClosed when
// the hub closes the connection first.
func (c *Conn) ReadLine() ([]byte, error) {
	b, scanned := c.buf, 0
	for {
		if i := bytes.IndexByte(b[scanned:], '\n'); i >= 0 {
			if i += scanned; i < MaxLine {
				c.buf = b[i+1:]
				return b[:i+1], nil
			}
		}
		if len(b) >= MaxLine {
			return nil, ErrLineTooLong
		}
		scanned = len(b)
		if cap(b)-len(b) < 4096 {
			b = append(make([]byte, 0, 2*cap(b)+16<<10), b...)
		}
		n, err := syscall.Read(c.fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, ErrHubClosed
		}
		b = b[:len(b)+n]
	}
}

// ErrHubClosed is ReadLine's error when the hub closes the connection
// before a whole line.
var ErrHubClosed = errors.New("lean: the hub closed the connection")
