package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entries lists dir's file names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestWriteFile(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(string, []byte, os.FileMode) error
	}{{"plain", WriteFile}, {"sync", WriteFileSync}} {
		t.Run(c.name, func(t *testing.T) {
			// The temporary file is made beside the file, never in $TMPDIR.
			other := t.TempDir()
			t.Setenv("TMPDIR", other)
			dir := t.TempDir()
			p := filepath.Join(dir, "note.json")

			require.NoError(t, c.write(p, []byte("first"), 0o640))
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, "first", string(b))
			assert.Equal(t, os.FileMode(0o640), mode(t, p), "the mode asked for, whatever the umask")

			require.NoError(t, c.write(p, []byte("second, longer"), 0o600))
			b, _ = os.ReadFile(p)
			assert.Equal(t, "second, longer", string(b))
			assert.Equal(t, os.FileMode(0o600), mode(t, p))

			require.NoError(t, os.Chmod(p, 0o644))
			require.NoError(t, c.write(p, []byte("3"), 0))
			assert.Equal(t, os.FileMode(0o644), mode(t, p), "0 keeps the replaced file's mode")
			fresh := filepath.Join(dir, "fresh")
			require.NoError(t, c.write(fresh, nil, 0))
			assert.Equal(t, os.FileMode(0o600), mode(t, fresh), "and makes a new file 0600")

			assert.ElementsMatch(t, []string{"note.json", "fresh"}, entries(t, dir), "no temporary file is left")
			assert.Empty(t, entries(t, other))
		})
	}
}

// A write that fails leaves the old file as it was and no temporary file.
func TestWriteFileFails(t *testing.T) {
	dir := t.TempDir()
	// Renaming a file over a folder that is not empty fails, for root too.
	p := filepath.Join(dir, "taken")
	require.NoError(t, os.MkdirAll(filepath.Join(p, "inside"), 0o755))
	err := WriteFileSync(p, []byte("x"), 0o600)
	require.Error(t, err)
	var le *os.LinkError
	assert.ErrorAs(t, err, &le)
	assert.Equal(t, []string{"taken"}, entries(t, dir))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())

	assert.Error(t, WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600), "no folder, no file")
	assert.Equal(t, []string{"taken"}, entries(t, dir))
}
