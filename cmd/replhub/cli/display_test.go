package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

func TestSaveDisplay(t *testing.T) {
	state := t.TempDir()
	e := &env{getenv: func(k string) string {
		return map[string]string{"XDG_STATE_HOME": state, "XDG_RUNTIME_DIR": t.TempDir(), "HOME": t.TempDir()}[k]
	}}
	r := &wire.Result{Session: "../evil name", Cell: 3, Display: []wire.Display{
		{MIME: "image/png", Data: []byte("png")}, {MIME: "text/html", Text: "t"}, {MIME: "image/svg+xml", Data: []byte("<svg/>"), Text: "<svg/>"},
		{MIME: "image/png", Data: []byte("png2")},
	}}
	require.NoError(t, e.saveDisplay(&wire.Result{}))
	require.NoError(t, e.saveDisplay(r))
	d := filepath.Dir(r.Display[0].Path)
	require.NoError(t, os.WriteFile(filepath.Join(d, "old.png"), nil, 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(d, "old.png"), time.Now(), time.Now().Add(-8*24*time.Hour)))
	require.NoError(t, os.WriteFile(filepath.Join(d, "notes.txt"), nil, 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(d, "notes.txt"), time.Now(), time.Now().Add(-8*24*time.Hour)))

	for i, want := range []string{"png", "", "<svg/>", "png2"} {
		it := r.Display[i]
		assert.Nil(t, it.Data)
		if want == "" {
			assert.Empty(t, it.Path)
			assert.Equal(t, "t", it.Text)
			continue
		}
		assert.Empty(t, it.Text)
		assert.Regexp(t, `/display/\.\._evil_name-3-\d-\d+\.(png|svg)$`, it.Path)
		b, err := os.ReadFile(it.Path)
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
		fi, _ := os.Stat(it.Path)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	fi, err := os.Stat(d)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	// A later save removes images older than a week, and nothing else.
	require.NoError(t, e.saveDisplay(&wire.Result{Session: "s", Display: []wire.Display{{MIME: "image/png", Data: []byte("x")}}}))
	assert.NoFileExists(t, filepath.Join(d, "old.png"))
	assert.FileExists(t, filepath.Join(d, "notes.txt"))
	assert.FileExists(t, r.Display[0].Path)
}
