package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/tests/hubtest"
)

// objMake builds, in a session, the objects that stream: a bytes of 50 MiB
// (seven chunks of 8 MiB, the last partial: more than the window of four
// the hub lets go unacknowledged), a bytearray, memoryviews (one of floats in two dimensions), a mix of
// small and large buffers with one big buffer twice, an object of a class
// that gives a PickleBuffer (as numpy arrays do), and numpy arrays where
// numpy loads; digest(x) is their fingerprint.
const objMake = `import hashlib, pickle
MB = 1 << 20
big = bytes(range(256)) * (50 * MB // 256)
ba = bytearray(b"x" * (24 * MB + 3))
mv = memoryview(bytearray(range(256)) * (12 * MB // 256))
fl = memoryview(bytearray(16 * MB)).cast("d", [1024, 2048])
shared = bytes(3 * MB)
mixed = {"small": [1, "two", b"three"], "tiny": b"t" * 100, "big": [shared, shared, bytearray(2 * MB + 1)], "n": 7}
class ZeroCopy(bytearray):
    def __reduce_ex__(self, protocol):
        if protocol >= 5:
            return type(self), (pickle.PickleBuffer(self),), None
        return type(self), (bytearray(self),), None
zc = ZeroCopy(b"z" * (5 * MB))
try:
    import numpy
    arr = numpy.arange(4 * MB, dtype="float64").reshape(2048, -1)
except ImportError:
    arr = None
def digest(x):
    h = hashlib.sha256()
    def walk(v):
        h.update(type(v).__name__.encode())
        if isinstance(v, dict):
            for k in sorted(v):
                h.update(k.encode()); walk(v[k])
        elif isinstance(v, list):
            for i in v: walk(i)
        elif isinstance(v, memoryview):
            h.update(("%s%s%s" % (v.format, v.shape, v.readonly)).encode()); h.update(v.tobytes())
        elif hasattr(v, "tobytes"):
            h.update(repr(v.shape).encode()); h.update(v.tobytes())
        elif isinstance(v, (bytes, bytearray)):
            h.update(bytes(v))
        else:
            h.update(repr(v).encode())
    walk(x)
    return h.hexdigest()
`

// objRoundTrip puts the objects into session "b" (opened from "a" with
// open), gets them back, and calls b with a big argument and a big
// value, checking each on arrival, and that they streamed.
func objRoundTrip(t *testing.T, e *hubtest.Env, open string, bArgs ...string) {
	t.Helper()
	ok(t, e.Run(append([]string{"exec", "b", objMake}, bArgs...)...))
	ok(t, e.Run("exec", "a", objMake+"\nb = "+open))
	// Over 300 MB cross the hub in this cell: a loaded machine takes more
	// than exec's default 30 s. The put's buffers and the call's argument
	// come to 162 MiB without numpy (194 with it), all streamed.
	out := ok(t, e.Run("exec", "a", "-t", "300", `names = dict(big=big, ba=ba, mv=mv, fl=fl, mixed=mixed, zc=zc, arr=arr)
b.put(**names)
want = {k: digest(v) for k, v in names.items()}
there = b.call(lambda ks: {k: digest(globals()[k]) for k in ks}, sorted(names))
back = dict(zip(sorted(names), b.get(*sorted(names))))
print("put", there == want, "get", {k: digest(v) for k, v in back.items()} == want)
print("types", type(back["zc"]).__name__, type(back["ba"]).__name__, back["fl"].format, back["fl"].shape)
r = b.call(lambda x: x + b"!", big)
print("call", r[-1:] == b"!" and r[:-1] == big, len(r))
from replhub_toolkit import objstream
s = objstream.STATS
print("streamed", s["sent"] >= 8, s["received"] >= 8, s["sent_bytes"] > 150 * MB)`))
	assert.Contains(t, out, "put True get True")
	assert.Contains(t, out, "types ZeroCopy bytearray d (1024, 2048)")
	assert.Contains(t, out, "call True 52428801")
	assert.Contains(t, out, "streamed True True True")
	// A session is free once it has served: no transfer left half done.
	out = ok(t, e.Run("exec", "b", `digest(big) == digest(bytes(range(256)) * (50 * MB // 256)), type(mixed["big"][0]), mixed["big"][0] is mixed["big"][1]`))
	assert.Contains(t, out, "(True, <class 'bytes'>, True)")
}

