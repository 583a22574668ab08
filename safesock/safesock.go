// Package safesock is the hub's transport: a unix socket in a folder only its
// owner can enter, and peer-credential checks on both ends.
//
// The hub refuses a peer of another uid before reading a byte from it; the
// client refuses a hub of another uid, because every request carries the
// caller's working folder and environment. Nothing else in replhub touches
// socket folders or peer credentials.
package safesock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/internal/rawio"
)

// ErrNoHub means nothing listens on the socket (absent or stale).
var ErrNoHub = errors.New("safesock: no hub is listening")

// PeerError reports a peer whose uid is not ours.
type PeerError = lean.PeerError

// FolderError reports a socket folder that is not safe to use, with the
// fix in Advice.
type FolderError = lean.FolderError

// PrepareDir makes dir (mode 0700) if it is absent, then checks that it is a
// real folder, owned by us, that nobody else may enter. It never loosens or
// repairs an existing folder: a folder in the wrong state is somebody's
// mistake or somebody's attack, and the user decides which.
func PrepareDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("safesock: %w", err)
	}
	return CheckDir(dir)
}

// CheckDir checks an existing socket folder without changing it.
func CheckDir(dir string) error { return lean.CheckDir(dir) }

// Listen listens on path, replacing a stale socket left by a dead hub. It
// fails if a live hub already answers there.
func Listen(path string) (*net.UnixListener, error) {
	if _, err := os.Lstat(path); err == nil {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("safesock: a hub is already listening on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("safesock: removing stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("safesock: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	// No client passes descriptors; where the kernel can refuse them, the
	// hub reads its clients with raw calls (rawio.Unix).
	rawio.RefuseRights(ln)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("safesock: %w", err)
	}
	return ln, nil
}

// Dial connects to the hub at path and checks that it runs as our uid.
// It returns ErrNoHub (wrapped) when nothing listens there.
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w (%s)", ErrNoHub, path)
		}
		return nil, fmt.Errorf("safesock: %w", err)
	}
	uc := c.(*net.UnixConn)
	if err := CheckPeer(uc); err != nil {
		uc.Close()
		return nil, err
	}
	return uc, nil
}

// CheckPeer returns a *PeerError unless the peer of c runs as our uid.
func CheckPeer(c *net.UnixConn) error {
	uid, err := PeerUID(c)
	if err != nil {
		return err
	}
	return lean.CheckUID(uid)
}
