package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// sessionList runs `replhub sessions --json`.
func sessionList(t *testing.T, e *hubtest.Env) wire.SessionList {
	t.Helper()
	r := e.Run("sessions", "--json")
	require.Equal(t, 0, r.Code, "%s", r)
	var l wire.SessionList
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &l), "%s", r)
	return l
}

// workerPid is the pid of session name's worker.
func workerPid(t *testing.T, e *hubtest.Env, name string) int {
	t.Helper()
	return sessionInfo(t, e, name).Pid
}

// fdsOf lists pid's open fds: fd → what it points at, and whether it is
// close-on-exec.
func fdsOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	fds := map[int]string{}
	for _, ent := range ents {
		fd, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue // closed since the listing
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				if flags&syscall.O_CLOEXEC != 0 {
					target += " (cloexec)"
				}
			}
		}
		fds[fd] = target
	}
	return fds
}

// TestInheritedFdsReachNoWorker: a caller that runs the client with a pipe's
// write end open as an inheritable fd 3 (`replhub exec x 1 3>pipe`) does not
// hand it to the hub the client starts, nor to the hub's workers, so the
// pipe's reader sees EOF once the caller closes its end.
func TestInheritedFdsReachNoWorker(t *testing.T) {
	newer, _ := hubtest.PickPythons(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	// Stat, not Fd: Fd would make the read end blocking and its deadline moot.
	fi, err := pr.Stat()
	require.NoError(t, err)
	pipeName := fmt.Sprintf("pipe:[%d]", fi.Sys().(*syscall.Stat_t).Ino)

	// ExtraFiles passes the write end as fd 3 without close-on-exec; the
	// client starts a new hub.
	cmd := exec.Command(e.Bin, "exec", "leak", "import os; os.getpid()")
	cmd.Env, cmd.Dir = e.Vars, e.Cwd
	cmd.ExtraFiles = []*os.File{pw}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Run(), "%s", out.String())
	require.NoError(t, pw.Close())
	hubPid := e.HubPid()
	require.NotZero(t, hubPid)
	pid := workerPid(t, e, "leak")
	assert.Contains(t, out.String(), fmt.Sprintf("Out[1]: %d", pid))

	for what, p := range map[string]int{"hub": hubPid, "worker": pid} {
		for fd, target := range fdsOf(t, p) {
			assert.NotEqual(t, pipeName, strings.TrimSuffix(target, " (cloexec)"), "the %s holds the caller's pipe as fd %d", what, fd)
			if what == "worker" && fd > 2 {
				// Its pipes are 0, 1 and 2; Python opens its own fds
				// non-inheritable (PEP 446), so any other fd is one it
				// inherited.
				assert.True(t, strings.HasSuffix(target, " (cloexec)"), "the worker has fd %d → %s, not its own", fd, target)
			}
		}
	}

	// Nobody else holds the write end: the reader sees EOF at once.
	require.NoError(t, pr.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = pr.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the pipe's reader sees EOF (a deadline error means someone holds the write end)")
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded))

	// The hub and the session live on.
	assert.True(t, hubtest.Alive(hubPid))
	assert.Equal(t, "Out[2]: 2\n", ok(t, e.Run("exec", "leak", "1 + 1")))
	assert.Equal(t, hubPid, e.HubPid())
}

// TestSessionLostWithTheHub: a hub killed with SIGKILL takes its sessions
// with it. The next hub says so, once, where the name is next used, rather
// than quietly starting an empty session under it.
func TestSessionLostWithTheHub(t *testing.T) {
	newer, _ := hubtest.PickPythons(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	ok(t, e.Run("exec", "lost", "x = 42"))
	ok(t, e.Run("exec", "lost", "y = x + 1"))
	// A session killed on request leaves neither a record nor a note.
	ok(t, e.Run("exec", "gone", "1"))
	ok(t, e.Run("kill", "gone"))
	live := filepath.Join(e.Paths.LiveDir(), "lost.json")
	ents, err := os.ReadDir(e.Paths.LiveDir())
	require.NoError(t, err)
	require.Len(t, ents, 1, "one live record, the running session's")
	assert.Equal(t, "lost.json", ents[0].Name())
	var rec struct {
		Cells  int    `json:"cells"`
		Host   string `json:"host"`
		HubPid int    `json:"hub_pid"`
	}
	b, err := os.ReadFile(live)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec), "%s", b)
	hubPid := e.HubPid()
	assert.Equal(t, 2, rec.Cells)
	assert.Equal(t, "local", rec.Host)
	assert.Equal(t, hubPid, rec.HubPid)

	worker := workerPid(t, e, "lost")
	require.NoError(t, syscall.Kill(hubPid, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(hubPid, 10*time.Second), "the hub is gone")
	// The worker outlives its hub, to be adopted by the next; here it is
	// lost too (as with a power cut, or the OOM killer taking both).
	require.True(t, hubtest.Alive(worker), "a local worker outlives its hub")
	require.NoError(t, syscall.Kill(worker, syscall.SIGKILL))
	require.True(t, hubtest.WaitGone(worker, 10*time.Second), "the worker is gone")

	// The next hub (this command starts it) lists the session dead.
	l := sessionList(t, e)
	require.NotEqual(t, hubPid, l.Hub.Pid)
	assert.Empty(t, l.Sessions)
	require.Len(t, l.Dead, 1, "%+v", l.Dead)
	assert.Equal(t, "lost", l.Dead[0].Name)
	lostNote := `session 'lost' died at \d\d:\d\d:\d\d \(\S+ ago\): lost with the hub: the hub \(pid ` +
		strconv.Itoa(hubPid) + `\) that ran this local session stopped without ending it, at that time or later; its state is gone, after 2 cells; transcript ` +
		regexp.QuoteMeta(e.Paths.Transcript("lost"))
	assert.Regexp(t, "^"+lostNote+"$", l.Dead[0].Note)
	assert.Regexp(t, `(?m)^lost  dead: `+lostNote+`$`, ok(t, e.Run("sessions")))
	_, err = os.Stat(live)
	assert.True(t, os.IsNotExist(err), "the record became the note")

	// Another session's reply names it.
	res, _ := jsonResult(t, e, "exec", "--json", "other", "1")
	assert.Equal(t, "other sessions: lost died: `replhub sessions` shows how", res.Others)

	// The next exec under the name opens with the note, in a new session
	// that knows nothing of x.
	r := e.Run("exec", "lost", "x")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Regexp(t, `^\[`+lostNote+`\]\n\[created session 'lost' `, r.Stdout)
	assert.Contains(t, r.Stdout, "NameError: name 'x' is not defined")
	// Once.
	r = e.Run("exec", "lost", "x = 1")
	assert.Equal(t, "", r.Stdout, "%s", r)
	assert.Empty(t, sessionList(t, e).Dead)

	// The new session has a record of its own, gone when it is killed.
	b, err = os.ReadFile(live)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, 2, rec.Cells)
	ok(t, e.Run("kill", "lost"))
	_, err = os.Stat(live)
	assert.True(t, os.IsNotExist(err), "a kill removes the record")

	// A graceful stop ends the rest with a note that says so (with
	// swapping off: else it swaps them, see swap_test.go), and leaves no
	// record behind.
	e.WriteConfig(`{"swap_after_hours": 0}`)
	e.StopHub()
	ents, err = os.ReadDir(e.Paths.LiveDir())
	require.NoError(t, err)
	assert.Empty(t, ents)
	r = e.Run("exec", "other", "2")
	assert.Contains(t, r.Stdout, "the hub stopped", "%s", r)
}
