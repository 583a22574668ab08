package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// durableWorld starts five sessions: four of the user's (one of them left
// running a 5 s cell that prints before and after) and one root session
// through the fake sudo. Each holds a value of its own.
func durableWorld(t *testing.T, e *hubtest.Env) {
	t.Helper()
	f := newFakeSudo(t, fakePassword, fakePassword)
	f.apply(e, "nopasswd")
	newer, older := hubtest.PickPythons(t)
	for i, name := range []string{"s1", "s2", "s3"} {
		py := []string{newer, older, newer}[i]
		ok(t, e.Run("exec", name, "v = '"+name+"-value'", "--python", py))
	}
	ok(t, e.Run("exec", "ops", "v = 'ops-value'", "--sudo", "--python", newer))
	ok(t, e.Run("exec", "slow", "import time; v = 'slow-value'", "--python", newer))
	r := e.Run("exec", "slow", "print('before'); time.sleep(5); print('after'); 'slow done'", "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "before")
}

// durableChecks: every name's value is intact in the new hub, the running
// cell's result is collected by wait, and the sessions carry on.
func durableChecks(t *testing.T, e *hubtest.Env, note string, noted ...string) {
	t.Helper()
	l := sessionList(t, e)
	assert.Len(t, l.Sessions, 5, "%+v", l)
	assert.Empty(t, l.Dead)
	for _, s := range l.Sessions {
		if s.Name == "slow" && s.State == "running" { // a loaded machine may have outlasted the cell
			assert.GreaterOrEqual(t, s.RunningS, 0.5, "the running cell's time counts from its start, not the adoption")
		}
	}
	for _, name := range []string{"s1", "s2", "s3", "ops", "slow"} {
		r := e.Run("exec", name, "v")
		if name == "slow" {
			// Busy with the 5 s cell; wait collects it. On a loaded
			// machine the checks before may outlast it: then the exec
			// shows the cell's reply first.
			w := r
			if r.Code == 2 {
				w = e.Run("wait", "slow", "-t", "15")
				require.Equal(t, 0, w.Code, "%s", w)
				r = e.Run("exec", name, "v")
			} else {
				assert.Contains(t, r.Stdout, "finished while nobody waited", "%s", r)
			}
			assert.Contains(t, w.Stdout, note)
			assert.Contains(t, w.Stdout, "after")
			assert.Contains(t, w.Stdout, "Out[2]: 'slow done'")
		} else if !slices.Contains(noted, name) {
			assert.Contains(t, r.Stdout, note, "%s", r)
		}
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "'"+name+"-value'")
	}
	r := e.Run("sessions")
	assert.Regexp(t, `ops  as root  pid \d+`, r.Stdout)
	// A killed adopted session ends, its socket goes.
	ok(t, e.Run("kill", "s3"))
	left, _ := filepath.Glob(filepath.Join(e.Paths.WorkerDir(), "*.sock"))
	assert.Len(t, left, 4, "one socket per live local session: %v", left)
}

