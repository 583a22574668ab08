package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// blocker starts a cell that runs until the file gate exists, so that the
// cells queued behind it wait as long as the test needs, on any machine.
func blocker(t *testing.T, e *hubtest.Env, name string) (gate string) {
	t.Helper()
	gate = fmt.Sprintf("%s/gate-%s", e.Dir, name)
	ok(t, e.Run("exec", name, "import os, time"))
	r := e.Run("exec", name, fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	return gate
}

func openGate(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o600))
}

// Ten cells queued behind a running one get their numbers at once, are
// listed by sessions, run in order, and are collected by number; one taken
// out never runs. Interrupts aimed at cells say what they did.
func TestQueueTenInOrder(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "q", "order = []"))
	gate := blocker(t, e, "q")
	refused(t, e.Run("exec", "q", "1"), "`replhub exec q --queue CODE` runs yours after it")
	for i := 1; i <= 10; i++ {
		res, jr := jsonResult(t, e, "exec", "--json", "q", fmt.Sprintf("order.append(%d); print('cell', %d); %d", i, i, i), "--queue")
		require.Equal(t, 0, jr.Code, "%s", jr)
		assert.Equal(t, wire.StatusQueued, res.Status)
		assert.Equal(t, 3+i, res.Cell)
		assert.Equal(t, i, res.Ahead)
	}
	r := e.Run("exec", "q", "11", "--queue")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Equal(t, "[cell 14 queued, 11 cells ahead of it: `replhub wait q --cell 14` collects its output and result, `replhub interrupt q --cell 14` takes it out]\n", r.Stdout)

	out := ok(t, e.Run("sessions", "q"))
	assert.Contains(t, out, "(11 queued)")
	assert.Contains(t, out, "queued: cell 4 (waiting")
	assert.Contains(t, out, "order.append(10); print('cell', 10); 10")

	// Out of the queue: cell 8 (the fifth) and cell 14.
	assert.Contains(t, ok(t, e.Run("interrupt", "q", "--cell", "8")), "took cell 8 out of session 'q''s queue: it will not run (10 cells still queued)")
	ok(t, e.Run("interrupt", "q", "--cell", "14"))
	refused(t, e.Run("interrupt", "q", "--cell", "99"), "cell 99 of session 'q' has not started: the last cell is 14")
	r = e.Run("wait", "q", "--cell", "5", "-t", "0.3")
	assert.Equal(t, 3, r.Code, "still queued: %s", r)
	assert.Contains(t, r.Stdout, "[cell 5 queued, 2 cells ahead of it")

	openGate(t, gate)
	for i := 1; i <= 10; i++ {
		cell := itoa(3 + i)
		r := e.Run("wait", "q", "--cell", cell, "-t", "20")
		if i == 5 {
			refused(t, r, "cell 8 of session 'q' was taken out of the queue (interrupt) and never ran")
			continue
		}
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, fmt.Sprintf("cell %d\nOut[%s]: %d\n", i, cell, i), r.Stdout)
	}
	// The blocking cell's result waited too: a plain wait reads it, then
	// has none.
	assert.Contains(t, ok(t, e.Run("wait", "q", "--json")), `"cell": 3,`)
	assert.Contains(t, ok(t, e.Run("wait", "q")), "[session 'q' is idle: nothing to collect]")
	assert.Contains(t, ok(t, e.Run("exec", "q", "order")), "Out[15]: [1, 2, 3, 4, 6, 7, 8, 9, 10]")

	// An interrupt aimed at a finished cell does nothing, and says so.
	assert.Equal(t, "cell 15 of session 'q' has finished: nothing to interrupt\n", ok(t, e.Run("interrupt", "q", "--cell", "15")))
	// One aimed at the running cell interrupts it.
	r = e.Run("exec", "q", "time.sleep(30)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	ok(t, e.Run("exec", "q", "'after'", "--queue"))
	out = ok(t, e.Run("interrupt", "q", "--cell", "16"))
	assert.Regexp(t, `interrupted cell 16 of session 'q'|cell 16 of session 'q' had not started yet`, out)
	r = e.Run("wait", "q", "--cell", "16", "-t", "20")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "KeyboardInterrupt")
	assert.Contains(t, ok(t, e.Run("wait", "q", "--cell", "17", "-t", "20")), "Out[17]: 'after'")
}

