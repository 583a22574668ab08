package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// testStall is the hub's relayStall in these tests (REPLHUB_RELAY_STALL).
const testStall = "3s"

// stallHub starts a hub whose relays give up after testStall.
func stallHub(t *testing.T) *hubtest.Env {
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.12"))
	e.Setenv("REPLHUB_RELAY_STALL", testStall)
	return e
}

// waitFile waits for the file name in e's cwd.
func waitFile(t *testing.T, e *hubtest.Env, name string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(e.Cwd, name)); return err == nil },
		60*time.Second, 10*time.Millisecond, "%s was not made", name)
}

// A put of 100 MB whose target is stopped (SIGSTOP) in the middle fails
// within relayStall and a margin, saying which session and what to do;
// the caller answers its next cell at once, and so does an interrupt of
// the target; the target, continued, is free again, kept nothing of it,
// and takes the next put.
func TestRelayStallPut(t *testing.T) {
	needCloudpickle(t)
	e := stallHub(t)
	ok(t, e.Run("exec", "b", "import os"))
	bpid := workerPid(t, e, "b")
	defer syscall.Kill(bpid, syscall.SIGCONT)
	put := strings.NewReplacer("range(48)", "range(25)", "b.put(x=parts)", `try:
    b.put(x=parts)
except Exception as e:
    print("put failed after", round(time.time() - os.stat("stopped").st_mtime, 1), "s:", e)`).Replace(objCutStart)
	out := ok(t, e.Run("exec", "a", put, "-t", "120"))
	assert.Contains(t, out, "s: session 'b' took none of the put's data for 3.0s: is it stopped (SIGSTOP) or stuck in C code? interrupt or kill it\n")
	var after float64
	_, err := fmt.Sscan(out[strings.Index(out, "put failed after")+len("put failed after"):], &after)
	require.NoError(t, err, "%s", out)
	assert.Less(t, after, 2*3.0+10, "the put failed %.1f s after b stopped", after)

	r := e.Run("exec", "a", "1 + 1", "-t", "5")
	assert.Contains(t, ok(t, r), "2", "the caller is not wedged")
	r = e.Run("exec", "b", "1", "-t", "1")
	assert.Equal(t, 2, r.Code, "a stopped target mid-serve is busy: %s", r)
	assert.Contains(t, r.Stderr, "serving a put from 'a'")
	t0 := time.Now()
	r = e.Run("interrupt", "b")
	assert.Less(t, time.Since(t0), 30*time.Second, "the interrupt the message advises answers while b is stopped")
	assert.Regexp(t, `^asked session 'b' to stop the put it serves for 'a', but it has not stopped within 2(\.[0-9])?s \(stopped, or in code that holds the interpreter\): `, r.Stdout, "%s", r)

	syscall.Kill(bpid, syscall.SIGCONT)
	assert.Contains(t, ok(t, freeAgain(t, e, "b", "'x' in globals()")), "False")
	out = ok(t, e.Run("exec", "a", `b.put(y=bytes(9 << 20)); b.call(lambda: len(y))`))
	assert.Contains(t, out, "9437184")
}

// A pull from a session stopped (SIGSTOP) before it answers fails within
// relayStall and a margin, saying which session and what to do, where it
// waited for ever; the target, continued, is free again.
func TestRelayStallPullUnanswered(t *testing.T) {
	e := stallHub(t)
	ok(t, e.Run("exec", "b", "import os"))
	ok(t, e.Run("exec", "a", `b = session("b")`))
	bpid := workerPid(t, e, "b")
	defer syscall.Kill(bpid, syscall.SIGCONT)
	require.NoError(t, syscall.Kill(bpid, syscall.SIGSTOP))
	out := ok(t, e.Run("exec", "a", `import time
t0 = time.time()
try:
    b.pull("/etc/hostname", "got")
except Exception as e:
    print("pull failed after", round(time.time() - t0, 1), "s:", e)`, "-t", "60"))
	assert.Contains(t, out, "s: session 'b' did not answer the pull for 3.0s: is it stopped (SIGSTOP), stuck in C code, or blocked opening the file (a FIFO, a hung mount)? interrupt or kill it\n")
	var after float64
	_, err := fmt.Sscan(out[strings.Index(out, "pull failed after")+len("pull failed after"):], &after)
	require.NoError(t, err, "%s", out)
	assert.Less(t, after, 3.0+10, "the pull failed %.1f s after it began", after)
	syscall.Kill(bpid, syscall.SIGCONT)
	assert.Contains(t, ok(t, freeAgain(t, e, "b", "os.path.exists('got')")), "False")
	assert.Contains(t, ok(t, e.Run("exec", "a", `len(b.pull("/etc/hostname")) > 0`)), "True")
}

