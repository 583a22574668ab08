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

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func TestStreamCarriesAPipeWhole(t *testing.T) {
	r, w := pipe(t)
	rs, ok := New(r, "r")
	require.True(t, ok, "os.Pipe's ends are polled")
	ws, ok := New(w, "w")
	require.True(t, ok)
	// Four times what a pipe holds: the writer waits for room.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	go func() {
		n, err := ws.Write(want)
		assert.NoError(t, err)
		assert.Equal(t, len(want), n)
		w.Close()
	}()
	got, err := io.ReadAll(rs)
	require.NoError(t, err, "the end is io.EOF, which ReadAll takes")
	assert.True(t, bytes.Equal(want, got), "got %d bytes of %d", len(got), len(want))
	n, err := rs.Read(make([]byte, 8))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	n, err = rs.Read(nil)
	assert.Equal(t, 0, n, "an empty read reads nothing")
	assert.NoError(t, err)
}

func TestStreamWaitsAsOsDoes(t *testing.T) {
	r, w := pipe(t)
	rs, _ := New(r, "worker stdout")
	require.NoError(t, r.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err := rs.Read(make([]byte, 8))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a deadline ends a wait")
	assert.Contains(t, err.Error(), "worker stdout", "an error names the stream")
	require.NoError(t, r.SetReadDeadline(time.Time{}))

	done := make(chan error, 1)
	go func() {
		_, err := rs.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "closed file", "a close ends a wait")
	case <-time.After(5 * time.Second):
		t.Fatal("a close did not end a read's wait")
	}
	w.Close()
	ws, ok := New(w, "w")
	if ok {
		_, err = ws.Write([]byte("x"))
		assert.ErrorContains(t, err, "closed file")
	}
}

func TestStreamWriteToAGoneReader(t *testing.T) {
	r, w := pipe(t)
	ws, _ := New(w, "w")
	r.Close()
	_, err := ws.Write([]byte("x"))
	assert.ErrorIs(t, err, syscall.EPIPE, "EPIPE, not a signal: Go ignores SIGPIPE on other fds than 1 and 2")
}

func TestBlockingIsLeftAlone(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	defer f.Close()
	_, ok := New(f, "f")
	assert.False(t, ok, "a regular file blocks: no raw reads")
	_, ok = New(bytes.NewReader(nil), "b")
	assert.False(t, ok, "no descriptor")

	// A pipe made blocking (as Fd makes it) is left to os.
	r, _ := pipe(t)
	r.Fd()
	_, ok = New(r, "r")
	assert.False(t, ok)
	assert.Equal(t, io.Reader(r), Reader(r, "r"))
}

func TestConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Equal(t, a, Conn(a, "a"), "net.Pipe has no descriptor")

	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial("unix", filepath.Join(dir, "s"))
	require.NoError(t, err)
	rc := Conn(c, "echo")
	_, raw := rc.(conn)
	require.True(t, raw)
	_, err = rc.Write([]byte("ping\n"))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(rc, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping\n", string(buf))
	require.NoError(t, rc.Close(), "Close is the conn's")
	_, err = rc.Read(buf)
	assert.True(t, errors.Is(err, net.ErrClosed), "%v", err)
}

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "record")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	rf := NewFile(f)
	if localFS(uintptr(f.Fd())) {
		assert.NotNil(t, rf.rc, "a temporary folder is on a local file system")
	}
	_, err = rf.WriteAt([]byte(`{"cells": 1}`), 0)
	require.NoError(t, err)
	_, err = rf.WriteAt([]byte(`2`), 10)
	require.NoError(t, err)
	n, err := rf.Write([]byte("!"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	b, _ := os.ReadFile(p)
	assert.Equal(t, `!"cells": 2}`, string(b), "Write writes at the file's offset")
	rf.Close()
	_, err = rf.WriteAt([]byte("x"), 0)
	assert.ErrorContains(t, err, "closed file")
	_, err = rf.Write([]byte("x"))
	assert.ErrorContains(t, err, "closed file")

	f, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	rf = NewFile(f)
	defer rf.Close()
	_, err = rf.Write([]byte("\nmore"))
	require.NoError(t, err)
	b, _ = os.ReadFile(p)
	assert.Equal(t, "!\"cells\": 2}\nmore", string(b), "O_APPEND holds")
}