// noStopSwap turns off the swaps of a hub's stop: swapping sessions that
// hold the objects to disk would only slow the test.
func noStopSwap(e *hubtest.Env) { e.WriteConfig(`{"swap_after_hours": 0}`) }

// streamHub is a hub whose sessions run Python 3.12 and are not swapped
// at its stop: what the local streaming tests share.
func streamHub(t *testing.T) *hubtest.Env {
	t.Helper()
	e := hubtest.Start(t)
	noStopSwap(e)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.12"))
	return e
}

func TestObjectStreamLocal(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := streamHub(t)
	objRoundTrip(t, e, `session("b")`)
}

// To a session behind sshd, the same objects, both ways.
func TestObjectStreamRemote(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	w := newSSHWorld(t, []string{"lab"}, plainLogin(t))
	noStopSwap(w.Env)
	w.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	objRoundTrip(t, w.Env, `session("b")`, "--host", "lab")
}

// Between 3.6 and 3.12 the one blob of protocol 4 still goes, both ways,
// big bytes included; nothing streams.
func TestObjectStreamOldPythonKeepsTheBlob(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	ok(t, e.Run("exec", "old", "big = bytes(range(256)) * (12 << 12)", "--python", py(t, "3.6")))
	ok(t, e.Run("exec", "new", "import hashlib", "--python", py(t, "3.12")))
	out := ok(t, e.Run("exec", "old", `n = session("new")
n.put(big=big, ba=bytearray(big))
n.call("len", big), n.get("ba") == big`))
	assert.Contains(t, out, "(12582912, True)")
	out = ok(t, e.Run("exec", "new", `o = session("old")
mine = bytes(5 << 20)
o.put(mine=mine)
back = o.get("big")
from replhub_toolkit import objstream
(o.call("len", mine), len(back), type(back).__name__, objstream.STATS["sent"], objstream.STATS["received"])`))
	assert.Contains(t, out, "(5242880, 12582912, 'bytes', 0, 0)")
}

// objCutStart puts 16 buffers of 4 MiB from session "a" into "b", and
// stops b (SIGSTOP) once three of them went, from the sending thread
// itself, before it sends the fourth: a put under way, for sure, with a
// chunk that b has not read on its way to it. (A thread that watched the
// count from aside could be late on a loaded machine: b had then read
// the whole window, or the whole put, and a waited for an answer.)
var objCutStart = `import os, time
b = session("b")
bpid = b.call(os.getpid)
parts = [bytearray(4 << 20) for _ in range(16)]
` + stopAtThird("bpid") + `
b.put(x=parts)`

// stopAtThird is Python for a session that sends buffers: once three of
// them went, the thread that sends them stops process pid (SIGSTOP), and
// makes the file "stopped", before it sends the next.
func stopAtThird(pid string) string {
	return `import os as _os, signal as _signal
from replhub_toolkit import objstream
class _StopAtThird(dict):
    def __setitem__(self, k, v):
        dict.__setitem__(self, k, v)
        if k == "sent" and v == 3:
            _os.kill(` + pid + `, _signal.SIGSTOP)
            open("stopped", "w").close()
objstream.STATS = _StopAtThird(objstream.STATS)`
}