// On an idle session a queued cell runs at once, as exec would; its
// result is still its number's: a later exec does not take it.
func TestQueueIdleRunsAtOnce(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "i", "x = 1"))
	assert.Equal(t, "Out[2]: 42\n", ok(t, e.Run("exec", "i", "6 * 7", "--queue")))
	assert.Contains(t, ok(t, e.Run("exec", "i", "'a'", "--queue", "--no-wait")), "[cell 3 started")
	waitFor(t, func() bool { l := sessionList(t, e); return len(l.Sessions) == 1 && l.Sessions[0].Unread })
	assert.Equal(t, "[cell 3 finished unread: `replhub wait i --cell 3` collects it]\nOut[4]: 'b'\n", ok(t, e.Run("exec", "i", "'b'")))
	assert.Equal(t, "Out[3]: 'a'\n", ok(t, e.Run("wait", "i", "--cell", "3")))
}

// The queue holds 64 cells and refuses the 65th in one line; a session
// keeps 64 unread results and says which it dropped; a death reports
// every queued cell to whoever waits on it and in the death note.
func TestQueueBoundAndDeath(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	c := e.Client()
	ctx := context.Background()
	gate := blocker(t, e, "b") // cell 2
	for i := range 64 {
		res, err := c.Exec(ctx, "b", fmt.Sprintf("%d", i), client.ExecOptions{Queue: true})
		require.NoError(t, err)
		require.Equal(t, wire.StatusQueued, res.Status)
	}
	r := e.Run("exec", "b", "'one more'", "--queue")
	assert.Equal(t, 2, r.Code)
	assert.Equal(t, "replhub: session 'b' has 64 cells queued, the most it holds: `replhub wait b` collects them as they finish, `replhub interrupt b --cell 3` takes one out\n", r.Stderr)

	// The code queued is bounded too.
	blocker(t, e, "big")
	// 32 MB queued, then 33 more: just past the bound, as each MB costs
	// the race-built hub some 150 ms to read. Sent by the CLI, from its
	// stdin: the race-built client of this test process took some 10 s to
	// encode a 40 MB request.
	comment := "#" + strings.Repeat("a", 33<<20)
	ok(t, e.RunInput(comment[:32<<20], "exec", "big", "-", "--queue"))
	r = e.RunInput(comment, "exec", "big", "-", "--queue")
	assert.Equal(t, 2, r.Code, "%s", r.Stdout)
	assert.Equal(t, "replhub: session 'big' has 32 MB of code queued, and this cell would pass the 64 MB it holds: `replhub wait big` collects the queued cells as they finish\n", r.Stderr)
	ok(t, e.Run("kill", "big"))

	// All run, nobody reads them; one more cell pushes the oldest out.
	openGate(t, gate)
	waitFor(t, func() bool {
		l := sessionList(t, e)
		return len(l.Sessions) == 1 && len(l.Sessions[0].Queued) == 0 && l.Sessions[0].State == "idle"
	})
	ok(t, e.Run("exec", "b", "'last'", "--queue"))
	refused(t, e.Run("wait", "b", "--cell", "2"), "cell 2's result was dropped unread: a session keeps at most 64 unread results")
	assert.Contains(t, ok(t, e.Run("wait", "b", "--cell", "3")), "Out[3]: 0")
	// A plain wait reads the oldest unread result.
	assert.Contains(t, ok(t, e.Run("wait", "b")), "Out[4]: 1")

	// Death with a queue.
	ok(t, e.Run("exec", "d", "import os, time"))
	death := filepath.Join(e.Dir, "gate-d")
	r = e.Run("exec", "d", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)\nos._exit(3)", death), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	for range 3 {
		ok(t, e.Run("exec", "d", "'never'", "--queue"))
	}
	openGate(t, death)
	w := e.Run("wait", "d", "--cell", "4", "-t", "30")
	assert.Equal(t, 4, w.Code, "%s", w)
	assert.Contains(t, w.Stdout, "session 'd' died before cell 4 ran (it was queued)")
	l := sessionList(t, e)
	require.Len(t, l.Dead, 1)
	assert.Contains(t, l.Dead[0].Note, "cells 3-5, queued, never ran")
	// A wait that comes after the death hears what the waiter heard.
	w = e.Run("wait", "d", "--cell", "5")
	assert.Equal(t, 4, w.Code, "%s", w)
	assert.Contains(t, w.Stdout, "session 'd' died before cell 5 ran (it was queued): exited with status 3")
	w = e.Run("wait", "d", "--cell", "2")
	assert.Equal(t, 2, w.Code, "a cell that ran: %s", w)
	assert.Contains(t, w.Stderr, "session 'd' died at")
}

