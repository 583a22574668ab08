package boot

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cloudpickleArgs passes this machine's cloudpickle to a worker, as the hub
// does; none when it has none.
func cloudpickleArgs(t *testing.T) []string {
	out, err := exec.Command("python3", "-c", "import cloudpickle, os; print(os.path.dirname(cloudpickle.__file__))").Output()
	if err != nil {
		return nil
	}
	return []string{"--cloudpickle", strings.TrimSpace(string(out))}
}

// swapCells fill a namespace with what a swap keeps (shared data, code
// defined in cells), what it cannot keep (a socket, a lock, an open file)
// and a daemon thread.
const swapCells = `
import socket, threading, time, os
big = list(range(100000))
alias = big
d = {"k": big, "text": "é" * 10}
sock = socket.socket()
lock = threading.Lock()
fh = open(os.devnull)
ticker = threading.Thread(target=time.sleep, args=(60,), name="ticker", daemon=True)
ticker.start()
`

const swapCode = `
class Point:
    def __init__(self, x): self.x = x
    def twice(self): return helper(self.x)
def helper(v): return 2 * v
p = Point(21)
def counter():
    global calls
    calls = calls + 1
    return calls
calls = 0
`

func hasCode(w *worker) bool {
	return !strings.HasPrefix(w.ready.str("python"), "3.6.") && !strings.HasPrefix(w.ready.str("python"), "3.7.")
}

// names lists a frame's string list.
func names(f frame, k string) []string {
	var out []string
	for _, v := range f.h[k].([]any) {
		out = append(out, v.(string))
	}
	return out
}

func skipped(f frame) map[string]string {
	out := map[string]string{}
	for _, v := range f.h["skipped"].([]any) {
		m := v.(map[string]any)
		out[m["name"].(string)] = m["why"].(string)
	}
	return out
}

func fill(t *testing.T, w *worker) {
	t.Helper()
	done := w.run(swapCells, 20*time.Second)
	require.Equal(t, "ok", done.str("status"), "%s", done.line)
	if hasCode(w) {
		done = w.run(swapCode, 20*time.Second)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
	}
}

// checkSwapped checks a swapped frame: what went, what did not, the thread.
func checkSwapped(t *testing.T, w *worker, f frame) {
	t.Helper()
	require.Equal(t, true, f.h["ok"], "%s", f.line)
	assert.Subset(t, names(f, "names"), []string{"big", "alias", "d", "socket", "threading"})
	sk := skipped(f)
	for _, n := range []string{"sock", "lock", "fh", "ticker"} {
		assert.Contains(t, sk, n, "%s", f.line)
	}
	assert.Contains(t, sk["fh"], "an open file (/dev/null)")
	assert.Contains(t, names(f, "threads"), "ticker (daemon)")
	if hasCode(w) {
		assert.Subset(t, names(f, "names"), []string{"Point", "helper", "p", "counter", "calls"})
	}
}

// checkRestored checks that the namespace came back whole, sharing and
// code included.
func checkRestored(t *testing.T, w *worker, f frame) {
	t.Helper()
	require.Equal(t, true, f.h["ok"], "%s", f.line)
	assert.NotContains(t, names(f, "names"), "sock")
	done := w.run(`(alias is big, d["k"] is big, len(big), d["text"], os.getcwd() == `+pyStr(w.dir)+`)`, 20*time.Second)
	require.Equal(t, "ok", done.str("status"), "%s", done.line)
	assert.Equal(t, "(True, True, 100000, 'éééééééééé', False)", done.str("value"))
	if hasCode(w) {
		done = w.run(`(p.twice(), isinstance(p, Point), counter(), counter(), calls, helper.__globals__ is globals())`, 20*time.Second)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		assert.Equal(t, "(42, True, 1, 2, 2, True)", done.str("value"))
	}
}

