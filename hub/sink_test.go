package hub

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A chunk bigger than writePiece, of an odd length, lands whole; the part
// file is gone and the new file takes the source's mode.
func TestSinkWritesInPieces(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "out.bin")
	s, err := NewSink(dest, 0o640)
	require.NoError(t, err)
	var want []byte
	for i := 0; i < 3; i++ {
		chunk := bytes.Repeat([]byte{byte(i + 1)}, 3*writePiece+17)
		require.NoError(t, s.Write(chunk))
		want = append(want, chunk...)
	}
	fi, err := os.Stat(dest + ".replhub-part")
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a part file is private while it fills")
	require.NoError(t, s.Finish())
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got))
	fi, err = os.Stat(dest)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	_, err = os.Stat(dest + ".replhub-part")
	assert.True(t, os.IsNotExist(err))
}

// An aborted sink leaves the destination as it was and no part file.
func TestSinkAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "keep.txt")
	require.NoError(t, os.WriteFile(dest, []byte("old"), 0o644))
	s, err := NewSink(dest, 0o600)
	require.NoError(t, err)
	require.NoError(t, s.Write(bytes.Repeat([]byte("x"), writePiece+1)))
	s.Abort()
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

// A new file takes the source's mode less the umask: a host that sends a
// file as 0777 does not make it writable by all here.
func TestSinkModeLessTheUmask(t *testing.T) {
	mask := umask()
	dest := filepath.Join(t.TempDir(), "out")
	s, err := NewSink(dest, 0o777)
	require.NoError(t, err)
	require.NoError(t, s.Write([]byte("x")))
	require.NoError(t, s.Finish())
	fi, err := os.Stat(dest)
	require.NoError(t, err)
	assert.Equal(t, 0o777&^mask, fi.Mode().Perm(), "the umask is %#o", mask)
}
