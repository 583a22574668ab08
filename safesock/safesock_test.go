package safesock

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrepareDir(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, "replhub")
	require.NoError(t, PrepareDir(d))
	fi, err := os.Stat(d)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, PrepareDir(d), "an existing good folder is fine")

	require.NoError(t, os.Chmod(d, 0o755))
	var fe *FolderError
	require.ErrorAs(t, PrepareDir(d), &fe)
	assert.Equal(t, "run: chmod 700 "+d, fe.Advice)
	fi, _ = os.Stat(d)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "never repaired behind the user's back")

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(d, link))
	require.ErrorAs(t, CheckDir(link), &fe)
	assert.Contains(t, fe.Error(), "is not a real folder")
}

func TestListenDialAndPeer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	_, err := Dial(context.Background(), path)
	assert.ErrorIs(t, err, ErrNoHub)

	ln, err := Listen(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, err = Listen(path)
	assert.ErrorContains(t, err, "already listening")

	accepted := make(chan error, 1)
	go func(ln *net.UnixListener) {
		c, err := ln.AcceptUnix()
		if err == nil {
			err = CheckPeer(c)
			c.Close()
		}
		accepted <- err
	}(ln)
	c, err := Dial(context.Background(), path)
	require.NoError(t, err)
	uid, err := PeerUID(c)
	require.NoError(t, err)
	assert.Equal(t, os.Getuid(), uid)
	c.Close()
	assert.NoError(t, <-accepted)
	ln.Close()

	// A socket left behind by a dead hub is replaced.
	l2, err := net.Listen("unix", path)
	require.NoError(t, err)
	l2.(*net.UnixListener).SetUnlinkOnClose(false)
	l2.Close()
	ln, err = Listen(path)
	require.NoError(t, err)
	ln.Close()
}

// A client refuses a hub that runs as another user.
func TestDialRefusesAnotherUid(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to serve a socket as another user")
	}
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	dir, err := os.MkdirTemp("", "safesock-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o777))
	path := filepath.Join(dir, "s.sock")
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", py, "-c",
		`import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept(); time.sleep(2)`, path)
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var c *net.UnixConn
	for i := 0; i < 200; i++ {
		c, err = Dial(context.Background(), path)
		if !errors.Is(err, ErrNoHub) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var pe *PeerError
	require.ErrorAs(t, err, &pe, "got %v", err)
	assert.Nil(t, c)
	assert.NotEqual(t, 0, pe.Got)
}
