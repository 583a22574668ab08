package memory

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// driver runs one request against boot/replhub_toolkit/memory.py and prints
// the answer as JSON: text, or error (ValueError and OSError only; anything
// else is a bug and fails the test with its traceback).
const driver = `
import json, sys
from replhub_toolkit.memory import Memory, clean_name
req = json.loads(sys.argv[1])
m = Memory(req.get("cwd"))
op = req["op"]
def names():
    out = []
    for n in req["names"]:
        try:
            out.append(clean_name(n))
        except ValueError as e:
            out.append("error: " + str(e))
    return out
try:
    if op == "names":
        ans = {"names": names()}
    elif op == "folder":
        ans = {"text": m.folder()}
    elif op == "list":
        ans = {"text": m().__replhub_show__()}
    elif op == "read":
        ans = {"text": m.read(req["name"])}
    elif op == "write":
        ans = {"text": m.write(req["name"], req["text"] * req.get("repeat", 1), index=req.get("index"))}
    elif op == "edit":
        ans = {"text": m.edit(req["name"], req["old"], req["new"])}
    elif op == "delete":
        ans = {"text": m.delete(req["name"])}
except (ValueError, OSError) as e:
    ans = {"error": str(e)}
print(json.dumps(ans))
`

type pyAnswer struct {
	Text  string   `json:"text"`
	Error string   `json:"error"`
	Names []string `json:"names"`
}

// testPythons returns python3 on PATH and, where pyenv has one, a 3.6: the
// oldest Python the toolkit supports.
func testPythons(t *testing.T) []string {
	var out []string
	if p, err := exec.LookPath("python3"); err == nil {
		out = append(out, p)
	}
	if root, err := exec.Command("pyenv", "root").Output(); err == nil {
		m, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(root)), "versions", "3.6*", "bin", "python3"))
		if len(m) > 0 {
			out = append(out, m[len(m)-1])
		}
	}
	if len(out) == 0 {
		t.Skip("no python3")
	}
	return out
}

func runPy(t *testing.T, py string, req map[string]any) pyAnswer {
	t.Helper()
	boot, err := filepath.Abs(filepath.Join("..", "boot"))
	require.NoError(t, err)
	b, err := json.Marshal(req)
	require.NoError(t, err)
	// A FIFO read the plain way would block for good.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", driver, string(b))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+boot, "PYTHONIOENCODING=utf-8")
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "%s", stderr)
	var a pyAnswer
	require.NoError(t, json.Unmarshal(out, &a), "%s", out)
	return a
}

func TestPythonAgrees(t *testing.T) {
	for _, py := range testPythons(t) {
		t.Run(filepath.Base(py), func(t *testing.T) { pythonAgrees(t, py) })
	}
}

