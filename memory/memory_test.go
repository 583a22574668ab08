package memory

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/testbound"
)

// env gives a test a private HOME and project folder, with every override
// cleared, and returns the project folder.
func env(t *testing.T) (tmp, proj string) {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	for _, k := range []string{"CLAUDE_CONFIG_DIR", "REPLHUB_MEMORY_DIR", "CLAUDE_CODE_PROJECT_DIR_NAME"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", filepath.Join(tmp, "home"))
	proj = filepath.Join(tmp, "proj")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	return tmp, proj
}

func git(t *testing.T, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	out, err := exec.Command("git", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"/home/user/scm/myproject":  "-home-user-scm-myproject",
		"/home/user/code/my.app_v2": "-home-user-code-my-app-v2",
		"/a b/\u00e9x":              "-a-b--x",
		"/x/\U0001F600y":            "-x---y",
		"/bad/\xffbyte":             "-bad--byte",
	} {
		assert.Equal(t, want, Slug(in), in)
	}
}

func TestDir(t *testing.T) {
	tmp, proj := env(t)
	d, err := Dir(proj)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(tmp, "home", ".claude", "projects", Slug(proj), "memory"), d)

	t.Run("config dir", func(t *testing.T) {
		t.Setenv("CLAUDE_CONFIG_DIR", filepath.Join(tmp, "cfg"))
		d, err := Dir(proj)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(tmp, "cfg", "projects", Slug(proj), "memory"), d)
		t.Setenv("CLAUDE_CODE_PROJECT_DIR_NAME", "short")
		d, err = Dir(proj)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(tmp, "cfg", "projects", "short", "memory"), d)
		t.Setenv("CLAUDE_CODE_PROJECT_DIR_NAME", "../up")
		_, err = Dir(proj)
		assert.ErrorContains(t, err, "not a folder name")
	})
	t.Run("override", func(t *testing.T) {
		t.Setenv("REPLHUB_MEMORY_DIR", "rel/mem")
		d, err := Dir(proj)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(proj, "rel", "mem"), d)
		t.Setenv("REPLHUB_MEMORY_DIR", "/abs/mem/")
		d, _ = Dir(proj)
		assert.Equal(t, "/abs/mem", d)
	})
	t.Run("symlinked cwd", func(t *testing.T) {
		link := filepath.Join(tmp, "link")
		require.NoError(t, os.Symlink(proj, link))
		l, err := Dir(link)
		require.NoError(t, err)
		assert.Equal(t, d, l)
	})
	t.Run("bad cwd", func(t *testing.T) {
		_, err := Dir(filepath.Join(tmp, "nope"))
		assert.ErrorContains(t, err, "memory: cwd ")
		assert.ErrorContains(t, err, "no such file or directory")
	})
	t.Run("long path", func(t *testing.T) {
		deep := filepath.Join(proj, strings.Repeat("d", 50), strings.Repeat("d", 50), strings.Repeat("d", 50), strings.Repeat("d", 50), strings.Repeat("d", 50))
		require.NoError(t, os.MkdirAll(deep, 0o755))
		_, err := Dir(deep)
		assert.ErrorContains(t, err, "set REPLHUB_MEMORY_DIR")
		made := filepath.Join(tmp, "home", ".claude", "projects", Slug(deep)[:maxSlug]+"-abc123")
		require.NoError(t, os.MkdirAll(made, 0o700))
		d, err := Dir(deep)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(made, "memory"), d)
	})
}