// MCP: exec with queue true queues behind a busy session; wait and
// interrupt take the cell's number.
func TestQueueMCP(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	cs := mcpSession(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(tool string, args map[string]any) (string, bool) {
		return callText(t, ctx, cs, &sdk.CallToolParams{Name: tool, Arguments: args})
	}
	gate := blocker(t, e, "m")
	text, isErr := call("exec", map[string]any{"name": "m", "code": "1"})
	assert.True(t, isErr)
	assert.Contains(t, text, "exec with queue true runs yours after it")
	text, isErr = call("exec", map[string]any{"name": "m", "code": "print('hi'); 6 * 7", "queue": true})
	assert.False(t, isErr, text)
	assert.Equal(t, "[cell 3 queued, 1 cell ahead of it: call wait with name 'm' and cell 3 collects its output and result, call interrupt with name 'm' and cell 3 takes it out]\n", text)
	call("exec", map[string]any{"name": "m", "code": "'out'", "queue": true})
	text, _ = call("interrupt", map[string]any{"name": "m", "cell": 4})
	assert.Contains(t, text, "took cell 4 out of session 'm''s queue")
	openGate(t, gate)
	text, isErr = call("wait", map[string]any{"name": "m", "cell": 3, "timeout": 20})
	assert.False(t, isErr, text)
	assert.Equal(t, "hi\nOut[3]: 42\n", text)
}

// A restart hands the queue over: the new hub runs it in order. A hub that
// is killed cannot, and the next one names the cells it lost.
func TestQueueAcrossRestart(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := blocker(t, e, "r") // cell 2
	gate2 := gate + "-2"
	ok(t, e.Run("exec", "r", "'kept'", "--queue")) // cell 3
	ok(t, e.Run("exec", "r", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)", gate2), "--queue"))
	for i := 1; i <= 3; i++ { // cells 5-7
		ok(t, e.Run("exec", "r", fmt.Sprintf("%d", i*10), "--queue"))
	}
	// Cells 2 and 3 end unread; cell 4 runs, 5-7 wait.
	openGate(t, gate)
	waitFor(t, func() bool { l := sessionList(t, e); return len(l.Sessions) == 1 && l.Sessions[0].RunningCell == 4 })
	r := e.Run("restart")
	require.Equal(t, 0, r.Code, "%s", r)
	out := ok(t, e.Run("sessions", "r"))
	assert.Contains(t, out, "(3 queued)  (2 unread results)")
	assert.Contains(t, ok(t, e.Run("wait", "r", "--cell", "3")), "Out[3]: 'kept'")
	openGate(t, gate2)
	for i := 1; i <= 3; i++ {
		assert.Contains(t, ok(t, e.Run("wait", "r", "--cell", itoa(4+i), "-t", "20")), fmt.Sprintf("Out[%d]: %d", 4+i, i*10))
	}

	gate = blocker(t, e, "k") // cell 2
	ok(t, e.Run("exec", "k", "'lost'", "--queue"))
	ok(t, e.Run("exec", "k", "'lost too'", "--queue"))
	pid := e.HubPid()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(pid, 10*time.Second))
	refused(t, e.Run("wait", "k", "--cell", "3"), fmt.Sprintf("cells 3-4 of session 'k' never ran: queued in the hub (pid %d) that ended without handing its queue over", pid))
	openGate(t, gate)
	out = ok(t, e.Run("wait", "k", "-t", "20"))
	assert.Contains(t, out, "never ran: queued in the hub")
}

// refused checks that a command failed as replhub refusing it (exit 2),
// saying want.
func refused(t *testing.T, r hubtest.Result, want string) {
	t.Helper()
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, want)
}

