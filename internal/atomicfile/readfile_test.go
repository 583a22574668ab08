package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/testbound"
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

	testbound.Within(t, 10*time.Second, "ReadFile", func() {
		for path, want := range map[string]string{fifo: "not a regular file", zero: "symbolic link", link: "symbolic link", dir: "not a regular file"} {
			_, err := ReadFile(path, 1<<20)
			assert.ErrorContains(t, err, want, path)
			var pe *fs.PathError
			assert.True(t, errors.As(err, &pe), "%T", err)
		}
	})
}

// ReadUserFile follows a link, as to a dotfile kept elsewhere, and refuses
// the rest as ReadFile does: a FIFO or /dev/zero behind the link, a file
// past the bound, a loop of links.
func TestReadUserFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte("12345"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(good, link))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	toFifo := filepath.Join(dir, "to-fifo")
	require.NoError(t, os.Symlink(fifo, toFifo))
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))

	b, err := ReadUserFile(link, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = ReadUserFile(link, 4)
	assert.ErrorContains(t, err, "5 bytes, more than 4")

	testbound.Within(t, 10*time.Second, "ReadUserFile", func() {
		for path, want := range map[string]string{toFifo: "not a regular file", zero: "not a regular file", dir: "not a regular file", loop: "too many levels"} {
			_, err := ReadUserFile(path, 1<<20)
			assert.ErrorContains(t, err, want, path)
			_, err = ReadTail(path, 100)
			assert.ErrorContains(t, err, want, path)
		}
	})
}

// ReadTail reads only the end of a file that grows, such as the hub's log.
func TestReadTail(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "hub.log")
	require.NoError(t, os.WriteFile(log, []byte(strings.Repeat("x", 1<<20)+"\nthe last line\n"), 0o600))
	b, err := ReadTail(log, 100)
	require.NoError(t, err)
	assert.Len(t, b, 100)
	assert.True(t, strings.HasSuffix(string(b), "x\nthe last line\n"))
	short := filepath.Join(dir, "short.log")
	require.NoError(t, os.WriteFile(short, []byte("one\n"), 0o600))
	b, err = ReadTail(short, 100)
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(b))
}