func TestSwapToFileAndBack(t *testing.T) {
	cp := cloudpickleArgs(t)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py, cp...)
		fill(t, w)
		w.run("os.chdir("+pyStr(t.TempDir())+")", 10*time.Second)
		path := filepath.Join(t.TempDir(), "s.part")
		w.send(map[string]any{"op": "swap", "sid": 5, "path": path}, nil)
		f, _ := w.until("swapped", 60*time.Second, nil)
		assert.EqualValues(t, 5, f.num("sid"))
		checkSwapped(t, w, f)
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		assert.Equal(t, fi.Size(), f.num("size"))
		// The session goes on after a swap.
		w.healthy()

		w2 := startWorker(t, py, cp...)
		w2.send(map[string]any{"op": "restore", "sid": 6, "path": path}, nil)
		f, _ = w2.until("restored", 60*time.Second, nil)
		assert.EqualValues(t, 6, f.num("sid"))
		checkRestored(t, w2, f)

		// A file that is not safe to load is refused: group-readable, or a
		// link to a good one.
		require.NoError(t, os.Chmod(path, 0o640))
		w2.send(map[string]any{"op": "restore", "sid": 7, "path": path}, nil)
		f, _ = w2.until("restored", 10*time.Second, nil)
		assert.Equal(t, false, f.h["ok"])
		assert.Contains(t, f.str("error"), "has mode 0640")
		require.NoError(t, os.Chmod(path, 0o600))
		link := filepath.Join(t.TempDir(), "link")
		require.NoError(t, os.Symlink(path, link))
		w2.send(map[string]any{"op": "restore", "sid": 8, "path": link}, nil)
		f, _ = w2.until("restored", 10*time.Second, nil)
		assert.Equal(t, false, f.h["ok"])
		assert.NotEmpty(t, f.str("error"))
	})
}

// A remote session's swap travels as chunk frames, and comes back the same
// way, acknowledged chunk by chunk.
func TestSwapAsChunksAndBack(t *testing.T) {
	cp := cloudpickleArgs(t)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py, cp...)
		fill(t, w)
		w.run("blob = os.urandom(20 << 20)", 10*time.Second)
		w.send(map[string]any{"op": "swap", "sid": 9}, nil)
		f, before := w.until("swapped", 60*time.Second, nil)
		checkSwapped(t, w, f)
		var data []byte
		var seqs []int64
		for _, c := range before {
			if c.op() == "chunk" && c.num("sid") == 9 {
				data = append(data, c.data...)
				seqs = append(seqs, c.num("seq"))
				assert.LessOrEqual(t, len(c.data), 8<<20)
			}
		}
		assert.Greater(t, len(seqs), 2)
		assert.EqualValues(t, len(data), f.num("size"))
		for i, s := range seqs {
			assert.EqualValues(t, i, s)
		}

		w2 := startWorker(t, py, cp...)
		w2.send(map[string]any{"op": "restore", "sid": 10}, nil)
		a, _ := w2.until("ack", 20*time.Second, nil)
		assert.EqualValues(t, -1, a.num("seq"))
		seq := 0
		for off := 0; off < len(data); off += 8 << 20 {
			w2.send(map[string]any{"op": "chunk", "sid": 10, "seq": seq}, data[off:min(off+8<<20, len(data))])
			a, _ = w2.until("ack", 20*time.Second, nil)
			assert.EqualValues(t, seq, a.num("seq"))
			seq++
		}
		w2.send(map[string]any{"op": "chunk", "sid": 10, "seq": seq, "eof": true}, nil)
		f, _ = w2.until("restored", 60*time.Second, nil)
		checkRestored(t, w2, f)
		done := w2.run("len(blob)", 10*time.Second)
		assert.Equal(t, "20971520", done.str("value"))
	})
}

// A thread that is not a daemon, or a child process, is a background job:
// a swap without force leaves the session alone and says why.
func TestSwapWaitsForBackgroundJobs(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run(`import threading, time, subprocess
stop = threading.Event()
worker = threading.Thread(target=stop.wait, name="poller")
worker.start()`, 10*time.Second)
		path := filepath.Join(t.TempDir(), "s.part")
		w.send(map[string]any{"op": "swap", "sid": 1, "path": path}, nil)
		f, _ := w.until("swapped", 20*time.Second, nil)
		assert.Equal(t, false, f.h["ok"])
		assert.Equal(t, "thread 'poller'", f.str("job"))
		_, err := os.Stat(path)
		assert.True(t, os.IsNotExist(err), "nothing written")

		w.run("stop.set(); worker.join(); child = subprocess.Popen(['sleep', '30'])", 10*time.Second)
		w.send(map[string]any{"op": "swap", "sid": 2, "path": path}, nil)
		f, _ = w.until("swapped", 20*time.Second, nil)
		assert.Equal(t, false, f.h["ok"])
		assert.Regexp(t, `^pid \d+: sleep 30$`, f.str("job"))

		// force swaps all the same, and names the child.
		w.send(map[string]any{"op": "swap", "sid": 3, "path": path, "force": true}, nil)
		f, _ = w.until("swapped", 20*time.Second, nil)
		assert.Equal(t, true, f.h["ok"], "%s", f.line)
		assert.Len(t, names(f, "children"), 1)
		w.run("child.kill(); child.wait()", 10*time.Second)
		os.Remove(path)
		w.send(map[string]any{"op": "swap", "sid": 4, "path": path}, nil)
		f, _ = w.until("swapped", 20*time.Second, nil)
		assert.Equal(t, true, f.h["ok"], "%s", f.line)
		b, _ := json.Marshal(f.h["skipped"])
		assert.Contains(t, string(b), `"stop"`, "an Event holds a lock")
	})
}

