package payload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/tests/hubtest"
)

// bcStart runs one remote-style start of py on the default payload with
// cache as its XDG_CACHE_HOME, and returns the ready frame's word on the
// bytecode cache; the first cell asks the worker the same, and must agree.
func bcStart(t *testing.T, py, cache string) string {
	t.Helper()
	ready, value := stubRun(t, py, cache, "__import__('sys').modules['replhub_worker'].BYTECODE")
	assert.Equal(t, "'"+ready.Bytecode+"'", value, "the worker's word is the ready frame's")
	return ready.Bytecode
}

// stubRun starts py on the stub and the default payload, as a host does,
// runs code as its first cell, and returns the ready frame and the cell's
// value.
func stubRun(t *testing.T, py, cache, code string) (proto.Ready, string) {
	t.Helper()
	p, err := Build(nil, "--stdio")
	require.NoError(t, err)
	cell, _ := json.Marshal(code)
	frame := `{"op":"exec","cell":1,"code":` + string(cell) + `,"fence":"F"}` + "\n"
	cmd := exec.Command(py, "-c", boot.Stub)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "HOME="+filepath.Dir(cache))
	cmd.Dir = os.TempDir()
	// stdin stays open until the cell is done: at its end the worker exits.
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer in.Close()
	go in.Write(append(append([]byte(nil), p...), frame...))
	r := bufio.NewReader(out)
	var lines []string
	for i := 0; i < 3; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("%s: reading frames: %v; read %q; stderr: %s", py, err, lines, stderr.String())
		}
		lines = append(lines, line)
	}
	var ready proto.Ready
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &ready), lines[1])
	var done struct{ Status, Value string }
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &done), lines[2])
	assert.Equal(t, "ok", done.Status, lines[2])
	return ready, done.Value
}

// bcFile is the one cache file under cache.
func bcFile(t *testing.T, cache string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cache, "replhub", "*.bc"))
	require.Len(t, files, 1, "one cache file for one payload and one Python")
	return files[0]
}

// Every Python keeps the compiled payload at its first start and runs it
// at the next, in a folder and file only its user can touch.
func TestBytecodeCacheEachPython(t *testing.T) {
	ps := hubtest.Pythons()
	for _, v := range slices.Sorted(maps.Keys(ps)) {
		py := ps[v]
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			cache := filepath.Join(t.TempDir(), "cache")
			assert.Equal(t, "compiled, cached (no cache)", bcStart(t, py, cache))
			f := bcFile(t, cache)
			fi, err := os.Stat(f)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
			di, err := os.Stat(filepath.Dir(f))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
			assert.Equal(t, "cached", bcStart(t, py, cache))

			// What boot.py and the worker import, against what the
			// interpreter imports by itself (and threading, which the
			// worker's threads need: on 3.6 and 3.7 it imports traceback).
			out, err := exec.Command(py, "-c", "import sys, threading; print(list(sys.modules))").Output()
			require.NoError(t, err)
			_, value := stubRun(t, py, cache, "import sys; [m for m in sys.modules if m not in "+strings.TrimSpace(string(out))+"]")
			for _, heavy := range []string{"json", "re", "linecache", "tokenize", "ast", "importlib.abc", "importlib.util", "pathlib", "typing", "socket", "signal", "enum", "hashlib", "hmac"} {
				assert.NotContains(t, value, "'"+heavy+"'", "a remote start imports %s", heavy)
			}
		})
	}
}

// What the cache holds is run only when it passes every check; else the
// sources are compiled, and the file replaced where the folder is ours.
func TestBytecodeCacheDistrust(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	require.Equal(t, "compiled, cached (no cache)", bcStart(t, py, cache))
	f := bcFile(t, cache)
	good, err := os.ReadFile(f)
	require.NoError(t, err)

	damage := map[string]func(){
		"truncated": func() { os.WriteFile(f, good[:len(good)/2], 0o600) },
		"one byte changed": func() {
			b := append([]byte(nil), good...)
			b[len(b)-10] ^= 1
			os.WriteFile(f, b, 0o600)
		},
		"empty": func() { os.WriteFile(f, nil, 0o600) },
		"made under another key": func() {
			b := append([]byte(nil), good...)
			b[5] ^= 1 // the MAC
			os.WriteFile(f, b, 0o600)
		},
	}
	for what, do := range damage {
		do()
		assert.Equal(t, "compiled, cached (cache failed its check)", bcStart(t, py, cache), what)
		b, _ := os.ReadFile(f)
		assert.Equal(t, good, b, "%s: the file is made anew", what)
	}

	// Writable by others: not run, and replaced by one of ours.
	os.Chmod(f, 0o666)
	assert.Equal(t, "compiled, cached (cache not ours)", bcStart(t, py, cache))
	fi, _ := os.Stat(f)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// A link to a good cache elsewhere is not followed.
	other := filepath.Join(t.TempDir(), "elsewhere.bc")
	require.NoError(t, os.WriteFile(other, good, 0o600))
	os.Remove(f)
	require.NoError(t, os.Symlink(other, f))
	assert.Equal(t, "compiled, cached (no cache)", bcStart(t, py, cache))
	fi, _ = os.Lstat(f)
	assert.True(t, fi.Mode().IsRegular(), "the link is replaced by a file")

	// Another user's file (the test runs as root to make one).
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chown(f, 65534, 65534))
		assert.Equal(t, "compiled, cached (cache not ours)", bcStart(t, py, cache))
		fi, _ = os.Stat(f)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid, "replaced by one of ours")
	}

	// A folder others may write to is neither read nor written.
	require.NoError(t, os.Chmod(filepath.Dir(f), 0o770))
	assert.Equal(t, "compiled: cache folder not private (cache folder not private)", bcStart(t, py, cache))
	require.NoError(t, os.Chmod(filepath.Dir(f), 0o700))

	// A cache folder that cannot be made (a read-only home, a file in its
	// way): the start goes on from the sources.
	blocked := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o600))
	assert.Equal(t, "compiled: cannot make the cache folder (no cache)", bcStart(t, py, filepath.Join(blocked, "cache")))
}

