package hubtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/lean"
)

// HubSocket listens where a client dials the hub, under a runtime folder
// (and home) of the test's own, for a test that plays the hub; getenv
// points there. The listener closes when the test ends.
func HubSocket(t *testing.T) (getenv func(string) string, ln net.Listener) {
	t.Helper()
	rt := t.TempDir()
	dir, _ := lean.RuntimeDir(func(string) string { return rt })
	require.NoError(t, os.Mkdir(dir, 0o700))
	ln, err := net.Listen("unix", filepath.Join(dir, lean.SocketName))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return func(k string) string {
		if k == "XDG_RUNTIME_DIR" || k == "HOME" {
			return rt
		}
		return ""
	}, ln
}
