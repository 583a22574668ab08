package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ReadFile reads what WriteFile wrote, and refuses, at once and without
// reading it, whatever else may be there now: a FIFO would block a plain
// read for ever, a link to /dev/zero fill the memory.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	require.NoError(t, WriteFile(good, []byte("12345"), 0o600))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(good, link))

	b, err := ReadFile(good, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = ReadFile(good, 4)
	assert.ErrorContains(t, err, "5 bytes, more than 4")
	_, err = ReadFile(filepath.Join(dir, "none"), 5)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for path, want := range map[string]string{fifo: "not a regular file", zero: "symbolic link", link: "symbolic link", dir: "not a regular file"} {
			_, err := ReadFile(path, 1<<20)
			assert.ErrorContains(t, err, want, path)
			var pe *fs.PathError
			assert.True(t, errors.As(err, &pe), "%T", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked")
	}
}
