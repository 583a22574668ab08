package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// A host keeps the compiled payload in its user's cache folder: the first
// session there writes it, the next runs it. A damaged file, or one that
// others may write or own, is not run: the sources are compiled and the
// file replaced. A new hub still trusts what the last one made.
func TestRemoteBytecodeCache(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{SetEnv: map[string]string{"XDG_CACHE_HOME": cache}})
	n := 0
	word := func() string {
		t.Helper()
		n++
		name := "bc" + string(rune('a'+n))
		r := w.Run("exec", name, "__import__('sys').modules['replhub_worker'].BYTECODE", "--host", "lab")
		require.Equal(t, 0, r.Code, "%s", r)
		m := regexp.MustCompile(`Out\[1\]: '(.*)'`).FindStringSubmatch(r.Stdout)
		require.NotNil(t, m, "%s", r)
		w.Run("kill", name)
		return m[1]
	}
	assert.Equal(t, "compiled, cached (no cache)", word())
	files, _ := filepath.Glob(filepath.Join(cache, "replhub", "*.bc"))
	require.Len(t, files, 1)
	f := files[0]
	assert.Equal(t, "cached", word())

	good, err := os.ReadFile(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f, good[:len(good)-100], 0o600))
	assert.Equal(t, "compiled, cached (cache failed its check)", word(), "a truncated file")
	assert.Equal(t, "cached", word(), "replaced")

	require.NoError(t, os.Chmod(f, 0o666))
	assert.Equal(t, "compiled, cached (cache not ours)", word(), "a file others may write")
	fi, err := os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(f, 65534, 65534))
		assert.Equal(t, "compiled, cached (cache not ours)", word(), "another user's file")
		fi, _ = os.Stat(f)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid)
	}

	w.StopHub()
	assert.Equal(t, "cached", word(), "the next hub sends the same key")
}

// A local session keeps the worker's and the toolkit's bytecode beside
// them in the hub's runtime folder, though the caller set
// PYTHONDONTWRITEBYTECODE; the caller's own modules get none, and the
// session sees the caller's setting.
func TestLocalBytecodeKept(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, "mine.py"), []byte("X = 3\n"), 0o600))
	r := e.Run("exec", "s", "import sys, mine; (sys.dont_write_bytecode, mine.X)")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: (True, 3)")
	for _, pat := range []string{"boot-*/__pycache__/worker.*.pyc", "boot-*/replhub_toolkit/__pycache__/__init__.*.pyc"} {
		found, _ := filepath.Glob(filepath.Join(e.Paths.Runtime, pat))
		assert.Len(t, found, 1, pat)
	}
	_, err := os.Stat(filepath.Join(e.Cwd, "__pycache__"))
	assert.True(t, os.IsNotExist(err), "the caller's modules get no bytecode")
}
