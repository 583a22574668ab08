package hub

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/payload"
)

func testPaths(t *testing.T) config.Paths {
	dir := t.TempDir()
	return config.Paths{Runtime: filepath.Join(dir, "run"), State: filepath.Join(dir, "state"), Config: filepath.Join(dir, "config")}
}

func testHub(t *testing.T, p config.Paths) *Hub {
	t.Helper()
	h, err := New(Options{Paths: p})
	require.NoError(t, err)
	// New asks for cloudpickle's folder in the background (once per
	// process), and keeps the answer in p's state folder: the folder is
	// removed only once that is done.
	t.Cleanup(func() { payload.CloudpickleDir() })
	return h
}

// startedSession is a session as ensure has it once its worker is ready.
func startedSession(h *Hub, name string, pid int) *Session {
	s := newSession(h, name)
	s.state = stateIdle
	s.info.Host, s.info.Pid, s.info.Python = "local", pid, "3.12.1"
	return s
}

func readRecord(t *testing.T, path string) liveRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var r liveRecord
	require.NoError(t, json.Unmarshal(b, &r), "%s", b)
	return r
}

func TestLiveRecordLifecycle(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	fi, err := os.Stat(p.LiveDir())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	s := startedSession(h, "x", 4242)
	h.recordLive(s)
	path := h.livePath("x")
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	r := readRecord(t, path)
	assert.True(t, r.Started.Equal(s.started), "started %v, want %v", r.Started, s.started)
	assert.WithinDuration(t, time.Now(), r.Seen, time.Minute)
	r.Started, r.Seen = time.Time{}, time.Time{}
	assert.Equal(t, liveRecord{Name: "x", Host: "local", Pid: 4242, Python: "3.12.1", HubPid: os.Getpid(), HubStart: selfStart(), HubSock: p.Socket()}, r)
	assert.NotEmpty(t, r.HubStart, "this machine has /proc")

	// Every cell brings the count up to date; a shorter record leaves no
	// tail of the longer one behind.
	s.mu.Lock()
	s.cells, s.info.Python = 12, "3.12.10"
	h.touchLiveLocked(s)
	s.cells, s.info.Python = 13, "3.6"
	h.touchLiveLocked(s)
	s.mu.Unlock()
	r = readRecord(t, path)
	assert.Equal(t, 13, r.Cells)
	assert.Equal(t, "3.6", r.Python)

	// A successor under the same name owns the record: its predecessor's
	// late waiter leaves it be.
	next := startedSession(h, "x", 4343)
	h.recordLive(next)
	s.mu.Lock()
	h.touchLiveLocked(s)
	h.dropLive(s)
	s.mu.Unlock()
	assert.Equal(t, 4343, readRecord(t, path).Pid)
	next.mu.Lock()
	h.dropLive(next)
	next.mu.Unlock()
	_, err = os.Stat(path)
	assert.True(t, os.IsNotExist(err), "the record goes with its session")

	// A session whose waiter ended it before ensure wrote its record gets
	// none.
	gone := startedSession(h, "gone", 4444)
	gone.state = stateDead
	h.recordLive(gone)
	_, err = os.Stat(h.livePath("gone"))
	assert.True(t, os.IsNotExist(err))

	ents, _ := os.ReadDir(p.LiveDir())
	assert.Empty(t, ents, "no temporary files left")
}

