package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pair is two connected Unix sockets, a through Conn.
func pair(t *testing.T) (a net.Conn, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		got <- c
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	require.NoError(t, err)
	b = <-got
	require.NotNil(t, b)
	assert.Equal(t, c, Conn(c), "a Unix socket's peer may pass descriptors: Conn leaves it to net")
	a = Trusted(c.(*net.UnixConn))
	_, raw := a.(conn)
	require.True(t, raw, "a trusted Unix socket goes raw")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestConnCarriesAStreamWhole(t *testing.T) {
	a, b := pair(t)
	// Many times what a socket holds: the writer waits for room.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
	go func() {
		n, err := a.Write(want)
		assert.NoError(t, err)
		assert.Equal(t, len(want), n)
		a.(conn).Conn.(*net.UnixConn).CloseWrite()
	}()
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "got %d bytes of %d", len(got), len(want))

	go func() {
		b.Write(want)
		b.Close()
	}()
	got, err = io.ReadAll(a)
	require.NoError(t, err, "the end is io.EOF, which ReadAll takes")
	assert.True(t, bytes.Equal(want, got), "got %d bytes of %d", len(got), len(want))
	n, err := a.Read(make([]byte, 8))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	n, err = a.Read(nil)
	assert.Equal(t, 0, n, "an empty read reads nothing")
	assert.NoError(t, err)
	n, err = a.Write(nil)
	assert.Equal(t, 0, n, "an empty write writes nothing")
	assert.NoError(t, err)
}

func TestConnWaitsAsNetDoes(t *testing.T) {
	a, b := pair(t)
	require.NoError(t, a.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err := a.Read(make([]byte, 8))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a deadline ends a read's wait")
	var ne net.Error
	require.ErrorAs(t, err, &ne, "errors are net's")
	assert.True(t, ne.Timeout())
	assert.Regexp(t, `^read unix [^:]*: i/o timeout$`, err.Error(), "said once")
	require.NoError(t, a.SetReadDeadline(time.Time{}))

	// A write that waits for room ends at its deadline, saying how much
	// went: some, not all.
	require.NoError(t, a.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
	n, err := a.Write(make([]byte, 16<<20))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a deadline ends a write's wait")
	assert.Less(t, n, 16<<20)
	require.NoError(t, a.SetWriteDeadline(time.Time{}))

	done := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, net.ErrClosed, "a close ends a wait")
	case <-time.After(5 * time.Second):
		t.Fatal("a close did not end a read's wait")
	}
	_, err = a.Write([]byte("x"))
	assert.ErrorIs(t, err, net.ErrClosed, "a write after the close")
	_ = b
}

func TestConnWriteToAGonePeer(t *testing.T) {
	a, b := pair(t)
	b.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = a.Write([]byte("x"))
	}
	assert.ErrorIs(t, err, syscall.EPIPE, "EPIPE, not a signal: Go ignores SIGPIPE on other fds than 1 and 2")
}

func TestConnLeavesOthersAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Equal(t, a, Conn(a), "net.Pipe has no descriptor")

	// A socket made blocking (as File's descriptor is) is left to net.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, raw := Conn(c).(conn)
	assert.True(t, raw, "a TCP connection goes raw")
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	rc.Control(func(fd uintptr) { syscall.SetNonblock(int(fd), false) })
	assert.Equal(t, c, Conn(c), "a blocking socket is left to net")
}

func TestConnIsTheRealConn(t *testing.T) {
	a, _ := pair(t)
	assert.NotNil(t, a.LocalAddr())
	assert.NoError(t, a.SetDeadline(time.Time{}))
	assert.NoError(t, a.Close())
	assert.True(t, errors.Is(a.Close(), net.ErrClosed), "Close is the connection's")
}

// A Unix socket goes raw through Unix only when it refuses descriptors:
// set on it, or on the listener that accepted it, from the peer's
// connect on. A peer's descriptor is refused at its sendmsg, and the
// stream goes on. Where the kernel cannot refuse them (before Linux
// 6.16), nothing goes raw.
func TestUnixGoesRawOnlyWhenItRefusesDescriptors(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	refused := RefuseRights(ln)
	c, err := net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	require.NoError(t, err)
	defer c.Close()
	// Passed before the accept: the accepted socket refuses it already.
	_, _, sendErr := c.WriteMsgUnix([]byte("a"), syscall.UnixRights(0), nil)
	s, err := ln.AcceptUnix()
	require.NoError(t, err)
	defer s.Close()
	a := Unix(s)
	if refused != nil {
		assert.ErrorIs(t, refused, syscall.ENOPROTOOPT)
		assert.Equal(t, s, a, "a socket that takes descriptors is left to net")
		t.Skipf("this kernel cannot refuse descriptors: %v", refused)
	}
	assert.ErrorIs(t, sendErr, syscall.EPERM, "the peer's descriptor is refused at its sendmsg")
	_, raw := a.(conn)
	require.True(t, raw, "a socket that refuses descriptors goes raw")
	_, err = c.Write([]byte("b"))
	require.NoError(t, err)
	got := make([]byte, 8)
	n, err := a.Read(got)
	require.NoError(t, err)
	assert.Equal(t, "b", string(got[:n]), "nothing of the refused message came")

	// One end of a pair, set on it alone.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	f0, f1 := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer f1.Close()
	fc, err := net.FileConn(f0)
	f0.Close()
	require.NoError(t, err)
	defer fc.Close()
	_, raw = Unix(fc.(*net.UnixConn)).(conn)
	assert.False(t, raw, "a pair's end that takes descriptors is left to net")
	require.NoError(t, RefuseRights(fc.(*net.UnixConn)))
	_, raw = Unix(fc.(*net.UnixConn)).(conn)
	assert.True(t, raw)
	peer, err := net.FileConn(f1)
	require.NoError(t, err)
	defer peer.Close()
	_, _, err = peer.(*net.UnixConn).WriteMsgUnix([]byte("c"), syscall.UnixRights(0), nil)
	assert.ErrorIs(t, err, syscall.EPERM)

	// A dialed socket, refusing them from before it connects: the
	// listener's end may pass none from its first byte.
	plain, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "p"), Net: "unix"})
	require.NoError(t, err)
	defer plain.Close()
	d := net.Dialer{Control: RefuseRightsOnDial}
	dc, err := d.Dial("unix", plain.Addr().String())
	require.NoError(t, err)
	defer dc.Close()
	ac, err := plain.AcceptUnix()
	require.NoError(t, err)
	defer ac.Close()
	_, _, err = ac.WriteMsgUnix([]byte("d"), syscall.UnixRights(0), nil)
	assert.ErrorIs(t, err, syscall.EPERM)
	_, raw = Unix(dc.(*net.UnixConn)).(conn)
	assert.True(t, raw)
}