// Without a home folder that is a full path (HOME relative, or a user
// not in passwd) nothing is written anywhere, not even under the current
// folder.
func TestBytecodeCacheNoHome(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	assert.Equal(t, "compiled: no home folder (no home folder)", bcStart(t, py, "relative/cache"))
	_, err = os.Stat(filepath.Join(os.TempDir(), "relative"))
	assert.True(t, os.IsNotExist(err))
}

// A cache folder below a folder that another user owns, or that others
// may write to (not sticky, as /tmp is), is neither made, read nor
// written: that user could move it under the session's writes. So a root
// session whose sudo keeps the caller's HOME keeps no cache there.
func TestBytecodeCacheWayNotOurs(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o777))
	cases := map[string]string{"writable by others": open}
	if os.Geteuid() == 0 {
		home := filepath.Join(t.TempDir(), "alice")
		require.NoError(t, os.Mkdir(home, 0o755))
		require.NoError(t, os.Chown(home, 65534, 65534))
		cases["another user's home"] = home
	}
	for what, dir := range cases {
		cache := filepath.Join(dir, ".cache")
		assert.Equal(t, "compiled: cache folder not private (no cache)", bcStart(t, py, cache), what)
		_, err := os.Lstat(cache)
		assert.True(t, os.IsNotExist(err), "%s: nothing is made there", what)

		// Nor is a private folder there that the user made read.
		require.NoError(t, os.MkdirAll(filepath.Join(cache, "replhub"), 0o700))
		assert.Equal(t, "compiled: cache folder not private (cache folder not private)", bcStart(t, py, cache), what)
		files, _ := filepath.Glob(filepath.Join(cache, "replhub", "*"))
		assert.Empty(t, files, what)
	}
}

// A cache home that is a symbolic link (a small home's .cache on a bigger
// disk) is followed where what it points to is safe.
func TestBytecodeCacheHomeLinked(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	real, home := filepath.Join(t.TempDir(), "big"), t.TempDir()
	require.NoError(t, os.Mkdir(real, 0o700))
	cache := filepath.Join(home, ".cache")
	require.NoError(t, os.Symlink(real, cache))
	assert.Equal(t, "compiled, cached (no cache)", bcStart(t, py, cache))
	assert.Equal(t, "cached", bcStart(t, py, cache))
	bcFile(t, real)
}

// Code compiled under -OO (PYTHONOPTIMIZE=2) has no docstrings: it is
// kept apart from the plain one, as Python keeps .opt-2.pyc apart, so a
// later plain start still has them.
func TestBytecodeCacheOptimizeApart(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	cache := filepath.Join(t.TempDir(), "cache")
	doc := "__import__('sys').modules['replhub_worker'].Channel.__doc__ is not None"
	t.Setenv("PYTHONOPTIMIZE", "2")
	ready, value := stubRun(t, py, cache, doc)
	assert.Equal(t, "compiled, cached (no cache)", ready.Bytecode)
	assert.Equal(t, "False", value)
	os.Unsetenv("PYTHONOPTIMIZE")
	ready, value = stubRun(t, py, cache, doc)
	assert.Equal(t, "compiled, cached (no cache)", ready.Bytecode, "not the -OO code")
	assert.Equal(t, "True", value, "docstrings")
	ready, _ = stubRun(t, py, cache, doc)
	assert.Equal(t, "cached", ready.Bytecode)
	files, _ := filepath.Glob(filepath.Join(cache, "replhub", "*.bc"))
	assert.Len(t, files, 2)
}
