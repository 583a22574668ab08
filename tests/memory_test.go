package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

func sessionRSS(t *testing.T, e *hubtest.Env, name string) int64 {
	t.Helper()
	return sessionInfo(t, e, name).RSS
}

func TestSessionMemoryCountsChildren(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("exec", "m", "import subprocess, sys").Code)
	alone := sessionRSS(t, e, "m")
	assert.Greater(t, alone, int64(1<<20), "the worker's own memory is shown")

	// A child that holds 100 MB counts in its session's memory.
	r := e.Run("exec", "m", `p = subprocess.Popen([sys.executable, "-c", "import sys, time; b = b'x' * (100 << 20); print('ok', flush=True); time.sleep(60)"], stdout=subprocess.PIPE); p.stdout.readline()`)
	require.Contains(t, r.Stdout, "b'ok\\n'", "%s", r)
	withChild := sessionRSS(t, e, "m")
	assert.Greater(t, withChild, alone+90<<20, "alone %d, with the child %d", alone, withChild)
	assert.Regexp(t, `(?m)^m  pid \d+ .* 1\d\d MB  cwd`, e.Run("sessions").Stdout)
	require.Equal(t, 0, e.Run("exec", "m", "p.kill(); p.wait()").Code)
	assert.Less(t, sessionRSS(t, e, "m"), withChild-90<<20, "a child that ended no longer counts")
}

func TestMemoryCeilingInSessionsAndDeathNotes(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	cg := filepath.Join(e.Dir, "cgroup")
	require.NoError(t, os.Mkdir(cg, 0o700))
	set := func(file, v string) { require.NoError(t, os.WriteFile(filepath.Join(cg, file), []byte(v+"\n"), 0o600)) }
	set("memory.max", "1048576000")
	set("memory.current", "104857600")
	set("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0")
	e.Setenv("REPLHUB_CGROUP", cg)

	pidOf := func(name string) int {
		r := e.Run("exec", name, "import os; os.getpid()")
		require.Equal(t, 0, r.Code, "%s", r)
		m := regexp.MustCompile(`Out\[1\]: (\d+)`).FindStringSubmatch(r.Stdout)
		require.NotNil(t, m, "%s", r)
		pid, _ := strconv.Atoi(m[1])
		return pid
	}
	killed := func(name string, pid int) string {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		require.True(t, hubtest.WaitGone(pid, 5*time.Second))
		var note string
		waitFor(t, func() bool {
			_, n, ok := strings.Cut(e.Run("sessions", name).Stdout, name+"  dead: ")
			note, _, _ = strings.Cut(n, "\n")
			return ok
		}, func() string { return "no death note for " + name })
		return note
	}

	far := pidOf("far")
	r := e.Run("sessions")
	assert.Contains(t, r.Stdout, "memory ceiling: 100 MB in use of 1000 MB (the hub's cgroup")
	r = e.Run("sessions", "--json")
	assert.Contains(t, r.Stdout, `"memory_max": 1048576000`)
	assert.Contains(t, r.Stdout, `"memory_cgroup": "`+cg+`"`)

	// Far from the ceiling, a SIGKILL is only a SIGKILL.
	note := killed("far", far)
	assert.Contains(t, note, "killed by signal SIGKILL")
	assert.NotContains(t, note, "ceiling")

	// Near it (90% or more in use), the ceiling is named with the way out.
	near := pidOf("near")
	set("memory.current", "1000000000")
	note = killed("near", near)
	assert.Contains(t, note, "killed by signal SIGKILL; the hub's memory ceiling (1000 MB, shared by the hub and its local sessions) was nearly reached: it is the likely cause; raise the limit of cgroup "+cg)
	r = e.Run("exec", "near", "1")
	assert.Contains(t, r.Stdout, "memory ceiling", "the next exec opens with the note: %s", r)

	// The cgroup's OOM killer struck, though the memory is free again.
	oom := pidOf("oom")
	set("memory.current", "104857600")
	set("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0")
	note = killed("oom", oom)
	assert.Contains(t, note, "it is the likely cause")
}

// TestRemoteRunAndMemory runs a cell over ssh with replhub run (nothing
// left on either side) and reads a remote session's memory, its child's
// included, from its worker's done frame.
func TestRemoteRunAndMemory(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("run", "import os; os.getppid() > 1", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "Out[1]: True\n", r.Stdout)
	waitNoWorkers(t, w.servers["lab"])
	nothingLeft(t, w.Env, 0)

	r = w.Run("exec", "rem", `import subprocess, sys; p = subprocess.Popen([sys.executable, "-c", "import time; b = b'x' * (100 << 20); print('ok', flush=True); time.sleep(60)"], stdout=subprocess.PIPE); p.stdout.readline()`, "--host", "lab")
	require.Contains(t, r.Stdout, "b'ok\\n'", "%s", r)
	assert.Greater(t, sessionRSS(t, w.Env, "rem"), int64(100<<20), "the child's memory counts")
	require.Equal(t, 0, w.Run("kill", "rem").Code)
}