func TestGitRoot(t *testing.T) {
	tmp, proj := env(t)
	other := filepath.Join(tmp, "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "x"), 0o755))
	assert.Equal(t, filepath.Join(other, "x"), ProjectRoot(filepath.Join(other, "x")), "no repository: the folder itself")

	git(t, "init", "-q", proj)
	sub := filepath.Join(proj, "a", "b")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	assert.Equal(t, proj, ProjectRoot(sub))
	want, _ := Dir(proj)
	got, _ := Dir(sub)
	assert.Equal(t, want, got, "a subfolder shares the repository's memory")

	git(t, "-C", proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
	wt := filepath.Join(tmp, "wt")
	git(t, "-C", proj, "worktree", "add", "-q", wt)
	fi, err := os.Stat(filepath.Join(wt, ".git"))
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "a linked worktree has a .git file")
	assert.Equal(t, proj, ProjectRoot(filepath.Join(wt)), "a worktree shares its main worktree's memory")

	// A .git file without a commondir (a submodule's) is a root of its own.
	mod := filepath.Join(tmp, "mod")
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "gitdirs", "m"), 0o755))
	require.NoError(t, os.MkdirAll(mod, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, ".git"), []byte("gitdir: ../gitdirs/m\n"), 0o644))
	assert.Equal(t, mod, ProjectRoot(mod))
}

func TestCleanName(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "notes", want: "notes.md"},
		{in: "notes.md", want: "notes.md"},
		{in: "feedback_testing.md", want: "feedback_testing.md"},
		{in: "a-b.c", want: "a-b.c.md"},
		{in: strings.Repeat("x", 197), want: strings.Repeat("x", 197) + ".md"},
		{in: "", err: "empty name"},
		{in: "a\x00b", err: "NUL"},
		{in: "a/b", err: "is a path"},
		{in: `..\x`, err: "is a path"},
		{in: "/etc/passwd", err: "is a path"},
		{in: ".hidden", err: "starts with a dot"},
		{in: "..", err: "starts with a dot"},
		{in: "a..b", err: "'..'"},
		{in: "a.", err: "'..'"},
		{in: "a b", err: "character other"},
		{in: "n\u00e9", err: "character other"},
		{in: "a\nb", err: "character other"},
		{in: "[x](y)", err: "character other"},
		{in: strings.Repeat("x", 198), err: "at most 200"},
		{in: "MEMORY", err: "is the index"},
		{in: "memory.md", err: "is the index"},
	} {
		got, err := CleanName(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "%q", c.in)
			if err != nil {
				assert.True(t, strings.HasPrefix(err.Error(), "memory: "))
				assert.NotContains(t, err.Error(), "\n", "one line")
			}
			continue
		}
		assert.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, got)
	}
}

// checkName holds for every name CleanName accepts: a plain file in the
// folder, never a path out of it, and stable.
func checkName(t *testing.T, in string) {
	got, err := CleanName(in)
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("%q: error of more than one line: %v", in, err)
		}
		return
	}
	dir := "/m/memory"
	p := filepath.Join(dir, got)
	if filepath.Dir(p) != dir || filepath.Base(p) != got {
		t.Fatalf("%q -> %q leaves the folder", in, got)
	}
	if !strings.HasSuffix(got, ".md") || strings.HasPrefix(got, ".") || strings.Contains(got, "..") || len(got) > MaxName {
		t.Fatalf("%q -> %q", in, got)
	}
	if strings.EqualFold(got, Index) {
		t.Fatalf("%q -> the index", in)
	}
	if again, err := CleanName(got); err != nil || again != got {
		t.Fatalf("%q -> %q -> %q, %v", in, got, again, err)
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"notes", "a/b", "..", ".x", "MEMORY", "a..b", "x\x00", "é", strings.Repeat("y", 300), "../../etc/passwd", "a.md.md"} {
		f.Add(s)
	}
	f.Fuzz(checkName)
}

// TestNamesExhaustive is the fuzz target run over every name of up to three
// characters from an alphabet of the characters that matter, so that plain
// `go test` covers what a short fuzz run would.
func TestNamesExhaustive(t *testing.T) {
	alpha := []string{"a", ".", "/", "\\", "\x00", "-", "_", "m", "d", " ", "é", "\n"}
	var walk func(prefix string, n int)
	walk = func(prefix string, n int) {
		checkName(t, prefix)
		checkName(t, prefix+".md")
		if n == 0 {
			return
		}
		for _, c := range alpha {
			walk(prefix+c, n-1)
		}
	}
	walk("", 3)
}

func readIndex(t *testing.T, s *Store) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, Index))
	require.NoError(t, err)
	return string(b)
}

