package payload

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freshKey is the key bytecodeKey gives after UseKeyFile(file).
func freshKey(t *testing.T, file string) []byte {
	t.Helper()
	done := make(chan []byte, 1)
	go func() {
		UseKeyFile(file)
		done <- bytecodeKey()
	}()
	select {
	case k := <-done:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("the key was not had within 10 s")
		return nil
	}
}

// The key file is kept and read again; anything in its place that is not
// the user's private 32-byte file is replaced, never read: a FIFO would
// hang the hub, a link to /dev/zero fill its memory.
func TestBytecodeKeyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bytecode.key")
	t.Cleanup(func() { go UseKeyFile("") })
	k := freshKey(t, file)
	require.Len(t, k, 32)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, k, freshKey(t, file), "the next hub reads the same key")

	for what, plant := range map[string]func() error{
		"a FIFO":          func() error { return syscall.Mkfifo(file, 0o600) },
		"a link":          func() error { return os.Symlink("/dev/zero", file) },
		"a short file":    func() error { return os.WriteFile(file, []byte("short"), 0o600) },
		"a readable file": func() error { return os.WriteFile(file, k, 0o644) },
	} {
		require.NoError(t, os.Remove(file))
		require.NoError(t, plant(), what)
		if what == "a readable file" {
			require.NoError(t, os.Chmod(file, 0o644))
		}
		got := freshKey(t, file)
		assert.NotEqual(t, k, got, "%s is not read", what)
		fi, err := os.Lstat(file)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is replaced by a regular file", what)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), what)
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, got, b, "%s: the new key is kept", what)
	}
}
