package hub

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// --python given for a live session that runs another interpreter says so
// (it names a new session's); the same one, or one it cannot tell, says
// nothing.
func TestPythonNote(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "python3.11")
	require.NoError(t, os.WriteFile(exe, nil, 0o755))
	link := filepath.Join(dir, "python3")
	require.NoError(t, os.Symlink(exe, link))
	s := &Session{name: "s"}
	s.info = wire.SessionInfo{Python: "3.11.7", Executable: exe, Host: "local"}
	cli, mcp := wire.AdviceFor(""), wire.AdviceFor(wire.SurfaceMCP)
	for _, same := range []string{"", "3.11", "3.11.7", "python3.11", exe, link, "python3", "pypy3"} {
		assert.Empty(t, pythonNote(s, same, cli), "%q", same)
	}
	assert.Equal(t, "session 's' runs python 3.11.7 ("+exe+"): --python 3.12 names the interpreter of a new session only; `replhub kill s`, then run again to start it on 3.12",
		pythonNote(s, "3.12", cli))
	assert.Contains(t, pythonNote(s, "3.1", mcp), ": python 3.1 names the interpreter")
	assert.Contains(t, pythonNote(s, "/usr/bin/python3.13", cli), "/usr/bin/python3.13 names")

	// A pyenv shim: the interpreter it runs for the session's creator.
	root := filepath.Join(dir, "pyenv")
	for _, v := range []string{"3.11.7", "3.12.1"} {
		bin := filepath.Join(root, "versions", v, "bin")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(bin, "python3"), nil, 0o755))
	}
	require.NoError(t, os.Mkdir(filepath.Join(root, "shims"), 0o755))
	shim := filepath.Join(root, "shims", "python3")
	require.NoError(t, os.WriteFile(shim, []byte("#!/usr/bin/env bash\nexport PYENV_ROOT=\""+root+"\"\n"), 0o755))
	ps := &Session{name: "ps"}
	ps.info = wire.SessionInfo{Python: "3.11.7", Executable: filepath.Join(root, "versions", "3.11.7", "bin", "python3"), Host: "local"}
	ps.origin = wire.Request{Cwd: dir, Env: []string{"PYENV_VERSION=3.11.7"}}
	assert.Empty(t, pythonNote(ps, shim, cli), "the shim runs the session's python")
	ps.origin.Env = []string{"PYENV_VERSION=3.12"}
	assert.Contains(t, pythonNote(ps, shim, cli), "--python "+shim+" names the interpreter of a new session only")
	ps.origin.Env = []string{"PYENV_VERSION=3.9"} // not installed: cannot be told
	assert.Empty(t, pythonNote(ps, shim, cli))

	s.info.Host = "lab" // a path on a host is not looked at
	assert.Empty(t, pythonNote(s, "/usr/bin/python3.13", cli))
	assert.NotEmpty(t, pythonNote(s, "3.13", cli))
	s.info = wire.SessionInfo{} // not started
	assert.Empty(t, pythonNote(s, "3.13", cli))
}