func TestStore(t *testing.T) {
	_, proj := env(t)
	s, err := Open(proj)
	require.NoError(t, err)

	text, err := s.ListText()
	require.NoError(t, err)
	assert.Equal(t, "memory: "+s.Dir+" (no entries)\n", text, "a folder not made yet is empty")

	msg, err := s.Write("testing", "Run go test -race.\n", "how tests run")
	require.NoError(t, err)
	assert.Equal(t, "wrote testing.md (19 bytes); MEMORY.md line added", msg)
	got, err := s.Read("testing.md")
	require.NoError(t, err)
	assert.Equal(t, "Run go test -race.\n", got)
	assert.Equal(t, "- [testing](testing.md) — how tests run\n", readIndex(t, s))
	for p, mode := range map[string]os.FileMode{s.Dir: 0o700, filepath.Join(s.Dir, "testing.md"): 0o600} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, mode, fi.Mode().Perm(), p)
	}

	msg, err = s.Write("testing", "v2", "")
	require.NoError(t, err)
	assert.Contains(t, msg, "line kept")
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, Index), []byte("# Memory\n\n- [Tests](testing.md) - old hook\n- [Tests](testing.md) - twice\n- [Other](https://x.org)\n"), 0o600))
	msg, err = s.Write("testing", "v3", "new hook")
	require.NoError(t, err)
	assert.Contains(t, msg, "line updated")
	assert.Equal(t, "# Memory\n\n- [Tests](testing.md) — new hook\n- [Other](https://x.org)\n", readIndex(t, s), "title kept, duplicate gone, the rest untouched")

	_, err = s.Write("b", "bee", "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "loose.md"), []byte("no line"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, ".hidden.md"), []byte("skipped"), 0o600))
	f, err := os.OpenFile(filepath.Join(s.Dir, Index), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	f.WriteString("* [Gone](./gone.md): was here\n- [Out](../out.md) — not ours\n")
	f.Close()
	es, err := s.List()
	require.NoError(t, err)
	assert.Equal(t, []Entry{
		{Name: "testing.md", Title: "Tests", Hook: "new hook", Indexed: true},
		{Name: "b.md", Title: "b", Indexed: true},
		{Name: "gone.md", Title: "Gone", Hook: "was here", Indexed: true, Missing: true},
		{Name: "loose.md"},
	}, es)
	text, _ = s.ListText()
	assert.Equal(t, "memory: "+s.Dir+" (4 entries)\n"+
		"testing.md  new hook\n"+
		"b.md  \n"+
		"gone.md  was here  (file missing)\n"+
		"loose.md  (no line in MEMORY.md)\n", text)

	require.NoError(t, os.Chmod(filepath.Join(s.Dir, "b.md"), 0o644))
	_, err = s.Write("b", "bee 2", "")
	require.NoError(t, err)
	fi, _ := os.Stat(filepath.Join(s.Dir, "b.md"))
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "a rewrite keeps the mode")

	t.Run("bad hook", func(t *testing.T) {
		for hook, why := range map[string]string{"a\nb": "one line", strings.Repeat("h", 301): "at most 300", "a\x00": "NUL"} {
			_, err := s.Write("c", "t", hook)
			assert.ErrorContains(t, err, why)
		}
		_, err := s.Read("c")
		assert.ErrorContains(t, err, "memory: no entry c.md in "+s.Dir)
	})

	t.Run("edit", func(t *testing.T) {
		_, err := s.Write("e", "one two two three\n", "h")
		require.NoError(t, err)
		msg, err := s.Edit("e", "one", "uno")
		require.NoError(t, err)
		assert.Equal(t, "edited e.md (18 bytes)", msg)
		for _, c := range []struct{ old, why string }{
			{"two", "occurs 2 times in e.md"},
			{"four", "not found in e.md"},
			{"", "old is empty"},
		} {
			_, err := s.Edit("e", c.old, "x")
			assert.ErrorContains(t, err, c.why)
		}
		_, err = s.Edit("nope", "a", "b")
		assert.ErrorContains(t, err, "no entry nope.md")
		got, _ := s.Read("e")
		assert.Equal(t, "uno two two three\n", got, "a refused edit changes nothing")
	})

	t.Run("delete", func(t *testing.T) {
		msg, err := s.Delete("e")
		require.NoError(t, err)
		assert.Equal(t, "deleted e.md and its MEMORY.md line", msg)
		assert.NotContains(t, readIndex(t, s), "(e.md)")
		msg, err = s.Delete("gone")
		require.NoError(t, err)
		assert.Equal(t, "deleted the MEMORY.md line of gone.md (its file was already gone)", msg)
		msg, err = s.Delete("loose.md")
		require.NoError(t, err)
		assert.Equal(t, "deleted loose.md (it had no MEMORY.md line)", msg)
		_, err = s.Delete("loose.md")
		assert.ErrorContains(t, err, "memory: no entry loose.md in ")
	})

	names, _ := readDirNames(s.Dir)
	for _, n := range names {
		assert.False(t, strings.HasSuffix(n, ".tmp"), "temporary file %s left", n)
	}
}