// A put cut in the middle, its target stopped (SIGSTOP) once a few buffers
// went, by interrupting the caller, killing the target, or killing the
// caller: each side ends with a one-line error or is free again, the
// target keeps nothing of it, and both serve the next put.
func TestObjectStreamCut(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	for _, how := range []string{"interrupt", "kill target", "kill caller"} {
		t.Run(how, func(t *testing.T) {
			e := streamHub(t)
			ok(t, e.Run("exec", "b", "import os"))
			// Back at once: the file "stopped" says when the put is under way.
			r := e.Run("exec", "a", objCutStart, "-t", "0.2")
			require.Equal(t, 3, r.Code, "the put must still be under way: %s", r)
			stopped := filepath.Join(e.Cwd, "stopped")
			require.Eventually(t, func() bool { _, err := os.Stat(stopped); return err == nil }, 20*time.Second, 10*time.Millisecond)
			bpid := workerPid(t, e, "b")
			cont := func() { syscall.Kill(bpid, syscall.SIGCONT) }
			defer cont()
			switch how {
			case "interrupt":
				// a's answer comes though the hub's reader of a is held
				// up by a chunk that b does not take.
				t0 := time.Now()
				out := ok(t, e.Run("interrupt", "a"))
				assert.Contains(t, out, "interrupted cell 1 of session 'a' (KeyboardInterrupt raised in it)")
				if strings.Contains(out, "dropped") { // not when b stopped with a's window full: no chunk held a's reader
					assert.Regexp(t, `; the put to 'b' was dropped: 'b' took none of its data for [0-9.]+s \(stopped, or in code that holds the interpreter\?\); `, out)
				}
				assert.Less(t, time.Since(t0), 10*time.Second)
				r = e.Run("exec", "a", "1 + 1", "-t", "5")
				assert.Contains(t, ok(t, r), "KeyboardInterrupt", "the interrupted cell's result first")
				assert.Contains(t, r.Stdout, "2", "a is not wedged while b is stopped")
				cont()
			case "kill target":
				ok(t, e.Run("kill", "b"))
				r = e.Run("wait", "a", "-t", "20")
				assert.Contains(t, r.Stdout, "HubError: session 'b' died while serving the put: killed on request", "%s", r)
				ok(t, e.Run("exec", "b", "import os"))
			case "kill caller":
				ok(t, e.Run("kill", "a"))
				cont()
			}
			assert.Contains(t, ok(t, freeAgain(t, e, "b", "'x' in globals()")), "False")
			out := ok(t, e.Run("exec", "a", `b = session("b"); b.put(y=bytes(9 << 20)); b.call(lambda: len(y))`))
			assert.Contains(t, out, "9437184")
		})
	}
}

// A group's get whose caller stops (SIGSTOP) once the value's first chunk
// came: the member's reader is held by the chunks it relays to the caller,
// and an interrupt of the member drops that part and says so in time,
// rather than say the member did not stop. Once the caller goes on, its
// cell ends with the part's error and both sessions serve again.
func TestObjectStreamInterruptServingAStoppedCaller(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := streamHub(t)
	ok(t, e.Run("exec", "g@local", "big = [bytearray(4 << 20) for _ in range(32)]"))
	// a stops itself as it takes the value's first chunk, on the thread
	// that takes it: 31 more are to come.
	r := e.Run("exec", "a", `import os, signal
from replhub_toolkit import objstream
g = sessions_on("local", "g")
_take = objstream.Part._take
def take(self, chan, bufs, h, data):
    if h.get("op") == "chunk" and not os.path.exists("stopped"):
        open("stopped", "w").close()
        os.kill(os.getpid(), signal.SIGSTOP)
    return _take(self, chan, bufs, h, data)
objstream.Part._take = take
got = g.get("big")`, "-t", "0.2")
	require.Equal(t, 3, r.Code, "the get must still be under way: %s", r)
	apid := workerPid(t, e, "a")
	cont := func() { syscall.Kill(apid, syscall.SIGCONT) }
	defer cont()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(e.Cwd, "stopped")); return err == nil }, 30*time.Second, 10*time.Millisecond)
	// The member goes on until the hub's window to the stopped caller is
	// full, and then waits: an interrupt before that ends its serve as
	// any other, which is not what this test is about. On a loaded
	// machine that can take a while: wait until it spends no CPU, and
	// none of its threads waits for one (a starved process spends none).
	gpid := workerPid(t, e, "g@local")
	last, still := cpuTicks(t, gpid), 0
	require.Eventually(t, func() bool {
		now := cpuTicks(t, gpid)
		if now == last && noThreadRunnable(gpid) {
			still++
		} else {
			last, still = now, 0
		}
		return still >= 3
	}, 30*time.Second, 100*time.Millisecond, "the member never waited on the stopped caller")

	t0 := time.Now()
	out := ok(t, e.Run("interrupt", "g@local"))
	assert.Less(t, time.Since(t0), 10*time.Second)
	assert.Regexp(t, `^interrupted the get session 'g@local' was serving for 'a'; the get for 'a' was dropped: 'a' took none of its data for [0-9.]+s \(stopped, or in code that holds the interpreter\?\)`, out)
	assert.Contains(t, ok(t, freeAgain(t, e, "g@local", "len(big)")), "32", "the member serves again")
	cont()
	ok(t, e.Run("wait", "a", "-t", "30"))
	assert.Regexp(t, `HubError\(.*dropped`, ok(t, e.Run("exec", "a", `print(repr(got["local"]))`)), "the part's error")
	assert.Contains(t, ok(t, e.Run("exec", "a", "objstream.Part._take = _take; sum(map(len, g.get('big')['local']))", "-t", "60")), "134217728")
}