// Unread results of queued cells go to disk with a swap, and the restore
// shows them.
func TestQueueUnreadSurviveSwap(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := blocker(t, e, "sw")
	ok(t, e.Run("exec", "sw", "'one'", "--queue"))
	ok(t, e.Run("exec", "sw", "'two'", "--queue"))
	openGate(t, gate)
	waitFor(t, func() bool {
		l := sessionList(t, e)
		return len(l.Sessions) == 1 && l.Sessions[0].State == "idle" && len(l.Sessions[0].UnreadCells) == 2
	})
	ok(t, e.Run("swap", "sw"))
	out := ok(t, e.Run("exec", "sw", "1"))
	assert.Contains(t, out, "cell 3's reply, which nobody had read:\n    Out[3]: 'one'")
	assert.Contains(t, out, "cell 4's reply, which nobody had read:\n    Out[4]: 'two'")
}

// A remote session queues as a local one does.
func TestQueueRemote(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	ok(t, w.Run("exec", "rq", "import os, time", "--host", "lab"))
	// The host is this machine: the cell waits for a file the test makes
	// once the others are queued.
	gate := t.TempDir() + "/gate"
	r := w.Run("exec", "rq", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)\n'first'", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	for i := 1; i <= 3; i++ {
		assert.Contains(t, ok(t, w.Run("exec", "rq", fmt.Sprintf("print('n', %d); %d", i, i), "--queue")), fmt.Sprintf("[cell %d queued", 2+i))
	}
	openGate(t, gate)
	assert.Contains(t, ok(t, w.Run("wait", "rq", "--cell", "2", "-t", "20")), "Out[2]: 'first'")
	for i := 1; i <= 3; i++ {
		assert.Equal(t, fmt.Sprintf("n %d\nOut[%d]: %d\n", i, 2+i, i), ok(t, w.Run("wait", "rq", "--cell", itoa(2+i), "-t", "20")))
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

// waitFor polls cond for up to 30 s, and fails the test when it never
// holds. what, when given, says what was waited for; it is called then,
// so it can tell what was found instead.
func waitFor(t *testing.T, cond func() bool, what ...func() string) {
	t.Helper()
	for range 300 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	msg := "condition"
	for _, w := range what {
		msg = w()
	}
	t.Fatalf("%s: not within 30s", msg)
}

// A client that asks for a queued cell's output as it comes (the client
// package lets it: Queue with OnOutput) gets the queued reply at once;
// the cell runs in its turn with nobody to stream to, its output kept
// for the wait that collects it, and the hub goes on.
func TestQueuedCellDoesNotStream(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := filepath.Join(e.Dir, "gate-q")
	r := e.Run("exec", "q", fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.02)\n'first'", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	waitRunning(t, e, "q", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Client()
	streamed := make(chan string, 16)
	res, err := c.Exec(ctx, "q", "print('from the queue'); 'second'", client.ExecOptions{Queue: true, OnOutput: func(s string) { streamed <- s }})
	require.NoError(t, err)
	require.Equal(t, wire.StatusQueued, res.Status)
	openGate(t, gate)
	w, err := c.WaitCell(ctx, "q", res.Cell, 30*time.Second, 0, nil)
	require.NoError(t, err)
	assert.Equal(t, "from the queue\n", w.Output)
	assert.Empty(t, streamed)
	r = e.Run("exec", "q", "1 + 1")
	assert.Contains(t, r.Stdout, "Out[3]: 2\n", "%s", r)
}

// A queued cell that finished, unread, in a hub that was then killed ran
// once; wait with its number says that its result went with that hub,
// not that it was collected.
func TestQueuedResultLostWithKilledHub(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "q", "import time"))
	assert.Contains(t, ok(t, e.Run("exec", "q", "time.sleep(0.3); 'first'", "--queue", "--no-wait")), "[cell 2 started")
	assert.Contains(t, ok(t, e.Run("exec", "q", "'second'", "--queue", "--no-wait")), "[cell 3 queued")
	waitFor(t, func() bool {
		s := sessionInfo(t, e, "q")
		return s.State == "idle" && s.Unread && len(s.UnreadCells) == 1
	})
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	for _, cell := range []string{"2", "3"} {
		r := e.Run("wait", "q", "--cell", cell)
		require.Equal(t, 2, r.Code, "%s", r)
		assert.NotContains(t, r.Stderr, "collected already")
		assert.Contains(t, r.Stderr, fmt.Sprintf("cell %s of session 'q' finished in the hub (pid %d) that ended without handing the session over: its result, unless collected there, went with that hub", cell, hubPid))
	}
	r := e.Run("wait", "q", "--cell", "4")
	assert.Contains(t, r.Stderr, "cell 4 of session 'q' has not started: the last cell is 3", "%s", r)
}

