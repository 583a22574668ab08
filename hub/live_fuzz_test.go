package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/internal/testbound"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// The files a hub reads back from its state and runtime folders may have
// been torn by a crash or a full disk, or put there by another process:
// nothing in them may make the hub panic, hang, allocate without bound,
// signal a process that is not its worker, or touch a file outside its
// folders.

// fuzzHub is a hub in a temporary folder, for a fuzz target's many runs;
// root holds its folders and a file, outside them, that no record may
// make it touch.
func fuzzHub(f *testing.F) (h *Hub, p config.Paths, root string) {
	root = f.TempDir()
	p = config.Paths{Runtime: filepath.Join(root, "run"), State: filepath.Join(root, "state"), Config: filepath.Join(root, "config")}
	h, err := New(Options{Paths: p})
	require.NoError(f, err)
	payload.CloudpickleDir() // what New started in the background: its cache written
	require.NoError(f, os.WriteFile(filepath.Join(root, "outside"), []byte("keep me"), 0o600))
	return h, p, root
}

// files lists the files under root, each with its size and mode.
func files(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = fmt.Sprintf("%d %v", fi.Size(), fi.Mode())
		return nil
	})
	require.NoError(t, err)
	return out
}

// changedOnlyIn fails t when a file under root outside dirs came or went
// or changed between before and after.
func changedOnlyIn(t *testing.T, before, after map[string]string, dirs ...string) {
	t.Helper()
	inside := func(path string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(path, d+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	for path, was := range before {
		if now, ok := after[path]; (!ok || now != was) && !inside(path) {
			t.Fatalf("%s changed (%s, then %q), outside %v", path, was, now, dirs)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok && !inside(path) {
			t.Fatalf("%s was made, outside %v", path, dirs)
		}
	}
}

// liveSeeds are records as the hub writes them, and torn or forged ones.
func liveSeeds(f *testing.F, h *Hub, p config.Paths, root string) [][]byte {
	s := startedSession(h, "x", 4242)
	s.cells, s.sock, s.workerStart = 3, filepath.Join(p.WorkerDir(), "0123456789abcdef.sock"), "123"
	s.mu.Lock()
	rec := h.liveRecordLocked(s)
	s.mu.Unlock()
	rec.HubPid, rec.HubStart = 1, "1" // not a live hub: pid 1 started at boot, not at tick 1
	var b outBuf
	b.write(true, []byte("out\n"))
	b.write(false, []byte("err \xff\n"))
	ho := &handover{At: time.Now(), Notes: []string{"a note"}, Result: &wire.Result{Cell: 3, Status: wire.StatusOK, Output: "hi\n"},
		Queue: []queuedCode{{Cell: 4, Code: "1+1"}}, Kept: []*wire.Result{{Cell: 2}, nil}}
	ho.keepOutput(&b)
	whole, err := json.Marshal(rec)
	require.NoError(f, err)
	rec.Handover = ho
	handed, err := json.Marshal(rec)
	require.NoError(f, err)
	padded := append(append([]byte(nil), whole...), strings.Repeat(" ", maxPad)...)
	out := [][]byte{whole, handed, padded, []byte(`{"name":"x"}`), []byte(`{"name":"to`), {}, []byte("null"), []byte(`[]`),
		[]byte(`{"name":"x","private":true,"sock":"` + filepath.Join(root, "outside") + `"}`),
		[]byte(`{"name":"x","host":"local","pid":1,"sock":"../../outside","cells":-9223372036854775808}`),
		[]byte(`{"name":"x","sock":"` + p.WorkerDir() + `/../../outside"}`),
		[]byte(`{"name":"../x","hub_pid":-1,"seen":"0001-01-01T00:00:00Z"}`),
		[]byte(`{"name":"x","handover":{"unread":"ab","unread_runs":[1,9223372036854775807,9223372036854775807,3]}}`)}
	for _, n := range []int{1, len(handed) / 3, len(handed) / 2, len(handed) - 1} {
		out = append(out, handed[:n])
	}
	return out
}

// A record read back at start becomes a death note (one that says it was
// unreadable, when it was), is left to the live hub it names, or is
// dropped (a run's); it is removed unless its hub lives, and nothing
// outside the live, dead and worker folders changes, whatever its socket
// or name says.
func FuzzReclaimLive(f *testing.F) {
	h, p, root := fuzzHub(f)
	for _, b := range liveSeeds(f, h, p, root) {
		f.Add("x", b)
	}
	f.Add("a@lab-7", []byte(`{"name":"a@lab-7","host":"lab-7","root":true,"cells":1}`))
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		if checkName(name) != nil {
			name = "x"
		}
		// Relative paths in a record resolve from the hub's folders.
		t.Chdir(p.LiveDir())
		path := h.livePath(name)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		defer func() {
			os.Remove(path)
			h.takeDeathNote(name)
		}()
		before := files(t, root)
		h.reclaimLive()
		changedOnlyIn(t, before, files(t, root), p.LiveDir(), p.DeadDir(), p.WorkerDir())
		if h.sessions[name] != nil {
			t.Fatalf("adopted a session from %q, with no worker", b)
		}

		var rec liveRecord
		readable := fewValues(b) && json.Unmarshal(b, &rec) == nil && rec.Name == name
		_, err := os.Stat(path)
		kept := err == nil
		note := h.readDeathNote(name)
		switch {
		case readable && hubAlive(rec.HubPid, rec.HubStart):
			if !kept || note != nil {
				t.Fatalf("the record of a live hub (pid %d) was taken: kept %v, note %+v", rec.HubPid, kept, note)
			}
		case kept:
			t.Fatalf("the record %q stays", b)
		case readable && rec.Private:
			if note != nil {
				t.Fatalf("a run's record left a note: %+v", note)
			}
		case note == nil:
			t.Fatalf("the record %q left no note", b)
		case note.Name != name:
			t.Fatalf("the note of %q is named %q", name, note.Name)
		case readable == strings.Contains(note.How, "unreadable"):
			t.Fatalf("readable %v, but the note says %q", readable, note.How)
		case readable && (note.Cells != rec.Cells || note.Host != rec.Host || note.Root != rec.Root):
			t.Fatalf("the note %+v does not say what the record %+v did", note, rec)
		default:
			if text := note.text(); !strings.Contains(text, "session '"+name+"' died") {
				t.Fatalf("the note reads %q", text)
			}
		}
	})
}

// A hand-over as the next hub decodes it from a record: its output goes
// back whole (by its runs when they fit it, else as one stream), and the
// queue and results it holds are kept within the session's bounds.
func FuzzHandover(f *testing.F) {
	h, p, root := fuzzHub(f)
	for _, b := range liveSeeds(f, h, p, root) {
		var rec struct {
			Handover json.RawMessage `json:"handover"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Handover != nil {
			f.Add([]byte(rec.Handover), 0)
		}
	}
	f.Add([]byte(`{"queue":[{"cell":3},{"cell":2},{"cell":1}],"kept":[{"cell":9},{"cell":8},null,{"cell":7}]}`), 1)
	f.Add([]byte(`{"unread":"abc","unread_runs":[-1,2],"unread_stdout":"bc","unread_stderr":"a"}`), 0)
	f.Add([]byte(`{"unread":"abc","unread_runs":[-9223372036854775808,2]}`), 0)
	f.Fuzz(func(t *testing.T, b []byte, have int) {
		var ho handover
		if json.Unmarshal(b, &ho) != nil {
			t.Skip()
		}
		var out outBuf
		ho.restoreOutput(&out)
		if got := out.total[stdoutIx] + out.total[stderrIx]; got != len(ho.Unread) {
			t.Fatalf("restored %d bytes of %d", got, len(ho.Unread))
		}
		fits, sum := len(ho.UnreadRuns) > 0, [2]int{}
		for _, n := range ho.UnreadRuns {
			if n == 0 || n == math.MinInt || abs(n) > len(ho.Unread) {
				fits = false
				break
			}
			sum[streamIx(n > 0)] += abs(n)
		}
		if fits && sum[0]+sum[1] == len(ho.Unread) && sum != out.total {
			t.Fatalf("runs %v restored as %v bytes of stdout and stderr", ho.UnreadRuns, out.total)
		}

		s := newSession(h, "x")
		s.takeQueueOver(&ho, have)
		if len(s.queue) > maxQueue || len(s.kept) > maxKept || len(s.gone) > maxGone {
			t.Fatalf("queue %d, kept %d, gone %d: over the bounds %d, %d, %d", len(s.queue), len(s.kept), len(s.gone), maxQueue, maxKept, maxGone)
		}
		for _, r := range s.queue {
			if r.cell <= have {
				t.Fatalf("cell %d queued again, the worker having had %d", r.cell, have)
			}
		}
		for _, r := range s.kept {
			if r.result == nil {
				t.Fatal("a kept result is nil")
			}
			r.result.Text()
		}
	})
}

// The hand-over keeps each stream's output apart through JSON, whatever
// the bytes and however they are cut into runs; past UnreadCap, what was
// dropped is told in a note.
func FuzzHandoverRoundTrip(f *testing.F) {
	f.Add([]byte("out \xff1\nerr \xfe\xfd\nout \xe2\x82\xacerr\nout é\x80"), []byte{7, 0x88, 7, 0x84, 6}, uint16(0))
	f.Add([]byte("plain"), []byte{}, uint16(0))
	f.Add([]byte(strings.Repeat("0123456789abcdef", 128)), []byte{0x7f, 0x90, 0x20}, uint16(7))
	f.Add([]byte("x\n"), []byte{0xff, 0x7f, 0xff}, uint16(7))
	f.Add([]byte("é\xffab\n"), []byte{0x40, 0xc0, 0x41, 0xc1, 0x7f}, uint16(3))
	f.Add([]byte(strings.Repeat("a line of output, long enough to fill the buffer\n", 2)), []byte{0x01, 0xff, 0x7f, 0xc1}, uint16(0xf000))
	f.Fuzz(func(t *testing.T, data, cuts []byte, rep uint16) {
		// The bytes are repeated up to 8 times, or (rep's top four bits
		// set, seldom: it is slow) to about 3 MB, past UnreadCap; each cut
		// is a run's length (its low 7 bits, times 97 past 64) and stream
		// (the top bit); what is left is one last run.
		if n := 1 + int(rep%8); rep >= 0xf000 && len(data) > 0 {
			data = bytes.Repeat(data, (3<<20)/len(data)+1)
		} else {
			data = bytes.Repeat(data, n)
		}
		var b outBuf
		rest, stdout := data, true
		for _, c := range cuts {
			n := int(c & 0x7f)
			if n > 64 {
				n = (n - 64) * 97
			}
			n = min(n, len(rest))
			stdout = c&0x80 == 0
			b.write(stdout, rest[:n])
			rest = rest[n:]
		}
		b.write(!stdout, rest)
		want := b.render(ReplyCap)
		back, nb := throughHandover(t, &b)
		if b.dropped > 0 {
			// What was dropped is told in a note, not counted in the text.
			if len(back.Notes) != 1 || !strings.Contains(back.Notes[0], "bytes of unread output were dropped") {
				t.Fatalf("%d bytes dropped, and the notes say %q", b.dropped, back.Notes)
			}
			if n := nb.total[stdoutIx] + nb.total[stderrIx]; n != len(back.Unread) {
				t.Fatalf("restored %d bytes of %d", n, len(back.Unread))
			}
			return
		}
		got := nb.render(ReplyCap)
		if got.stdout.text != want.stdout.text || got.stderr.text != want.stderr.text || got.all.text != want.all.text {
			t.Fatalf("through a hand-over:\n%q %q %q\nbecame\n%q %q %q", want.all.text, want.stdout.text, want.stderr.text,
				got.all.text, got.stdout.text, got.stderr.text)
		}
	})
}

// Runs whose lengths overflow when summed do not fit the output: it goes
// back as one stream, where it used to panic the adopting hub.
func TestRestoreOutputOverflowingRuns(t *testing.T) {
	for _, runs := range [][]int{
		{1, math.MaxInt, math.MaxInt, 3},
		{math.MaxInt, math.MaxInt, 4},
		{math.MinInt, 2},
		{-1, math.MinInt + 1, math.MinInt + 1, -3},
	} {
		ho := handover{Unread: "ab", UnreadRuns: runs}
		var b outBuf
		assert.NotPanics(t, func() { ho.restoreOutput(&b) }, "%v", runs)
		assert.Equal(t, 2, b.total[stdoutIx]+b.total[stderrIx], "%v", runs)
	}
}

// A record's socket outside the hub's worker folder is neither dialled
// nor removed: the record becomes a note, the file stays.
func TestReclaimLiveKeepsForeignSocket(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	outside := filepath.Join(filepath.Dir(p.State), "precious")
	require.NoError(t, os.WriteFile(outside, []byte("x"), 0o600))
	ln, err := net.Listen("unix", filepath.Join(filepath.Dir(p.State), "agent.sock"))
	require.NoError(t, err)
	defer ln.Close()
	for name, sock := range map[string]string{
		"a": outside,
		"b": ln.Addr().String(),
		"c": filepath.Join(p.WorkerDir(), "..", "..", "precious"),
		"d": "precious",
	} {
		for _, private := range []bool{false, true} {
			name := name
			if private {
				name += "-run"
			}
			b, err := json.Marshal(liveRecord{Name: name, Host: "local", Pid: os.Getpid(), Sock: sock, Private: private})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), name+".json"), b, 0o600))
		}
	}
	t.Chdir(filepath.Dir(p.State))
	h := testHub(t, p)
	_, err = os.Stat(outside)
	assert.NoError(t, err, "a file named by a record's socket")
	_, err = os.Stat(ln.Addr().String())
	assert.NoError(t, err, "another program's socket named by a record")
	for _, name := range []string{"a", "b", "c", "d"} {
		assert.Contains(t, h.peekDeathNote(name), "lost with the hub", name)
	}
	ents, _ := os.ReadDir(p.LiveDir())
	assert.Empty(t, ents)
}

// A record that is not a file (a FIFO would block its read for ever, a
// link to /dev/zero fill the memory) or is too big becomes a note that
// says it was unreadable, at once.
func TestReclaimLiveOddFiles(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	require.NoError(t, syscall.Mkfifo(filepath.Join(p.LiveDir(), "fifo.json"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(p.LiveDir(), "zero.json")))
	big, err := os.Create(filepath.Join(p.LiveDir(), "big.json"))
	require.NoError(t, err)
	require.NoError(t, big.Truncate(maxLiveRecord+1))
	big.Close()
	var h *Hub
	testbound.Within(t, 10*time.Second, "the hub's start, which reads a record that never ends,", func() { h = testHub(t, p) })
	for _, name := range []string{"fifo", "zero", "big"} {
		assert.Contains(t, h.peekDeathNote(name), "its live record was unreadable", name)
	}
	ents, _ := os.ReadDir(p.LiveDir())
	assert.Empty(t, ents)
}

// A record whose pid is not its worker's is not adopted: killing the
// session would signal that pid's process group.
func TestAdoptRefusesAnotherPid(t *testing.T) {
	p, victim, exited := adoptSetup(t)

	// A worker that answers adopt as this process would: it is not the victim.
	sock := fakeAdoptee(t, p, &proto.Ready{Proto: proto.Version, Pid: os.Getpid(), Python: "3.12.1", Adopted: true})
	done := exec.Command("true")
	require.NoError(t, done.Run())
	b, err := json.Marshal(liveRecord{Name: "x", Host: "local", Pid: victim.Process.Pid, Python: "3.12.1", Cells: 1,
		HubPid: done.Process.Pid, Sock: sock})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), "x.json"), b, 0o600))

	h := testHub(t, p)
	assert.Contains(t, h.peekDeathNote("x"), "lost with the hub")
	h.Kill("x")
	select {
	case <-exited:
		t.Fatal("the pid the record named was killed")
	case <-time.After(300 * time.Millisecond):
	}
	_, start, _ := procstat.Stat(victim.Process.Pid)
	assert.True(t, procstat.Running(victim.Process.Pid, start))
}

// adoptSetup makes the hub's live and worker folders, and starts a sleep
// in a process group of its own that stands for a worker (or for another
// process a forged record names); exited is closed when it ends, which is
// at the test's end at the latest.
func adoptSetup(t *testing.T) (p config.Paths, sleeper *exec.Cmd, exited chan struct{}) {
	p = testPaths(t)
	for _, d := range []string{p.LiveDir(), p.WorkerDir()} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	sleeper = exec.Command("sleep", "60")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, sleeper.Start())
	exited = make(chan struct{})
	go func() { sleeper.Wait(); close(exited) }()
	t.Cleanup(func() { sleeper.Process.Kill(); <-exited })
	return p, sleeper, exited
}

// fakeAdoptee listens on a worker socket in p's worker folder and answers
// every adopt with ready, then reads until the hub's first frame.
func fakeAdoptee(t *testing.T, p config.Paths, ready *proto.Ready) string {
	sock := filepath.Join(p.WorkerDir(), "0123456789abcdef.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line := make([]byte, 1)
				for line[0] != '\n' {
					if _, err := c.Read(line); err != nil {
						return
					}
				}
				proto.NewWriter(c).Write(ready)
				c.Read(make([]byte, 4096)) // until the hub's first frame: exit, at a kill
			}()
		}
	}()
	return sock
}

// A record's cell count is believed up to maxCells: a forged count would
// number the next cells past what an int holds. (Past the worker's cell,
// it may count many cells that the worker never ran: queued and taken
// out, or restored from a swap into a new worker.)
func TestAdoptBoundsTheCellCount(t *testing.T) {
	p, worker, _ := adoptSetup(t)
	sock := fakeAdoptee(t, p, &proto.Ready{Proto: proto.Version, Pid: worker.Process.Pid, Python: "3.12.1", Adopted: true, Cell: 3})
	done := exec.Command("true")
	require.NoError(t, done.Run())
	b, err := json.Marshal(liveRecord{Name: "x", Host: "local", Pid: worker.Process.Pid, Python: "3.12.1", Cells: math.MaxInt,
		HubPid: done.Process.Pid, Sock: sock})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), "x.json"), b, 0o600))

	h := testHub(t, p)
	s, err := h.lookup("x", wire.AdviceFor(""))
	require.NoError(t, err)
	s.mu.Lock()
	cells := s.cells
	s.mu.Unlock()
	assert.Equal(t, maxCells, cells)
	h.Kill("x")
}

// A hand-over's cells in any order leave at most maxGone reasons: past
// the bound an older cell's goes, or the one at hand when it is the
// oldest.
func TestTakeQueueOverKeepsGoneBounded(t *testing.T) {
	n := maxQueue + maxKept + 2*maxGone
	var ho handover
	for c := n; c > 0; c-- {
		ho.Queue = append(ho.Queue, queuedCode{Cell: n + c, Code: "1"})
		ho.Kept = append(ho.Kept, &wire.Result{Cell: c})
	}
	s := newSession(&Hub{}, "x")
	s.takeQueueOver(&ho, 0)
	assert.Len(t, s.queue, maxQueue)
	assert.Len(t, s.kept, maxKept)
	assert.Equal(t, maxGone, len(s.gone))
	_, ok := s.gone[2*n-maxQueue]
	assert.True(t, ok, "the newest cell's reason is kept")
}

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fn()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// A record of a few megabytes that would decode into gigabytes (each
// "{}," a result, each "0," an int) is unreadable, and is not decoded.
func TestReclaimLiveManyValues(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	for name, b := range map[string]string{
		"objects": `{"name":"objects","handover":{"kept":[` + strings.Repeat(`{},`, 3<<20) + `{}]}}`,
		"values":  `{"name":"values","handover":{"unread_runs":[` + strings.Repeat(`0,`, 5<<20) + `0]}}`,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), name+".json"), []byte(b), 0o600))
	}
	var h *Hub
	n := allocated(func() { h = testHub(t, p) })
	assert.Less(t, n, uint64(100<<20), "bytes allocated to read 20 MB of records")
	for _, name := range []string{"objects", "values"} {
		assert.Contains(t, h.peekDeathNote(name), "its live record was unreadable", name)
	}
}

// A worker's socket, in this hub's worker folder or in another runtime
// folder's (a hub that ran without XDG_RUNTIME_DIR), is one; nothing
// else a record may name is.
func TestIsWorkerSocket(t *testing.T) {
	p := testPaths(t)
	assert.Equal(t, workerDirName, filepath.Base(p.WorkerDir()))
	other := filepath.Join(t.TempDir(), "replhub", workerDirName)
	require.NoError(t, os.MkdirAll(other, 0o700))
	require.NoError(t, os.MkdirAll(p.WorkerDir(), 0o700))
	h := &Hub{paths: p}
	listen := func(path string) string {
		ln, err := net.Listen("unix", path)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		return path
	}
	mine := listen(h.workerSocket())
	assert.True(t, isWorkerSocket(mine))
	assert.True(t, isWorkerSocket(listen(filepath.Join(other, "0123456789abcdef.sock"))), "another runtime folder's")
	file := filepath.Join(other, "fedcba9876543210.sock")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, sock := range []string{
		file, // not a socket
		listen(filepath.Join(t.TempDir(), "0123456789abcdef.sock")), // not in a worker folder
		listen(filepath.Join(other, "agent.sock")),
		listen(filepath.Join(other, "0123456789ABCDEF.sock")),
		filepath.Join(other, "0000000000000000.sock"),                      // not there
		p.WorkerDir() + "/../" + workerDirName + "/" + filepath.Base(mine), // not clean
		filepath.Base(mine),
		"",
	} {
		assert.False(t, isWorkerSocket(sock), sock)
	}
}

// A record a hub was writing when it died leaves a temporary file in the
// live folder: the next hub removes it once it is a minute old, and leaves
// a fresh one, which a hub handing over may be writing now.
func TestReclaimLiveRemovesOldTempFiles(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	old := filepath.Join(p.LiveDir(), ".tmp-123")
	fresh := filepath.Join(p.LiveDir(), ".tmp-456")
	for _, f := range []string{old, fresh} {
		require.NoError(t, os.WriteFile(f, []byte(`{"name":"x"`), 0o600))
	}
	an := time.Now().Add(-2 * time.Minute)
	require.NoError(t, os.Chtimes(old, an, an))
	testHub(t, p)
	assert.NoFileExists(t, old)
	assert.FileExists(t, fresh)
}
