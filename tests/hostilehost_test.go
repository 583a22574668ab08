package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// noControls fails when the text holds a terminal control byte (ESC, BEL,
// a C1 control …) other than a line feed or tab.
func noControls(t *testing.T, what, text string) {
	t.Helper()
	for _, r := range text {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			assert.Failf(t, "a control character reached the screen", "%s: %U in %q", what, r, text)
			return
		}
	}
}

// A host controls what its worker says of itself (its cwd, its Python,
// its notes, its names) and what a failed start printed; none of it puts
// a control sequence on the user's screen through replhub's own lines.
func TestHostCannotWriteControlSequences(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, plainLogin(t))
	newer, _ := hubtest.PickPythons(t)
	bin := t.TempDir()
	odd := filepath.Join(t.TempDir(), "in\x1b]0;owned\x07\x1b[2J")
	require.NoError(t, os.Mkdir(odd, 0o700))
	python := filepath.Join(bin, "python3")
	require.NoError(t, os.WriteFile(python, []byte(fmt.Sprintf("#!/bin/sh\ncd '%s' || exit 9\nexec %s \"$@\"\n", odd, newer)), 0o755))
	r := w.Run("exec", "h", "import os", "--host", "lab", "--python", python)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[created session 'h' on ")
	noControls(t, "created", r.Stdout+r.Stderr)

	r = w.Run("exec", "h", `os.write(4, b'{"op":"error","error":"\\u001b]0;owned\\u0007"}\n'); globals()["x\x1b[2J"] = 1`)
	require.Equal(t, 0, r.Code, "%s", r)
	r2 := w.Run("exec", "h", "None")
	require.Equal(t, 0, r2.Code, "%s", r2)
	assert.Contains(t, r.Stdout+r2.Stdout, "the worker reported: ")
	noControls(t, "notes", r.Stdout+r2.Stdout)
	for _, args := range [][]string{{"sessions"}, {"sessions", "h"}} {
		r = w.Run(args...)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "cwd ")
		noControls(t, fmt.Sprint(args), r.Stdout)
	}

	// What a swap could not keep is named by the worker; the swapped
	// session is listed with its cwd.
	ok(t, w.Run("exec", "h", `import threading; globals()["lock\x1b[2J"] = threading.Lock(); lock = type("T\x1b[2J", (), {"__doc__": "doc \x1b]0;owned\x07"})()`))
	for _, args := range [][]string{{"vars", "h"}, {"inspect", "h", "lock"}} {
		r = w.Run(args...)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "lock")
		noControls(t, fmt.Sprint(args), r.Stdout)
	}
	r = w.Run("swap", "h")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "not kept: lock")
	noControls(t, "swap", r.Stdout)
	r = w.Run("sessions")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "swapped ")
	noControls(t, "swapped", r.Stdout)

	// A start that fails shows what the host printed before it.
	dies := filepath.Join(bin, "python3.dies")
	require.NoError(t, os.WriteFile(dies, []byte("#!/bin/sh\nprintf 'rc says \\033]0;owned\\007\\n'\nprintf 'and \\033[2J broke\\n' >&2\nexit 5\n"), 0o755))
	r = w.Run("exec", "d", "1", "--host", "lab", "--python", dies)
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stdout+r.Stderr, "broke")
	noControls(t, "failed start", r.Stdout+r.Stderr)
	ok(t, w.Run("kill", "h"))
}

// A host's sessions may have opened at most max_host_opens sessions that
// live (64 by default): past it, its session("NAME") is refused, saying
// why, until one ends. Before, a host (whoever controls it) had the hub
// start sessions for it without end, each a worker there and the hub's
// memory here. Opening a session that lives is no new one, and the
// user's own sessions open what they like.
func TestHostOpensBoundedSessions(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, plainLogin(t))
	w.WriteConfig(`{"max_host_opens": 2}`)
	ok(t, w.Run("exec", "web", "1", "--host", "lab"))
	ok(t, w.Run("exec", "web", `a = session("o1"); b = session("o2")`))
	r := w.Run("exec", "web", `session("o3")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "the sessions on lab have opened 2 sessions, the most they may have at once (config.json's max_host_opens): end one first")
	ok(t, w.Run("exec", "web", `session("o2").put(x=1)`)) // open, not new
	ok(t, w.Run("exec", "o2", "x"))
	// The user's own opens count toward nothing.
	ok(t, w.Run("exec", "loc", `[session("l%d" % i, host="lab") for i in range(3)]`))
	ok(t, w.Run("exec", "web", `session("o1").kill(); c = session("o3")`))
	assert.Contains(t, ok(t, w.Run("sessions")), "o3 ")
}
