package cmdenv

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

func TestSaveDisplay(t *testing.T) {
	state := t.TempDir()
	e := &Env{Getenv: func(k string) string {
		return map[string]string{"XDG_STATE_HOME": state, "XDG_RUNTIME_DIR": t.TempDir(), "HOME": t.TempDir()}[k]
	}}
	r := &wire.Result{Session: "../evil name", Cell: 3, Display: []wire.Display{
		{MIME: "image/png", Data: []byte("png")}, {MIME: "text/html", Text: "t"}, {MIME: "image/svg+xml", Data: []byte("<svg/>"), Text: "<svg/>"},
		{MIME: "image/png", Data: []byte("png2")},
	}}
	require.NoError(t, e.SaveDisplay(&wire.Result{}))
	require.NoError(t, e.SaveDisplay(r))
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
	require.NoError(t, e.SaveDisplay(&wire.Result{Session: "s", Display: []wire.Display{{MIME: "image/png", Data: []byte("x")}}}))
	assert.NoFileExists(t, filepath.Join(d, "old.png"))
	assert.FileExists(t, filepath.Join(d, "notes.txt"))
	assert.FileExists(t, r.Display[0].Path)
}

// A group's images go to files named after each host, and its --json
// lines carry their paths, not their bytes, as a single result's does.
func TestSaveDisplayGroup(t *testing.T) {
	state := t.TempDir()
	e := &Env{Getenv: func(k string) string {
		return map[string]string{"XDG_STATE_HOME": state, "XDG_RUNTIME_DIR": t.TempDir(), "HOME": t.TempDir()}[k]
	}}
	var out bytes.Buffer
	e.IO.Out = &out
	host := func(name, png string) wire.HostResult {
		return wire.HostResult{Host: name, Result: &wire.Result{Session: "plots@" + name, Cell: 2, Status: wire.StatusOK,
			Display: []wire.Display{{MIME: "text/html", Text: "t"}, {MIME: "image/png", Data: []byte(png)},
				{MIME: "image/svg+xml", Data: []byte("<svg/>"), Text: "<svg/>"}}}}
	}
	r := &wire.Result{Session: "plots", Status: wire.StatusOK, Fan: []wire.HostResult{
		host("lab-1", "one"), {Host: "lab-3", Result: &wire.Result{Status: wire.StatusFailed}, Failure: "no route"}, host("lab-2", "two")}}
	require.NoError(t, e.PrintResult(r, true))
	assert.NotContains(t, out.String(), `"data"`)
	assert.NotContains(t, out.String(), "<svg/>")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	for i, want := range []struct{ host, png string }{{"lab-1", "one"}, {"lab-2", "two"}} {
		var h wire.HostResult
		require.NoError(t, json.Unmarshal([]byte(lines[2*i]), &h))
		require.Len(t, h.Display, 3)
		assert.Equal(t, "t", h.Display[0].Text)
		assert.Regexp(t, `/display/plots_`+want.host+`-2-2-\d+\.png$`, h.Display[1].Path)
		assert.Regexp(t, `/display/plots_`+want.host+`-2-3-\d+\.svg$`, h.Display[2].Path)
		b, err := os.ReadFile(h.Display[1].Path)
		require.NoError(t, err)
		assert.Equal(t, want.png, string(b))
	}
}