// A name that fails to load costs only itself, from a file and from
// chunks: the names after it load whole, and one that was the same object
// says so instead of loading as something else.
func TestSwapRestoreGoesPastANameThatFails(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		mod := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(mod, "gonemod.py"), []byte("class Thing:\n    pass\n"), 0o600))
		w := startWorker(t, py)
		done := w.run(`import sys; sys.path.insert(0, `+pyStr(mod)+`); import gonemod
shared = ["shared"]
a = [shared, [gonemod.Thing() for _ in range(5)]]
b = [["y%d" % i] for i in range(50)]
b.append(b[0])
c = "still here"
alias = a`, 20*time.Second)
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		path := filepath.Join(t.TempDir(), "s.part")
		w.send(map[string]any{"op": "swap", "sid": 1, "path": path}, nil)
		f, _ := w.until("swapped", 60*time.Second, nil)
		require.Equal(t, true, f.h["ok"], "%s", f.line)
		w.send(map[string]any{"op": "swap", "sid": 2}, nil)
		f, before := w.until("swapped", 60*time.Second, nil)
		require.Equal(t, true, f.h["ok"], "%s", f.line)
		var data []byte
		for _, c := range before {
			if c.op() == "chunk" && c.num("sid") == 2 {
				data = append(data, c.data...)
			}
		}
		require.NoError(t, os.Remove(filepath.Join(mod, "gonemod.py")))
		os.RemoveAll(filepath.Join(mod, "__pycache__"))

		check := func(t *testing.T, w *worker, f frame) {
			require.Equal(t, true, f.h["ok"], "%s", f.line)
			sk := skipped(f)
			assert.Contains(t, sk["a"], "gonemod")
			assert.Equal(t, "it was a, which did not load", sk["alias"])
			assert.Contains(t, names(f, "names"), "b")
			assert.Contains(t, names(f, "names"), "c")
			done := w.run(`(c, len(b), b[-1] is b[0], b[49], 'a' in globals(), 'shared' in globals())`, 20*time.Second)
			require.Equal(t, "ok", done.str("status"), "%s", done.line)
			assert.Equal(t, "('still here', 51, True, ['y49'], False, True)", done.str("value"))
		}
		t.Run("file", func(t *testing.T) {
			w := startWorker(t, py)
			w.send(map[string]any{"op": "restore", "sid": 3, "path": path}, nil)
			f, _ := w.until("restored", 60*time.Second, nil)
			check(t, w, f)
		})
		t.Run("chunks", func(t *testing.T) {
			w := startWorker(t, py)
			w.send(map[string]any{"op": "restore", "sid": 4}, nil)
			w.until("ack", 20*time.Second, nil)
			w.send(map[string]any{"op": "chunk", "sid": 4, "seq": 0}, data)
			w.until("ack", 20*time.Second, nil)
			w.send(map[string]any{"op": "chunk", "sid": 4, "seq": 1, "eof": true}, nil)
			f, _ := w.until("restored", 60*time.Second, nil)
			check(t, w, f)
		})
	})
}

// A swap frame still queued behind a cell when its cancel comes is
// dropped and answered: no swap file is made once the cell ends (a hub
// that gave up on a stalled swap frame sends its cancel behind it).
func TestCancelDropsAQueuedSwap(t *testing.T) {
	w := startWorker(t, newestPython(t))
	cell := w.exec("import time; time.sleep(1)")
	path := filepath.Join(t.TempDir(), "s.part")
	w.send(map[string]any{"op": "swap", "sid": 7, "path": path}, nil)
	w.send(map[string]any{"op": "cancel", "sid": 7}, nil)
	f, _ := w.until("swapped", 10*time.Second, nil)
	assert.EqualValues(t, 7, f.num("sid"))
	assert.Equal(t, "cancelled", f.str("error"), "%s", f.line)
	w.until("done", 10*time.Second, func(f frame) bool { return f.num("cell") == int64(cell) })
	w.healthy()
	_, err := os.Lstat(path)
	assert.True(t, os.IsNotExist(err), "a swap file was made: %v", err)
}
