package tests

import (
	"context"
	"fmt"
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

	"github.com/replhub/replhub/client"
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
// an exec), so that /proc shows when its handler is in place: a Ctrl-C
// before that ends the command and the run.
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

// TestCtrlCDuringTheStart sends Ctrl-C to a plain exec that makes its
// session, and to a run, while the session starts (its python waits
// until the interrupt has gone): the cell ends as interrupted without running, where it
// ran once the session was up, the command having said it was
// interrupting it. The exec's session goes on; the run's ends.
func TestCtrlCDuringTheStart(t *testing.T) {
	t.Parallel()
	e, slow, _ := slowWorld(t)
	for _, tc := range []struct{ name, cmd, note string }{
		{"exec", "exec", "[interrupting session 'st'"},
		{"run", "run", "[interrupting the cell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := filepath.Join(e.Dir, "ran-"+tc.name)
			os.Remove(slow + ".started")
			os.Remove(slow + ".go")
			args := []string{"-c", `trap '' INT; exec "$0" "$@"`, e.Bin, tc.cmd}
			if tc.cmd == "exec" {
				args = append(args, "st")
			}
			cmd := exec.Command("sh", append(args, "open("+strconv.Quote(mark)+", 'w').close()")...)
			cmd.Env, cmd.Dir = e.Vars, e.Cwd
			var out, errb hubtest.LockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			require.NoError(t, cmd.Start())
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-done })
			waitFor(t, func() bool {
				// The session starting, the shell's exec done (its trap set
				// SIGINT ignored), then the handler in place.
				exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
				_, err := os.Stat(slow + ".started")
				return err == nil && exe == e.Bin && !ignoresSIGINT(t, cmd.Process.Pid)
			},
				func() string {
					return "the start never began, or Ctrl-C was never armed: " + out.String() + errb.String()
				})
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			waitFor(t, func() bool { return strings.Contains(errb.String(), tc.note) },
				func() string { return "the Ctrl-C was not told of: " + errb.String() })
			time.Sleep(500 * time.Millisecond) // for the interrupt to reach the hub
			require.NoError(t, os.WriteFile(slow+".go", nil, 0o644))
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("no reply 30 s after the Ctrl-C: %s %s", out.String(), errb.String())
			}
			assert.Equal(t, 1, cmd.ProcessState.ExitCode(), "%s%s", out.String(), errb.String())
			assert.Contains(t, errb.String(), tc.note)
			assert.Contains(t, out.String()+errb.String(), "KeyboardInterrupt: cell 1 was interrupted before it started, so it did not run")
			assert.NoFileExists(t, mark, "the cell ran")
		})
	}
	r := e.Run("exec", "st", "print('goes on')")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "goes on\n", r.Stdout)
	r = e.Run("sessions")
	assert.NotContains(t, r.Stdout, "run-", "the run's session ended")
}

// TestInterruptDuringAStartThatRunsNoCell interrupts a session while
// another session's session("b") starts it, a call that runs no cell
// there: the interrupt kept for the first cell goes with the start, and
// the next exec's cell runs.
func TestInterruptDuringAStartThatRunsNoCell(t *testing.T) {
	t.Parallel()
	e, slow, newer := slowWorld(t)
	e.Setenv("REPLHUB_PYTHON", newer) // the later one counts
	opened := make(chan hubtest.Result, 1)
	go func() { opened <- e.Run("exec", "a", "b = session('b', python="+strconv.Quote(slow)+")") }()
	var r hubtest.Result
	waitFor(t, func() bool {
		r = e.Run("interrupt", "b")
		return strings.Contains(r.Stdout+r.Stderr, "is still starting")
	}, func() string { return "b was never seen starting: " + r.String() })
	require.NoError(t, os.WriteFile(slow+".go", nil, 0o644))
	r = <-opened
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "b", "print('runs')")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "runs\n", r.Stdout)
}

// TestAStartCutShortByItsCallerIsNotAnothers starts a session from a
// call that goes during the start (an MCP call cancelled), while a second
// exec of the same name waits for that start: the start ends with the call
// that made it, and the second exec starts the session itself, where it
// failed with the other call's "context canceled".
func TestAStartCutShortByItsCallerIsNotAnothers(t *testing.T) {
	t.Parallel()
	e, slow, _ := slowWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := e.Client().Exec(ctx, "c", "1", client.ExecOptions{Cwd: e.Cwd, Env: e.Vars, InterruptIfGone: true})
		first <- err
	}()
	waitFor(t, func() bool { _, err := os.Stat(slow + ".started"); return err == nil },
		func() string { return "the first start never began" })
	second := make(chan hubtest.Result, 1)
	go func() { second <- e.Run("exec", "c", "print('runs')") }()
	time.Sleep(500 * time.Millisecond) // for it to wait on the start
	cancel()
	require.Error(t, <-first)
	require.NoError(t, os.WriteFile(slow+".go", nil, 0o644))
	r := <-second
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "runs\n")
}

// slowWorld starts a world whose python3 (REPLHUB_PYTHON) is slow, a
// script in its folder that holds a session's start until the test lets
// it go: it makes slow+".started" as it begins, then waits up to 30 s for
// slow+".go" to exist before it runs newer, which slowWorld returns too.
func slowWorld(t *testing.T) (e *hubtest.Env, slow, newer string) {
	t.Helper()
	e = hubtest.Start(t)
	newer, _ = hubtest.PickPythons(t)
	slow = filepath.Join(e.Dir, "slowpython")
	script := fmt.Sprintf(`#!/bin/sh
: > %[1]q
i=0
while [ ! -e %[2]q ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
exec %[3]q "$@"
`, slow+".started", slow+".go", newer)
	require.NoError(t, os.WriteFile(slow, []byte(script), 0o755))
	e.Setenv("REPLHUB_PYTHON", slow)
	return e, slow, newer
}
