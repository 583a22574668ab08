package boot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	p, err := Install(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "boot-"+Hash(), "worker.py"), p)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, Worker, b)
	fi, _ := os.Stat(filepath.Dir(p))
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// A damaged copy is replaced.
	require.NoError(t, os.WriteFile(p, []byte("broken"), 0o600))
	p2, err := Install(dir)
	require.NoError(t, err)
	b, _ = os.ReadFile(p2)
	assert.Equal(t, Worker, b)
}