// Why a cell's result will not come outlives a swap and a restart: a cell
// queued in a hub that was killed still never ran after both.
func TestQueueLostSaidAfterSwapAndRestart(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := blocker(t, e, "g")
	assert.Contains(t, ok(t, e.Run("exec", "g", "'never'", "--queue", "--no-wait")), "[cell 3 queued")
	hubPid := e.HubPid()
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second))
	openGate(t, gate)
	ok(t, e.Run("wait", "g", "--cell", "2", "-t", "20"))
	never := fmt.Sprintf("cell 3 of session 'g' never ran: queued in the hub (pid %d) that ended without handing its queue over", hubPid)
	refused(t, e.Run("wait", "g", "--cell", "3"), never)
	ok(t, e.Run("swap", "g"))
	ok(t, e.Run("exec", "g", "1"))
	refused(t, e.Run("wait", "g", "--cell", "3"), never)
	ok(t, e.Run("restart"))
	refused(t, e.Run("wait", "g", "--cell", "3"), never)
}

// A queued cell still running at a restart keeps its place as a queued
// cell's in the next hub: its result waits for `wait --cell`, and the next
// exec's reply does not take it as an earlier cell's (whose reply, lost
// with its client, left the cell said to be collected).
func TestQueuedCellRunningAtARestartKeepsItsResult(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	gate := blocker(t, e, "rq")
	later := gate + "-later"
	assert.Contains(t, ok(t, e.Run("exec", "rq", fmt.Sprintf("while not os.path.exists(%q): time.sleep(0.02)\n'queued'", later), "--queue", "--no-wait")), "[cell 3 queued")
	openGate(t, gate)
	ok(t, e.Run("wait", "rq", "--cell", "2", "-t", "20"))
	waitFor(t, func() bool { return strings.Contains(e.Run("sessions", "rq").Stdout, "(cell 3)") },
		func() string { return "cell 3 never ran: " + e.Run("sessions", "rq").Stdout })
	ok(t, e.Run("restart"))
	openGate(t, later)
	waitFor(t, func() bool { return strings.Contains(e.Run("sessions", "rq").Stdout, "idle") },
		func() string { return "cell 3 never ended: " + e.Run("sessions", "rq").Stdout })
	out := ok(t, e.Run("exec", "rq", "'next'"))
	assert.NotContains(t, out, "'queued'")
	assert.Contains(t, ok(t, e.Run("wait", "rq", "--cell", "3")), "Out[3]: 'queued'")
}
