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
	// /dev/null, where a setting is pointed to turn it off, reads empty.
	null := filepath.Join(dir, "null")
	require.NoError(t, os.Symlink(os.DevNull, null))
	b, err = ReadUserFile(null, 5)
	require.NoError(t, err)
	assert.Empty(t, b)
	_, err = ReadFile(os.DevNull, 5)
	assert.ErrorContains(t, err, "not a regular file", "the hub's own files are files")
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

// OpenAppend opens a log, made 0600, or /dev/null, and refuses a FIFO at
// once: opened for writing, one that nobody reads blocks for good.
func TestOpenAppend(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "hub.log")
	for i := 0; i < 2; i++ {
		f, err := OpenAppend(log)
		require.NoError(t, err)
		_, err = f.WriteString("line\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "line\nline\n", string(b))
	fi, err := os.Stat(log)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	f, err := OpenAppend(os.DevNull)
	require.NoError(t, err)
	f.Close()

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	testbound.Within(t, 10*time.Second, "OpenAppend of a FIFO", func() {
		_, err := OpenAppend(fifo)
		assert.ErrorContains(t, err, "not a regular file")
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

// A user's file linked to one that says it is regular but waits for what
// it gives (/proc/kmsg) is refused once it has given no end for readWait,
// not read for ever: a config.json or an ssh key linked there would hold
// every session's start.
func TestReadUserFileOfAFileThatWaits(t *testing.T) {
	const kmsg = "/proc/kmsg"
	f, err := os.Open(kmsg)
	if err != nil {
		t.Skipf("%s cannot be read here: %v", kmsg, err)
	}
	f.Close()
	old := readWait
	readWait = 300 * time.Millisecond
	t.Cleanup(func() { readWait = old })
	link := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.Symlink(kmsg, link))
	done := make(chan error, 1)
	go func() {
		_, err := ReadUserFile(link, 1<<30)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "it gave no end within 300ms: a file that waits for what it gives (such as /proc/kmsg) is not read")
	case <-time.After(10 * time.Second):
		t.Fatal("the read of a file that waits did not end")
	}
}