// A hub killed with SIGKILL loses no local session: the next hub adopts
// them all, root included, with a cell that was running.
func TestHubKilledSessionsAdopted(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	durableWorld(t, e)
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	durableChecks(t, e, "a new hub adopted this session at")
	// The killed hub's records were taken over, not turned into notes.
	b, err := os.ReadFile(filepath.Join(e.Paths.LiveDir(), "s1.json"))
	require.NoError(t, err)
	var rec struct {
		HubPid int `json:"hub_pid"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, e.HubPid(), rec.HubPid)
}

// `replhub restart` replaces the hub with the binary now on disk, and
// every local session goes on in the new one, with the output the old hub
// had not yet shown.
func TestRestartWithAChangedBinary(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	// This world's own copy of the binary, replaced while the hub runs.
	dir := t.TempDir()
	// Stopped before dir goes: Start's cleanup, which runs after, would
	// find no binary to run stop with, and kill the hub after 5 s.
	t.Cleanup(e.StopHub)
	bin := filepath.Join(dir, "replhub")
	copyFile(t, e.HubBin, bin)
	e.Bin, e.HubBin = bin, bin
	// The hub a CLI starts is this copy too.
	e.Setenv(client.HubExeVar, bin)
	newer := changedBinary(t) // before the 5 s cell starts: a build can take that long
	durableWorld(t, e)
	ok(t, e.Run("exec", "s1", "import sys; print('unread', file=sys.stderr); import threading, time; threading.Timer(0.2, print, ['late']).start()"))
	time.Sleep(500 * time.Millisecond) // "late" waits, unread, in the hub
	oldPid := e.HubPid()
	require.NoError(t, os.Rename(newer, bin))

	r := e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Regexp(t, `^hub restarted: pid \d+ -> \d+; 5 of 5 sessions live\n$`, r.Stdout)
	assert.NotEqual(t, oldPid, e.HubPid())
	l := sessionList(t, e)
	assert.Equal(t, "9.9.9-changed", l.Hub.Version)
	for _, s := range l.Sessions {
		if s.Name == "s2" || s.Name == "s3" {
			assert.Equal(t, []string{"v"}, s.Names, "the adopted worker tells its names before its next cell")
		}
	}

	r = e.Run("exec", "s1", "1")
	assert.Contains(t, r.Stdout, "late", "unread output crosses the restart: %s", r)
	assert.Contains(t, r.Stdout, "the hub restarted at")
	durableChecks(t, e, "the hub restarted at", "s1")
}

// A session whose names are long and not ASCII (a JSON escape of 6 or 12
// bytes a character) outlives a restart: its ready frame tells as many as
// the hub's bound on it takes, and its next done frame all of them.
func TestRestartWithWideNames(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	ok(t, e.Run("exec", "wide", `for i in range(200): globals()["名前" * 30 + "\U0001d4d0" * 20 + str(i)] = i`, "--python", newer))
	r := e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "1 of 1 sessions live", "%s", r)
	info := sessionInfo(t, e, "wide")
	assert.NotEmpty(t, info.Names, "some, before its next cell")
	assert.Less(t, len(info.Names), 200)
	r = e.Run("exec", "wide", "len([k for k in globals() if k.startswith('名前')])")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: 200")
	assert.Len(t, sessionInfo(t, e, "wide").Names, 200, "all, from its done frame")
}

// changedBinary builds replhub with another version string.
func changedBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "replhub-changed")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X github.com/replhub/replhub/internal/lean.Version=9.9.9-changed", "./cmd/replhub")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

// A worker whose hub is gone keeps what its cell prints meanwhile, and
// the adopting hub shows it; a socket of another user's is not adopted.
func TestOutputWhileNoHub(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "w", "import time"))
	// The cell prints once its hub is gone, and says when it has.
	dir := t.TempDir()
	gate, printed := filepath.Join(dir, "gate"), filepath.Join(dir, "printed")
	r := e.Run("exec", "w", fmt.Sprintf("import os\nwhile not os.path.exists(%q): time.sleep(0.02)\nprint('x' * 100 + 'written while no hub ran', flush=True); open(%q, 'w').close(); 7", gate, printed), "-t", "0.2")
	require.Equal(t, 3, r.Code, "%s", r)
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	openGate(t, gate)
	waitFor(t, func() bool { _, err := os.Stat(printed); return err == nil })
	r = e.Run("wait", "w", "-t", "10")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "written while no hub ran")
	assert.Contains(t, r.Stdout, "Out[2]: 7")
	res, _ := jsonResult(t, e, "exec", "--json", "w", "8")
	assert.Equal(t, wire.StatusOK, res.Status)
	assert.False(t, strings.Contains(res.Output, "written while"), "shown once")
}

// Output written while the hub restarts is not lost in between: the old
// hub detaches each worker (its output ends with a fence, then a detached
// frame) before it hands over, and the worker keeps the rest for the next
// hub. A session prints a numbered line every millisecond across two
// restarts; every line arrives once, in order.
func TestRestartLosesNoOutput(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	var out strings.Builder
	out.WriteString(ok(t, e.Run("exec", "p", `import threading, time
def count():
    for i in range(2500):
        print("line %d" % i, flush=True)
        time.sleep(0.001)
t = threading.Thread(target=count)
t.start()`)))
	for i := 0; i < 2; i++ {
		time.Sleep(300 * time.Millisecond)
		r := e.Run("restart")
		require.Equal(t, 0, r.Code, "%s", r)
		out.WriteString(ok(t, e.Run("exec", "p", "None")))
	}
	out.WriteString(ok(t, e.Run("exec", "p", "t.join(); None", "-t", "30")))
	var got []int
	for _, line := range strings.Split(out.String(), "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "line %d", &n); err == nil {
			got = append(got, n)
		}
	}
	require.Len(t, got, 2500, "every line once:\n%s", out.String())
	for i, n := range got {
		require.Equal(t, i, n, "in order")
	}
}

// A hub killed while it restores a swap leaves the swap the session: the
// next hub does not adopt the worker it had started (its names half
// loaded), and the next exec restores the swap whole.
func TestHubKilledDuringRestore(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := hubtest.Start(t)
	dir := t.TempDir()
	gate, armed := filepath.Join(dir, "gate"), filepath.Join(dir, "armed")
	// x loads, at a restore, only once the gate is open.
	ok(t, e.Run("exec", "r", fmt.Sprintf(`import os, time
def slow_load(gate, armed):
    open(armed, "w").close()
    while not os.path.exists(gate):
        time.sleep(0.02)
    return "loaded"
class Slow:
    def __reduce__(self):
        return (slow_load, (%q, %q))
n = 1
x = Slow()`, gate, armed)))
	ok(t, e.Run("swap", "r"))
	restore := startBackground(t, e, "exec", "r", "n")
	waitFor(t, func() bool { _, err := os.Stat(armed); return err == nil })
	require.Equal(t, 1, killHubs(t, e))
	restore.Wait()
	l := sessionList(t, e)
	assert.Nil(t, liveOf(l, "r"), "the half-restored worker is not the session: %+v", l)
	assert.Empty(t, l.Dead)
	assert.NotNil(t, swappedOf(l, "r"), "the swap stays: %+v", l)
	openGate(t, gate)
	r := e.Run("exec", "r", "n, x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "was swapped to disk at")
	assert.Contains(t, r.Stdout, "(1, 'loaded')")
	assert.Nil(t, swappedOf(sessionList(t, e), "r"))
	assert.Equal(t, []int{workerPid(t, e, "r")}, workerPids(e), "the worker the killed hub started ended")
}

// workerPids lists the world's local workers, in order.
func workerPids(e *hubtest.Env) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "\x00--durable\x00"+e.Paths.WorkerDir()) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// hubPids lists the world's hub processes, those that have not written
// their pid file yet (adopting) among them.
func hubPids(e *hubtest.Env) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		args := strings.Split(string(b), "\x00")
		if err != nil || len(args) < 2 || args[1] != "hub" {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "XDG_RUNTIME_DIR="+e.Runtime) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killHubs SIGKILLs every hub of the world and waits for them to end.
func killHubs(t *testing.T, e *hubtest.Env) int {
	t.Helper()
	pids := hubPids(e)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		require.True(t, hubtest.WaitGone(pid, 10*time.Second))
	}
	return len(pids)
}

// startBackground starts a CLI call without waiting for it.
func startBackground(t *testing.T, e *hubtest.Env, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, e.Bin, args...)
	cmd.Dir, cmd.Env = e.Cwd, e.Vars
	require.NoError(t, cmd.Start())
	return cmd
}

// A session restored from its swap, its new worker yet to run a cell,
// outlives a killed hub with its cells: none of those it ran before the
// swap is said to have been lost from a queue.
func TestHubKilledAfterRestore(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "g", "x = 1"))
	ok(t, e.Run("exec", "g", "x += 1"))
	ok(t, e.Run("swap", "g"))
	ok(t, e.Run("exec", "other", "session('g'); None"))
	require.NotNil(t, liveOf(sessionList(t, e), "g"), "restored")
	require.Equal(t, 1, killHubs(t, e))
	r := e.Run("wait", "g", "--cell", "2")
	assert.NotContains(t, r.Stderr, "never ran", "%s", r)
	r = e.Run("exec", "g", "x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout, "never ran")
	assert.Contains(t, r.Stdout, "Out[3]: 2")
}

// A hub killed while a session starts, after its worker is up but before
// the worker is on record, leaves no worker behind: nobody could adopt
// it, and it would run for ever. The hub here is stopped as the worker
// starts, and killed once the worker serves its socket.
func TestHubKilledDuringStart(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("sessions"))
	newer, _ := hubtest.PickPythons(t)
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "python3")
	require.NoError(t, os.WriteFile(wrapper, []byte(fmt.Sprintf(`#!/bin/sh
case "$*" in *--durable*) kill -STOP $PPID ;; esac
exec %q "$@"
`, newer)), 0o755))
	hub := e.HubPid()
	start := startBackground(t, e, "exec", "s", "1", "--python", wrapper)
	waitFor(t, func() bool {
		socks, _ := filepath.Glob(filepath.Join(e.Paths.WorkerDir(), "*.sock"))
		return len(socks) == 1 && len(workerPids(e)) == 1
	})
	time.Sleep(200 * time.Millisecond) // its ready frame waits in the pipe
	require.NoError(t, syscall.Kill(hub, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hub, 10*time.Second))
	start.Wait()
	// The worker finds its hub gone, and ends.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(workerPids(e)) > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, workerPids(e), "no worker that no hub knows of")
	assert.Nil(t, liveOf(sessionList(t, e), "s"))
	r := e.Run("exec", "s", "1 + 1", "--python", newer)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 2")
}

// A hub that restarts hands its sessions over before it exits; a CLI call
// meanwhile starts the next hub, which waits for it and adopts them: it
// does not start a new, empty session under a name the old hub still had.
func TestCallDuringRestart(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "t", "x = 1"))
	// A cell that holds the interpreter for seconds: its worker answers
	// the hand-over's detach only after detachWait, and the old hub lives
	// on that long after it closed its socket.
	r := e.Run("exec", "s", "y = 7 ** (6 * 10 ** 7)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	old := e.HubPid()
	restart := startBackground(t, e, "restart")
	waitFor(t, func() bool { _, err := os.Stat(e.Paths.Socket()); return os.IsNotExist(err) })
	require.True(t, hubtest.Alive(old), "the old hub still hands over")
	r = e.Run("exec", "t", "x")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[2]: 1")
	assert.NotContains(t, r.Stdout, "created session")
	restart.Wait()
}

// A cell running at a restart, which finished in the next hub, killed
// before it wrote the session's record (the record still the hand-over),
// is said to have its result gone with that hub, not to have been
// collected.
func TestRunningAtRestartResultLost(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := filepath.Join(t.TempDir(), "gate")
	ok(t, e.Run("exec", "c", "import os, time"))
	r := e.Run("exec", "c", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)\n'done'", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	old := e.HubPid()
	ok(t, e.Run("restart"))
	openGate(t, gate)
	waitFor(t, func() bool { s := sessionInfo(t, e, "c"); return s.State == "idle" && s.Unread })
	require.Equal(t, 1, killHubs(t, e))
	// As if that hub had died before it wrote its own record: the record
	// is the hand-over the restart left, its cell 2 running.
	path := filepath.Join(e.Paths.LiveDir(), "c.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(b, &rec))
	rec["hub_pid"], rec["hub_start"] = old, ""
	rec["handover"] = map[string]any{"at": time.Now(), "running": 2}
	b, err = json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	r = e.Run("wait", "c", "--cell", "2")
	assert.NotContains(t, r.Stderr, "collected already", "%s", r)
	assert.Contains(t, r.Stderr, "cell 2 of session 'c' finished after the restart at ", "%s", r)
	assert.Contains(t, ok(t, e.Run("exec", "c", "1 + 1")), "Out[3]: 2")
}
