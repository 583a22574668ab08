package tests

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// A link that dies silently while a cell writes output: the old sshd
// stops reading, the worker's output pipe fills and the pump blocks in a
// write to it, holding its lock. The reattach must still hand the new hub
// the session: the cell's later output and its result.
func TestFrozenLinkWithOutputInFlight(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	ok(t, w.Run("exec", "f", "import time, sys", "--host", "lab"))
	pid := endWorkerAtCleanup(t, w.Env, "f")
	// ~1 MB/s of output for 8 s: fills any pipe and ssh window once frozen.
	r := w.Run("exec", "f", "for i in range(800):\n    print('y' * 10000, flush=True); time.sleep(0.01)\n'finished'", "-t", "1")
	require.Equal(t, 3, r.Code, "still running: %s", r)
	relay.Freeze()
	t0 := time.Now()
	r = w.Run("wait", "f", "-t", "40")
	if m, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid)); r.Code != 0 && m != nil {
		for _, task := range m {
			comm, _ := os.ReadFile(task + "/comm")
			sc, _ := os.ReadFile(task + "/syscall")
			t.Logf("thread %s: syscall %s", strings.TrimSpace(string(comm)), strings.Fields(string(sc) + " ?")[0:2])
		}
	}
	t.Logf("wait after %s: code %d\n%.400s", time.Since(t0), r.Code, r.Stdout+r.Stderr)
	require.Equal(t, 0, r.Code, "the cell's result arrives after the reattach")
	require.Contains(t, r.Stdout, "finished")
	r = w.Run("exec", "f", "1 + 1", "-t", "10")
	require.Equal(t, 0, r.Code, "the session answers: %.400s", r.Stdout+r.Stderr)
}

// A kill while the hub is reattaching to a host that accepts TCP but says
// nothing (a blackholed path, a hung sshd): the reattach try runs for up
// to 30 s with no way for Kill to stop it, so kill fails after 5 s.
func TestKillWhileRelinkHangs(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	ok(t, w.Run("exec", "h", "x = 1", "--host", "lab"))
	endWorkerAtCleanup(t, w.Env, "h")
	tarpit, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { tarpit.Close() })
	go func() {
		for {
			c, err := tarpit.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	relay.Drop()
	relay.Retarget(tarpit.Addr().String())
	relay.Restore()
	time.Sleep(2 * time.Second) // the hub is now inside a try that hangs
	t0 := time.Now()
	r := w.Run("kill", "h")
	t.Logf("kill after %s: %s", time.Since(t0), r.Stdout+r.Stderr)
	require.Equal(t, 0, r.Code, "kill of a session on hold succeeds")
}

// A session killed while its link is down cannot tell its worker then;
// the hub tells it (exit) once the link is back: the worker ends, rather
// than run on for its linger. So too for a kill as a link freezes, before
// the hub has seen it die: the exit goes into the dead link.
func TestKillWhileTheLinkIsDownEndsTheWorker(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "down", true: "frozen"}[frozen], func(t *testing.T) {
			t.Parallel()
			w, relay := lingerWorld(t)
			ok(t, w.Run("exec", "d", "x = 1", "--host", "lab"))
			pid := endWorkerAtCleanup(t, w.Env, "d")
			if frozen {
				relay.Freeze() // new connections pass
			} else {
				relay.Drop()
				waitFor(t, func() bool { return sessionInfo(t, w.Env, "d").LinkDownS != 0 }, func() string { return "the hub never saw the link drop" })
			}
			r := w.Run("kill", "d")
			t.Logf("kill: code %d, %s", r.Code, r.Stdout+r.Stderr)
			relay.Restore()
			require.True(t, hubtest.WaitGone(pid, 40*time.Second), "the worker ran on after the link came back")
		})
	}
}

// sh(cmd, host=h) from a session that is then killed: the command on h
// should end with the session that waited for it. The hub kills its group
// over a channel of its own, and gives that kill 5 s (remote's killGroup):
// the command must be gone within those, plus the time a loaded machine
// takes to open the channel.
func TestHostShEndsWithItsSession(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("exec", "loc", `sh("sleep 313", host="lab", timeout=None)`, "-t", "2")
	require.Equal(t, 3, r.Code, "running: %s", r)
	ok(t, w.Run("kill", "loc"))
	running := func() bool {
		for _, pid := range w.servers["lab"].Children() {
			if strings.Contains(sshtest.Cmdline(pid), "sleep 313") {
				return true
			}
		}
		return false
	}
	t0 := time.Now()
	for running() && time.Since(t0) < 8*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	require.False(t, running(), "the command outlived the session that ran it by %s", time.Since(t0))
	t.Logf("the command ended %s after the kill", time.Since(t0))
}

// The first use of the hub link from two threads at once: Session.tk is
// not guarded, each thread loads its own replhub_tk with its own Link,
// and the reply to one of them goes to the other: that thread waits for
// ever.
func TestFirstHubRequestsFromThreads(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "th", "import threading, time"))
	r := e.Run("exec", "th", `
errs = []
def go():
    try:
        sh("true", host="nosuchhost.invalid")
    except Exception as e:
        errs.append(type(e).__name__)
ts = [threading.Thread(target=go, daemon=True) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join(10)
(len(errs), sum(t.is_alive() for t in ts))`, "-t", "30")
	require.Equal(t, 0, r.Code, "%s", r)
	require.Contains(t, r.Stdout, "(8, 0)", "every thread got its answer")
}

// A host command that times out: SIGKILL reaches only the process sshd
// started (bash), not what bash started; those run on.
func TestHostShTimeoutEndsTheWholeCommand(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("exec", "loc", `sh("sleep 317; echo done", host="lab", timeout=1)`)
	require.Contains(t, r.Stdout, "no end within")
	time.Sleep(time.Second)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && strings.HasPrefix(sshtest.Cmdline(pid), "sleep 317") {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("pid %d (%s) outlived its command's timeout", pid, sshtest.Cmdline(pid))
		}
	}
}