func TestCRLFAndRawBytesKept(t *testing.T) {
	_, proj := env(t)
	s, err := Open(proj)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(s.Dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, Index), []byte("- [A](a.md) — h\r\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "a.md"), []byte("x\r\n\xff y\r\n"), 0o600))
	_, err = s.Edit("a", "y", "z")
	require.NoError(t, err)
	b, _ := os.ReadFile(filepath.Join(s.Dir, "a.md"))
	assert.Equal(t, "x\r\n\xff z\r\n", string(b))
	_, err = s.Write("a", "t", "h2")
	require.NoError(t, err)
	assert.Equal(t, "- [A](a.md) — h2\r\n", readIndex(t, s))
}

// An entry is read into an agent's context whole: one past MaxEntry is
// neither written nor read, an edit may not grow one past it, and a FIFO
// in an entry's place, or the index's, is an error, not a tool call that
// hangs. A worktree whose repository's commondir is a FIFO is a root of
// its own, found at once.
func TestEntriesBounded(t *testing.T) {
	tmp, proj := env(t)
	s, err := Open(proj)
	require.NoError(t, err)

	_, err = s.Write("big", strings.Repeat("x", MaxEntry+1), "")
	assert.ErrorContains(t, err, "at most 1048576 (1 MiB)")
	_, err = s.Write("full", strings.Repeat("x", MaxEntry-1)+"y", "")
	require.NoError(t, err)
	_, err = s.Edit("full", "y", "yy")
	assert.ErrorContains(t, err, "at most 1048576")
	got, err := s.Read("full")
	require.NoError(t, err)
	assert.Len(t, got, MaxEntry, "the refused edit changed nothing")
	require.NoError(t, os.WriteFile(filepath.Join(s.Dir, "grown.md"), []byte(strings.Repeat("x", MaxEntry+1)), 0o600))
	_, err = s.Read("grown")
	assert.ErrorContains(t, err, "more than 1048576")

	require.NoError(t, syscall.Mkfifo(filepath.Join(s.Dir, "pipe.md"), 0o600))
	require.NoError(t, os.Remove(filepath.Join(s.Dir, Index)))
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.Dir, Index), 0o600))
	wt, gitdir := filepath.Join(tmp, "wt"), filepath.Join(tmp, "repo", ".git", "worktrees", "wt")
	require.NoError(t, os.MkdirAll(wt, 0o755))
	require.NoError(t, os.MkdirAll(gitdir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o600))
	require.NoError(t, syscall.Mkfifo(filepath.Join(gitdir, "commondir"), 0o600))
	testbound.Within(t, 10*time.Second, "reading FIFOs", func() {
		_, err := s.Read("pipe")
		assert.ErrorContains(t, err, "not a regular file")
		_, err = s.Edit("pipe", "a", "b")
		assert.ErrorContains(t, err, "not a regular file")
		_, err = s.Write("other", "text", "")
		assert.ErrorContains(t, err, "not a regular file")
		assert.Equal(t, wt, ProjectRoot(wt))
	})
}
