package hublog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/atomicfile"
)

// A log written far past its bound stays under it, keeps its last lines
// whole after the line that says it was cut, and a second descriptor that
// appends to it (the hub's standard error) goes on at its new end.
func TestLogIsCutToItsLastLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hub.log")
	f, err := atomicfile.OpenAppend(path)
	require.NoError(t, err)
	defer f.Close()
	stderr, err := atomicfile.OpenAppend(path)
	require.NoError(t, err)
	defer stderr.Close()
	const max, keep = 64 << 10, 16 << 10
	w := newWriter(f, path, max, keep)
	for i := range 10000 {
		_, err := fmt.Fprintf(w, "line %d of the log\n", i)
		require.NoError(t, err)
		if i%1000 == 0 {
			fmt.Fprintf(stderr, "stderr %d\n", i)
		}
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.LessOrEqual(t, fi.Size(), int64(max+100), "after line %d", i)
	}
	fmt.Fprintf(stderr, "stderr last\n")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	assert.Contains(t, lines[0], `msg="the log passed 0 MiB: it was cut to its last`)
	for _, l := range lines[1:] {
		assert.Regexp(t, `^(line \d+ of the log|stderr (\d+|last))$`, l)
	}
	assert.Equal(t, "line 9999 of the log", lines[len(lines)-2])
	assert.Equal(t, "stderr last", lines[len(lines)-1], "the other descriptor appends at the new end")
	assert.Contains(t, string(b), "stderr 9000\n")
}

// A log that is short stays as it is.
func TestShortLogIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hub.log")
	require.NoError(t, os.WriteFile(path, []byte("earlier\n"), 0o600))
	f, err := atomicfile.OpenAppend(path)
	require.NoError(t, err)
	defer f.Close()
	w := New(f, path)
	fmt.Fprintf(w, "later\n")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "earlier\nlater\n", string(b))
}

// A log removed while the hub writes to it (rm hub.log) is still cut: the
// file the hub goes on writing, which no name reaches, grew without bound,
// as each cut failed to read its tail by name.
func TestRemovedLogIsStillCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hub.log")
	f, err := atomicfile.OpenAppend(path)
	require.NoError(t, err)
	defer f.Close()
	const max, keep = 64 << 10, 16 << 10
	w := newWriter(f, path, max, keep)
	require.NoError(t, os.Remove(path))
	for i := range 10000 {
		_, err := fmt.Fprintf(w, "line %d of the log\n", i)
		require.NoError(t, err)
	}
	fi, err := f.Stat()
	require.NoError(t, err)
	assert.LessOrEqual(t, fi.Size(), int64(max+100))
}
