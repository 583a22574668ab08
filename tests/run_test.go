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
// transcript, live record or swap, and that pid (when set) has ended. A
// run whose client went away is ended by the hub after the client exits:
// its files go within a few seconds.
func nothingLeft(t *testing.T, e *hubtest.Env, pid int) {
	t.Helper()
	if pid > 0 {
		assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "the run's worker %d ended", pid)
	}
	r := e.Run("sessions")
	assert.True(t, strings.HasPrefix(r.Stdout, "no sessions\n"), "%s", r) // a memory ceiling line may follow
	var files []string
	for i := 0; i < 100; i++ {
		files = nil
		filepath.Walk(e.State, func(p string, fi os.FileInfo, err error) error {
			// The hub's own cache of what interpreters said of themselves,
			// and the key its hosts' bytecode caches are made under, are
			// the hub's, not the run's.
			if err == nil && !fi.IsDir() && p != e.Paths.PythonCache() && p != e.Paths.BytecodeKey() {
				files = append(files, p)
			}
			return nil
		})
		if len(files) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, files, "a run leaves no file behind")
}

func TestRunLeavesNothing(t *testing.T) {
	t.Parallel()
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
	r = e.Run("run", "raise SystemExit(5)")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "SystemExit: sys.exit(5) ended the run")
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
	assert.True(t, strings.HasPrefix(e.Run("sessions").Stdout, "no sessions\n"))
}

// Ctrl-C on a run, from package early's init and through cobra (`--`
// before the code, which early leaves to it), alike.
func TestRunCtrlCInterruptsAndEnds(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("start").Code)

	for _, viaCobra := range []bool{false, true} {
		// A cell that a first Ctrl-C interrupts.
		code, out, errText, pid := runUntilInterrupted(t, e, "time.sleep(60)", 1, viaCobra)
		assert.Equal(t, 1, code, "stdout %s stderr %s", out, errText)
		assert.Contains(t, out, "started\n")
		assert.Contains(t, out, "KeyboardInterrupt")
		assert.Contains(t, errText, "[interrupting the cell")
		nothingLeft(t, e, pid)

		// A cell that swallows it: the second Ctrl-C ends the run, and
		// still its session.
		code, _, errText, pid = runUntilInterrupted(t, e, `while True:
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        print("not now", flush=True)`, 2, viaCobra)
		assert.Equal(t, 2, code, "%s", errText)
		assert.Contains(t, errText, "replhub: stopped at the second Ctrl-C; the run's session ended with it")
		nothingLeft(t, e, pid)
	}
}

// startedRun is `replhub run` on a cell that has written its worker's pid
// to a file and runs on.
type startedRun struct {
	cmd       *exec.Cmd
	out, errb strings.Builder
	pid       int
}

// startRun starts `replhub run` (through cobra, with viaCobra) on a cell
// that writes its pid, prints "started", then runs body, and returns once
// the cell runs and Ctrl-C is armed. The command starts with SIGINT
// ignored, as a shell's background job does (execCtrlC does the same for
// an exec), so that /proc shows when its handler is in place: a run from
// package early's init arms it only once the reply is slow to come
// (armAfterNew), and a Ctrl-C before that ends the command and the run.
func startRun(t *testing.T, e *hubtest.Env, body string, viaCobra bool) *startedRun {
	t.Helper()
	mark := filepath.Join(e.Dir, "pid")
	os.Remove(mark)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	args := []string{"-c", `trap '' INT; exec "$0" "$@"`, e.Bin, "run", "-t", "120"}
	if viaCobra {
		args = append(args, "--")
	}
	r := &startedRun{cmd: exec.CommandContext(ctx, "sh", append(args, `import os, time
open(`+strconv.Quote(mark)+`, "w").write(str(os.getpid()))
print("started", flush=True)
`+body)...)}
	r.cmd.Env, r.cmd.Dir = e.Vars, e.Cwd
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
	require.NoError(t, r.cmd.Start())
	waitFor(t, func() bool {
		b, _ := os.ReadFile(mark)
		r.pid, _ = strconv.Atoi(string(b))
		return r.pid != 0 && !ignoresSIGINT(t, r.cmd.Process.Pid)
	}, func() string { return "the cell never started, or Ctrl-C was not armed" })
	return r
}

// wait waits for the CLI and returns its exit code.
func (r *startedRun) wait() int {
	r.cmd.Wait()
	return r.cmd.ProcessState.ExitCode()
}

// runUntilInterrupted starts a run of body (through cobra, with
// viaCobra), sends the CLI n SIGINTs once the cell runs, and returns the
// exit code, stdout, stderr and the worker's pid.
func runUntilInterrupted(t *testing.T, e *hubtest.Env, body string, n int, viaCobra bool) (int, string, string, int) {
	t.Helper()
	r := startRun(t, e, body, viaCobra)
	for i := 0; i < n; i++ {
		if i > 0 {
			time.Sleep(500 * time.Millisecond) // the first has reached the cell
		}
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGINT))
	}
	code := r.wait()
	return code, r.out.String(), r.errb.String(), r.pid
}

// TestRunEndsWithItsHub restarts the hub under a running run: its caller
// hears that the hub went, and the new hub ends the run's worker instead
// of adopting it, with no trace.
func TestRunEndsWithItsHub(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("start").Code)
	run := startRun(t, e, "time.sleep(60)", false)
	r := e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, 2, run.wait(), "%s%s", run.out.String(), run.errb.String())
	assert.Contains(t, run.errb.String(), "replhub: the hub stopped during the run; the run's session ended with it")
	assert.NotContains(t, r.Stdout, "1 of 1", "the run was not adopted")
	nothingLeft(t, e, run.pid)
}