// The hub holds a window of chunks, not the object: its peak memory grows
// by far less than a 512 MiB put.
func TestObjectStreamHubMemory(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	e := streamHub(t)
	ok(t, e.Run("exec", "b", "1"))
	ok(t, e.Run("exec", "a", `b = session("b"); b.put(warm=bytes(16 << 20)); big = bytearray(512 << 20)`))
	before := peakRSS(t, e.HubPid())
	// b's big, by globals(): a lambda naming big would take a's along,
	// another 512 MiB through the hub.
	out := ok(t, e.Run("exec", "a", `b.put(big=big); b.call(lambda: len(globals()["big"]))`, "-t", "120"))
	assert.Contains(t, out, "536870912")
	grew := peakRSS(t, e.HubPid()) - before
	t.Logf("hub peak grew by %d KiB during a 512 MiB put", grew>>10)
	// The race detector's shadow memory, and its pool that drops buffers
	// at random, cost more; still far less than the object.
	bound := int64(64 << 20)
	if hubtest.Race {
		bound = 256 << 20
	}
	assert.Less(t, grew, bound, "the hub's peak grew by %d MiB", grew>>20)
}

// freeAgain runs code in session name once it is no longer busy (within
// 20 s) and returns that run.
func freeAgain(t *testing.T, e *hubtest.Env, name, code string) hubtest.Result {
	t.Helper()
	var r hubtest.Result
	require.Eventually(t, func() bool {
		r = e.Run("exec", name, code)
		return r.Code != 2 || !strings.Contains(r.Stderr, "busy")
	}, 20*time.Second, 50*time.Millisecond, "session %s is free again", name)
	return r
}

// A put to a session behind sshd whose link drops in the middle: the caller
// hears of it in one line at once; the target, reattached, kept nothing of
// it and takes the next put.
func TestObjectStreamLinkDrop(t *testing.T) {
	t.Parallel()
	needCloudpickle(t)
	w, relay := lingerWorld(t)
	w.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	ok(t, w.Run("exec", "b", "import os", "--host", "lab"))
	bpid := endWorkerAtCleanup(t, w.Env, "b")
	defer syscall.Kill(bpid, syscall.SIGCONT)
	r := w.Run("exec", "a", strings.Replace(objCutStart, "b.put(x=parts)", "try:\n    b.put(x=parts)\nexcept Exception as e:\n    print('put failed:', e)", 1), "-t", "1")
	require.Equal(t, 3, r.Code, "the put must still be under way: %s", r)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(w.Cwd, "stopped")); return err == nil }, 20*time.Second, 10*time.Millisecond)
	relay.Drop()
	r = w.Run("wait", "a", "-t", "20")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "put failed: the link to session 'b' on lab dropped while it served the put; the hub is reconnecting")
	syscall.Kill(bpid, syscall.SIGCONT)
	relay.Restore()
	assert.Contains(t, ok(t, freeAgain(t, w.Env, "b", "'x' in globals()")), "False")
	out := ok(t, w.Run("exec", "a", `b.put(y=bytes(9 << 20)); b.call(lambda: len(y))`))
	assert.Contains(t, out, "9437184")
}

// cpuTicks is the CPU time pid has used, user and system, in clock ticks.
// noThreadRunnable says whether no thread of pid is running or waits for
// a CPU (state R).
func noThreadRunnable(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] == 'R' {
			return false
		}
	}
	return len(stats) > 0
}

func cpuTicks(t *testing.T, pid int) string {
	t.Helper()
	f, ok := procstat.Fields(pid)
	require.True(t, ok && len(f) > 12, "no /proc/%d/stat: %q", pid, f)
	return f[11] + " " + f[12]
}