func TestReclaimLive(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	require.NoError(t, os.MkdirAll(p.DeadDir(), 0o700))

	// A process that has ended, for a dead hub's pid.
	done := exec.Command("true")
	require.NoError(t, done.Run())
	deadPid := done.Process.Pid
	// A process that runs, for a live hub.
	sleep := exec.Command("sleep", "60")
	require.NoError(t, sleep.Start())
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	_, sleepStart, ok := procstat.Stat(sleep.Process.Pid)
	require.True(t, ok)

	seen := time.Now().Add(-3 * time.Minute).Truncate(time.Second)
	write := func(name string, r liveRecord) {
		r.Name = name
		b, err := json.Marshal(r)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), name+".json"), b, 0o600))
	}
	write("lost", liveRecord{Host: "lab-7", Root: true, Pid: 77, Python: "3.9.18", Cells: 3, Seen: seen, HubPid: deadPid, HubStart: "123"})
	write("mine", liveRecord{Host: "local", Cells: 1, Seen: seen, HubPid: os.Getpid(), HubStart: selfStart()})
	write("reused", liveRecord{Host: "local", Cells: 2, Seen: seen, HubPid: sleep.Process.Pid, HubStart: "1"})
	write("running", liveRecord{Host: "local", Cells: 4, Seen: seen, HubPid: sleep.Process.Pid, HubStart: sleepStart})
	write("noted", liveRecord{Host: "local", Cells: 5, Seen: seen, HubPid: deadPid})
	require.NoError(t, os.WriteFile(filepath.Join(p.DeadDir(), "noted.json"), []byte(`{"name":"noted","how":"killed by signal SIGSEGV","cells":5}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), "torn.json"), []byte(`{"name":"to`), 0o600))

	h := testHub(t, p)

	lost := h.readDeathNote("lost")
	require.NotNil(t, lost)
	assert.Equal(t, deathNote{Name: "lost", When: seen, Cells: 3, Transcript: p.Transcript("lost"), Host: "lab-7", Root: true,
		How: "lost with the hub: the hub (pid " + itoa(deadPid) + ") that ran this root session on lab-7 stopped without ending it, at that time or later; its state is gone"},
		deathNote{Name: lost.Name, When: lost.When.Local(), Cells: lost.Cells, Transcript: lost.Transcript, Host: lost.Host, Root: lost.Root, How: lost.How})
	assert.Contains(t, lost.text(), "after 3 cells")
	assert.Contains(t, h.peekDeathNote("mine"), "the hub (pid "+itoa(os.Getpid())+") that ran this local session", "a record of this very process is a predecessor's")
	assert.Contains(t, h.peekDeathNote("reused"), "lost with the hub", "a live process with another start time is not the hub")
	assert.Contains(t, h.peekDeathNote("reused"), "after 2 cells")
	assert.Nil(t, h.readDeathNote("running"), "a running hub's session is not lost")
	assert.Equal(t, "killed by signal SIGSEGV", h.readDeathNote("noted").How, "a note written before the crash stays")
	assert.Contains(t, h.peekDeathNote("torn"), "its live record was unreadable")

	var left []string
	ents, _ := os.ReadDir(p.LiveDir())
	for _, e := range ents {
		left = append(left, e.Name())
	}
	assert.Equal(t, []string{"running.json"}, left)

	var dead []string
	for _, d := range h.List().Dead {
		dead = append(dead, d.Name)
	}
	assert.Equal(t, []string{"lost", "mine", "noted", "reused", "torn"}, dead)
}

func itoa(n int) string { return strconv.Itoa(n) }

// A record whose hub runs but shares this hub's socket is that of a hub of
// the same runtime folder that is ending (it let go of the folder's lock,
// which this hub takes before it starts): its sessions are this hub's,
// once it has ended, not a live hub's to leave alone. A record of a hub
// that runs elsewhere (another socket) is left as it is.
func TestReclaimWaitsForAnEndingHub(t *testing.T) {
	p := testPaths(t)
	require.NoError(t, os.MkdirAll(p.LiveDir(), 0o700))
	ending := exec.Command("sleep", "0.3")
	require.NoError(t, ending.Start())
	go ending.Wait()
	_, endingStart, ok := procstat.Stat(ending.Process.Pid)
	require.True(t, ok)
	other := exec.Command("sleep", "60")
	require.NoError(t, other.Start())
	defer func() { other.Process.Kill(); other.Wait() }()
	_, otherStart, ok := procstat.Stat(other.Process.Pid)
	require.True(t, ok)
	write := func(name string, r liveRecord) {
		r.Name = name
		b, err := json.Marshal(r)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(p.LiveDir(), name+".json"), b, 0o600))
	}
	seen := time.Now().Add(-time.Minute)
	write("ours", liveRecord{Host: "lab-7", Cells: 2, Seen: seen, HubPid: ending.Process.Pid, HubStart: endingStart, HubSock: p.Socket()})
	write("theirs", liveRecord{Host: "lab-7", Cells: 3, Seen: seen, HubPid: other.Process.Pid, HubStart: otherStart, HubSock: p.Socket() + "-elsewhere"})

	h := testHub(t, p)
	assert.Contains(t, h.peekDeathNote("ours"), "lost with the hub", "taken up once its hub ended (here: a session on a host, which no hub adopts)")
	assert.Nil(t, h.readDeathNote("theirs"), "a running hub's session is not lost")
	_, err := os.Stat(filepath.Join(p.LiveDir(), "theirs.json"))
	assert.NoError(t, err)
}
