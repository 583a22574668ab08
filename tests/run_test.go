package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// nothingLeft checks that a world holds no session, death note,
// transcript, live record or swap, and that pid (when set) has ended.
func nothingLeft(t *testing.T, e *hubtest.Env, pid int) {
	t.Helper()
	r := e.Run("sessions")
	assert.Equal(t, "no sessions\n", r.Stdout, "%s", r)
	var files []string
	filepath.Walk(e.State, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	assert.Empty(t, files, "a run leaves no file behind")
	if pid > 0 {
		assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "the run's worker %d ended", pid)
	}
}

func TestRunLeavesNothing(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)

	r := e.Run("run", `import os; print("hi"); os.getpid()`)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Regexp(t, `^hi\nOut\[1\]: \d+\n$`, r.Stdout)
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.Stdout, "hi\nOut[1]: ")))
	nothingLeft(t, e, pid)

	// Stdin, --json, a cell that raises, a session that dies: exec's codes,
	// and still nothing left (no death note either).
	r = e.RunInput("x = 6\nx * 7\n", "run", "-", "--json")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, `"value": "42"`)
	assert.NotContains(t, r.Stdout, `"created"`)
	r = e.Run("run", "1/0")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "ZeroDivisionError")
	r = e.Run("run", "import os; os._exit(3)")
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "status 3")
	nothingLeft(t, e, 0)

	// A session of the user's never hears of runs, nor lists them.
	require.Equal(t, 0, e.Run("exec", "mine", "1").Code)
	r = e.Run("run", "import time; time.sleep(30)", "-t", "1")
	assert.Equal(t, 3, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "so the run stopped it and ended its session")
	r = e.Run("sessions", "--json")
	assert.NotContains(t, r.Stdout, `"run-`)
	r = e.Run("exec", "mine", "2")
	assert.Equal(t, "Out[2]: 2\n", r.Stdout)
	require.Equal(t, 0, e.Run("kill", "mine").Code)

	// --transcript keeps one, and says where.
	r = e.Run("run", "'kept'", "--transcript")
	require.Equal(t, 0, r.Code, "%s", r)
	path := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(r.Stderr), "[transcript: "), "]")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "%s", r)
	assert.Contains(t, string(b), "'kept'")
	assert.Equal(t, "no sessions\n", e.Run("sessions").Stdout)
}

func TestRunCtrlCInterruptsAndEnds(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("start").Code)
	mark := filepath.Join(e.Dir, "pid")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, "run", `import os, time
open(`+strconv.Quote(mark)+`, "w").write(str(os.getpid()))
print("started", flush=True)
time.sleep(60)`, "-t", "120")
	cmd.Env, cmd.Dir = e.Vars, e.Cwd
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	var pid int
	for i := 0; i < 300 && pid == 0; i++ {
		b, _ := os.ReadFile(mark)
		pid, _ = strconv.Atoi(string(b))
		time.Sleep(20 * time.Millisecond)
	}
	require.NotZero(t, pid, "the cell started")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout %s stderr %s", out.String(), errb.String())
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, out.String(), "started\n")
	assert.Contains(t, out.String(), "KeyboardInterrupt")
	assert.Contains(t, errb.String(), "[interrupting the cell")
	nothingLeft(t, e, pid)
}