func pythonAgrees(t *testing.T, py string) {
	tmp, _ := env(t)
	// A project whose path needs every rule of the slug.
	proj := filepath.Join(tmp, "My proj.é😀_x")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "sub"), 0o755))
	git(t, "init", "-q", proj)
	git(t, "-C", proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
	wt := filepath.Join(tmp, "wt")
	git(t, "-C", proj, "worktree", "add", "-q", wt)
	plain := filepath.Join(tmp, "plain")
	require.NoError(t, os.MkdirAll(plain, 0o755))

	t.Run("folder", func(t *testing.T) {
		for _, cwd := range []string{proj, filepath.Join(proj, "sub"), wt, plain} {
			want, err := Dir(cwd)
			require.NoError(t, err)
			assert.Equal(t, want, runPy(t, py, map[string]any{"op": "folder", "cwd": cwd}).Text, cwd)
		}
		t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(tmp, "cfg"))
		want, _ := Dir(proj)
		assert.Equal(t, want, runPy(t, py, map[string]any{"op": "folder", "cwd": proj}).Text)
	})

	t.Run("names", func(t *testing.T) {
		var names []string
		alpha := []string{"a", ".", "/", "\\", "\x00", "-", "_", "M", " ", "é", "\n"}
		var walk func(prefix string, n int)
		walk = func(prefix string, n int) {
			names = append(names, prefix, prefix+".md")
			for _, c := range alpha {
				if n > 0 {
					walk(prefix+c, n-1)
				}
			}
		}
		walk("", 2)
		names = append(names, "MEMORY", "memory.md", strings.Repeat("x", 197), strings.Repeat("x", 198), "feedback_testing")
		got := runPy(t, py, map[string]any{"op": "names", "names": names}).Names
		require.Len(t, got, len(names))
		for i, n := range names {
			want, err := CleanName(n)
			if err != nil {
				want = "error: " + err.Error()
			}
			assert.Equal(t, want, got[i], "%q", n)
		}
	})

	t.Run("entries", func(t *testing.T) {
		s, err := Open(proj)
		require.NoError(t, err)
		same := func() {
			t.Helper()
			text, err := s.ListText()
			require.NoError(t, err)
			assert.Equal(t, text, runPy(t, py, map[string]any{"op": "list", "cwd": wt}).Text)
		}
		body := "Tests: `go test -race ./...` — ünïcode 😀\r\nline two\n"
		a := runPy(t, py, map[string]any{"op": "write", "cwd": filepath.Join(proj, "sub"), "name": "testing", "text": body, "index": "how the tests run — fast"})
		require.Empty(t, a.Error)
		got, err := s.Read("testing")
		require.NoError(t, err)
		assert.Equal(t, body, got, "Python writes, Go reads")
		msg, err := s.Write("testing", body, "how the tests run — fast")
		require.NoError(t, err)
		assert.Equal(t, a.Text, strings.Replace(msg, "kept", "added", 1), "same message")
		same()

		_, err = s.Write("go_side", "from Go\n", "written by Go")
		require.NoError(t, err)
		assert.Equal(t, "from Go\n", runPy(t, py, map[string]any{"op": "read", "cwd": proj, "name": "go_side.md"}).Text, "Go writes, Python reads")
		a = runPy(t, py, map[string]any{"op": "write", "cwd": proj, "name": "go_side", "text": "from Go, then Python\n", "index": "rewritten"})
		assert.Equal(t, "wrote go_side.md (21 bytes); MEMORY.md line updated", a.Text)
		same()

		a = runPy(t, py, map[string]any{"op": "edit", "cwd": proj, "name": "testing", "old": "line two", "new": "line 2"})
		require.Empty(t, a.Error)
		got, _ = s.Read("testing")
		assert.Contains(t, got, "line 2\n")
		for _, c := range []struct{ old string }{{"t"}, {"absent"}, {""}} {
			_, gerr := s.Edit("testing", c.old, "x")
			require.Error(t, gerr)
			a = runPy(t, py, map[string]any{"op": "edit", "cwd": proj, "name": "testing", "old": c.old, "new": "x"})
			assert.Equal(t, gerr.Error(), a.Error, "same refusal for %q", c.old)
		}
		_, gerr := s.Write("bad", "x", "two\nlines")
		assert.Equal(t, gerr.Error(), runPy(t, py, map[string]any{"op": "write", "cwd": proj, "name": "bad", "text": "x", "index": "two\nlines"}).Error)

		msg, err = s.Delete("testing")
		require.NoError(t, err)
		a = runPy(t, py, map[string]any{"op": "delete", "cwd": proj, "name": "testing"})
		_, gerr = s.Delete("testing")
		assert.Equal(t, gerr.Error(), a.Error, "deleting twice fails alike")
		assert.Equal(t, "deleted testing.md and its MEMORY.md line", msg)
		same()
		a = runPy(t, py, map[string]any{"op": "delete", "cwd": proj, "name": "go_side"})
		assert.Equal(t, "deleted go_side.md and its MEMORY.md line", a.Text)
		same()

		// Both refuse an entry past MaxEntry alike, and a FIFO in an
		// entry's place at once.
		_, gerr = s.Write("big", strings.Repeat("é", MaxEntry/2+1), "")
		require.Error(t, gerr)
		a = runPy(t, py, map[string]any{"op": "write", "cwd": proj, "name": "big", "text": "é", "repeat": MaxEntry/2 + 1})
		assert.Equal(t, gerr.Error(), a.Error)
		require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "grown.md"), []byte(strings.Repeat("x", MaxEntry+1)), 0o600))
		require.NoError(t, syscall.Mkfifo(filepath.Join(s.Dir, "pipe.md"), 0o600))
		for _, n := range []string{"grown", "pipe"} {
			_, gerr = s.Read(n)
			require.Error(t, gerr)
			a = runPy(t, py, map[string]any{"op": "read", "cwd": proj, "name": n})
			assert.Equal(t, gerr.Error(), a.Error, "the same refusal to read %s", n)
			require.NoError(t, os.Remove(filepath.Join(s.Dir, n+".md")))
		}
		// An entry linked to /dev/null reads empty on both sides.
		require.NoError(t, os.Symlink(os.DevNull, filepath.Join(s.Dir, "nul.md")))
		got, err = s.Read("nul")
		require.NoError(t, err)
		assert.Empty(t, got)
		a = runPy(t, py, map[string]any{"op": "read", "cwd": proj, "name": "nul"})
		assert.Empty(t, a.Error)
		assert.Empty(t, a.Text)
		require.NoError(t, os.Remove(filepath.Join(s.Dir, "nul.md")))
		same()
	})
}