// A get whose caller is stopped (SIGSTOP) in the middle: the target, its
// link failed, is cancelled and free again while the caller is still
// stopped; the caller, continued, hears why its get failed.
func TestRelayStallGet(t *testing.T) {
	needCloudpickle(t)
	e := stallHub(t)
	ok(t, e.Run("exec", "a", `import os
b = session("b")
b.put(apid=os.getpid())`))
	apid := workerPid(t, e, "a")
	defer syscall.Kill(apid, syscall.SIGCONT)
	// b stops a once three of its 25 buffers went.
	ok(t, e.Run("exec", "b", "parts = [bytearray(4 << 20) for _ in range(25)]\n"+stopAtThird("apid")))
	r := e.Run("exec", "a", `try:
    x = b.get("parts")
    print("got", len(x))
except Exception as e:
    print("get failed:", e)`, "-t", "1")
	require.Equal(t, 3, r.Code, "the get must still be under way: %s", r)
	waitFile(t, e, "stopped")
	t0 := time.Now()
	assert.Contains(t, ok(t, freeAgain(t, e, "b", "len(parts)")), "25", "the target is not wedged by its stopped caller")
	t.Logf("b free %s after a stopped", time.Since(t0).Round(100*time.Millisecond))

	syscall.Kill(apid, syscall.SIGCONT)
	r = e.Run("wait", "a", "-t", "30")
	assert.Contains(t, ok(t, r), "get failed: session 'a' took none of the get's data for 3.0s")
	assert.Contains(t, ok(t, e.Run("exec", "a", `len(b.get("parts"))`, "-t", "60")), "25")
}

// A group's put to three sessions, one of them stopped (SIGSTOP) in the
// middle: that part fails alone, the other two get the whole object, and
// the stopped one, continued, is free and kept nothing of it.
func TestRelayStallGroupPut(t *testing.T) {
	needCloudpickle(t)
	w := newSSHWorld(t, []string{"lab-1", "lab-2"}, sshtest.Options{})
	py312 := py(t, "3.12")
	w.Setenv("REPLHUB_PYTHON", py312)
	w.Setenv("REPLHUB_RELAY_STALL", testStall)
	w.WriteConfig(`{"swap_after_hours": 0, "linger": 0}`)
	out := ok(t, w.Run("exec", "driver", groupOpen("g", py312), "-t", "120"))
	require.Contains(t, out, "<group 'g' on 3 hosts>")
	victim := workerPid(t, w.Env, "g@local")
	defer syscall.Kill(victim, syscall.SIGCONT)
	out = ok(t, w.Run("exec", "driver", signalMidway("local", "SIGSTOP")+`
put = g.put(other=obj)
print("put", {h: str(v) for h, v in sorted(put.items())})
there = g.call(lambda: globals()["other"] == bytes(range(256)) * (110 * (1 << 20) // 256))
print("there", there["lab-1"], there["lab-2"])`, "-t", "180"))
	assert.Contains(t, out, `put {'lab-1': 'None', 'lab-2': 'None', 'local': "session 'g@local' took none of the put's data for 3.0s: is it stopped (SIGSTOP) or stuck in C code? interrupt or kill it"}`+"\n")
	assert.Contains(t, out, "there True True\n")
	syscall.Kill(victim, syscall.SIGCONT)
	assert.Contains(t, ok(t, freeAgain(t, w.Env, "g@local", "'other' in globals()")), "False")
}

// A push from the command line to a session stopped (SIGSTOP) before it
// reads: the push fails within relayStall and a margin and says what to
// do, instead of waiting with the session; the session, continued, is
// free again and takes the next push whole.
func TestRelayStallCLIPush(t *testing.T) {
	e := stallHub(t)
	ok(t, e.Run("exec", "b", "import os"))
	bpid := workerPid(t, e, "b")
	defer syscall.Kill(bpid, syscall.SIGCONT)
	src := filepath.Join(e.Dir, "big")
	f, err := os.Create(src)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<20))
	f.Close()
	require.NoError(t, syscall.Kill(bpid, syscall.SIGSTOP))
	t0 := time.Now()
	r := e.Run("push", "b", src, "big.copy")
	took := time.Since(t0)
	assert.NotEqual(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "session 'b' did not answer the push for 3.0s: is it stopped (SIGSTOP), stuck in C code, or blocked opening the file (a FIFO, a hung mount)? interrupt or kill it", "%s", r)
	assert.Less(t, took, 2*3*time.Second+10*time.Second, "the push failed %s after it began", took)

	syscall.Kill(bpid, syscall.SIGCONT)
	assert.Contains(t, ok(t, freeAgain(t, e, "b", "os.path.exists('big.copy')")), "False")
	r = e.Run("push", "b", src, "big.copy")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, ok(t, e.Run("exec", "b", "os.path.getsize('big.copy')")), "67108864")
}
