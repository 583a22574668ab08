package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// lingerWorld is an ssh world whose host "lab" is reached through a relay
// the test owns: it drops and restores the path to the loopback sshd.
func lingerWorld(t *testing.T) (*sshWorld, *sshtest.Relay) {
	t.Helper()
	return lingerWorldWith(t)
}

// lingerWorldWith is lingerWorld with extra sshd_config lines.
func lingerWorldWith(t *testing.T, extra ...string) (*sshWorld, *sshtest.Relay) {
	t.Helper()
	return lingerWorldAlive(t, 1, extra...)
}

// lingerWorldAlive is lingerWorldWith with ServerAliveInterval alive (s).
func lingerWorldAlive(t *testing.T, alive int, extra ...string) (*sshWorld, *sshtest.Relay) {
	t.Helper()
	w := newSSHWorld(t, []string{"direct"}, sshtest.Options{Extra: extra})
	srv := w.servers["direct"]
	relay := sshtest.NewRelay(t, srv.Addr())
	w.appendConfig(t, fmt.Sprintf("Host lab\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile ~/.ssh/id_ed25519\n  ServerAliveInterval %d\n",
		relay.Port, w.user, alive))
	known := filepath.Join(w.home, ".ssh", "known_hosts")
	b, err := os.ReadFile(known)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(known, append(b, []byte(srv.KnownHostsLineAt(relay.Port)+"\n")...), 0o600))
	return w, relay
}

// endWorkerAtCleanup kills, by pid, a remote worker that may outlive the
// test's sshd (a lingering worker is nobody's child there).
func endWorkerAtCleanup(t *testing.T, e *hubtest.Env, name string) int {
	t.Helper()
	pid := workerPid(t, e, name)
	require.NotZero(t, pid)
	t.Cleanup(func() {
		if hubtest.Alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// lingerSockets are the sockets of lingering workers of this uid.
func lingerSockets() []string {
	socks, _ := filepath.Glob(fmt.Sprintf("/tmp/replhub-%d/replhub-*.sock", os.Getuid()))
	return socks
}

// newSocketsOf are the lingering workers' sockets not in before that
// process pid listens on, or that nobody listens on, now or 200 ms later
// (left behind): not those of other workers of this uid, which tests
// elsewhere (and other runs) start, and whose sockets go with a killed
// worker's reaper, a moment after it.
func newSocketsOf(t *testing.T, pid int, before []string) []string {
	t.Helper()
	var fresh []string
	for _, s := range lingerSockets() { // before the table: a socket listed is bound
		if !contains(before, s) {
			fresh = append(fresh, s)
		}
	}
	var out, unheard []string
	listening, held := unixListeners(t), socketsHeldBy(pid)
	for _, s := range fresh {
		if inos, ok := listening[s]; !ok {
			unheard = append(unheard, s)
		} else if slices.ContainsFunc(inos, func(ino string) bool { return held[ino] }) {
			out = append(out, s)
		}
	}
	if len(unheard) > 0 {
		time.Sleep(200 * time.Millisecond)
		listening = unixListeners(t)
		for _, s := range unheard {
			if _, err := os.Stat(s); err == nil && len(listening[s]) == 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

// unixListeners are the unix sockets bound to a path, by path, with
// their inodes (/proc/net/unix): a listener's, and those of the
// connections it accepted or holds in its queue, which show its path too
// (a cell link's, which comes beside the first cell). The table keeps the path a socket was
// bound at: a worker binds its socket at PATH~ and renames it into place
// once it listens, so PATH~ stands for PATH too.
func unixListeners(t *testing.T) map[string][]string {
	t.Helper()
	table, err := os.ReadFile("/proc/net/unix")
	require.NoError(t, err)
	listening := map[string][]string{}
	for _, l := range strings.Split(string(table), "\n")[1:] {
		if f := strings.Fields(l); len(f) >= 8 {
			listening[f[7]] = append(listening[f[7]], f[6])
			if p, ok := strings.CutSuffix(f[7], "~"); ok {
				listening[p] = append(listening[p], f[6])
			}
		}
	}
	return listening
}

// socketsHeldBy are the inodes of the sockets among pid's fds.
func socketsHeldBy(pid int) map[string]bool {
	held := map[string]bool{}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
			held[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	return held
}

func TestRemoteSessionSurvivesADroppedLink(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	before := lingerSockets()
	ok(t, w.Run("exec", "r", "import os, time; x = 42", "--host", "lab"))
	pid := endWorkerAtCleanup(t, w.Env, "r")
	mine := newSocketsOf(t, pid, before)
	require.Len(t, mine, 1, "the worker's socket")
	dir := fmt.Sprintf("/tmp/replhub-%d", os.Getuid())
	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the socket's folder is private")

	// A cell runs across the drop: its output and result arrive after.
	r := w.Run("exec", "r", "print('before', flush=True); time.sleep(4); print('after'); x + 1", "-t", "1")
	assert.Equal(t, 3, r.Code, "still running: %s", r)
	relay.Drop()
	time.Sleep(1500 * time.Millisecond)
	assert.True(t, hubtest.Alive(pid), "the worker outlives its link")
	relay.Restore()
	r = w.Run("wait", "r", "-t", "20")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "after")
	assert.Contains(t, r.Stdout, "Out[2]: 43")
	assert.Regexp(t, `\[the link to lab dropped at \d\d:\d\d:\d\d and came back at \d\d:\d\d:\d\d; `, r.Stdout)

	// State intact, the same worker, and a note with both times.
	r = w.Run("exec", "r", "(x, os.getpid())")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, fmt.Sprintf("Out[3]: (42, %d)", pid))

	// An exec while the link is down waits for it. (An exec sent in the
	// instant before the hub sees the drop is told it never reached the
	// session: so the hub is let see it first.)
	relay.Drop()
	waitFor(t, func() bool { return sessionInfo(t, w.Env, "r").LinkDownS != 0 }, func() string { return "the hub never saw the link drop" })
	go func() {
		time.Sleep(2 * time.Second)
		relay.Restore()
	}()
	t0 := time.Now()
	r = w.Run("exec", "r", "x * 2")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[")
	assert.Contains(t, r.Stdout, "84")
	assert.Less(t, time.Since(t0), 10*time.Second)

	// Output written while no hub was there is not lost.
	ok(t, w.Run("exec", "r", "import threading; threading.Timer(1.0, lambda: print('written while away', flush=True)).start()"))
	relay.Drop()
	time.Sleep(2 * time.Second)
	relay.Restore()
	assert.Contains(t, ok(t, w.Run("exec", "r", "'back'")), "written while away")

	// A link that dies silently (bytes held, nothing closed): keepalives
	// tell the hub, which takes the worker over on a new connection while
	// the old sshd still holds it.
	relay.Freeze()
	time.Sleep(5 * time.Second)
	r = w.Run("exec", "r", "x + 100")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "142")

	ok(t, w.Run("kill", "r"))
	assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "killed over its socket")
	waitFor(t, func() bool {
		_, err := os.Stat(mine[0])
		return os.IsNotExist(err)
	}, func() string { return "its socket went with it" })
}

func TestRemoteLingerExpires(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	w.WriteConfig(`{"hosts": {"lab": {"linger": 0.05}}}`) // 3 s
	before := lingerSockets()
	ok(t, w.Run("exec", "e", "x = 1", "--host", "lab"))
	pid := endWorkerAtCleanup(t, w.Env, "e")
	mine := newSocketsOf(t, pid, before)
	require.Len(t, mine, 1, "one socket, and nothing else, in the folder")
	relay.Drop()
	require.True(t, hubtest.WaitGone(pid, 10*time.Second), "the worker ends when its linger is over")
	// The worker's reaper removes the socket once the worker has ended.
	waitFor(t, func() bool {
		_, err := os.Stat(mine[0])
		return os.IsNotExist(err)
	}, func() string { return "its socket went with it" })
	relay.Restore()
	r := w.Run("exec", "e", "x")
	assert.NotEqual(t, 0, r.Code, "%s", r)
	out := r.Stdout + r.Stderr
	assert.Contains(t, out, "the link to lab dropped at")
	assert.True(t, strings.Contains(out, "worker there was gone") || strings.Contains(out, "within the linger"), "%s", out)
}

func TestRemoteLingerOff(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	w.WriteConfig(`{"linger": 0}`)
	before := lingerSockets()
	ok(t, w.Run("exec", "o", "x = 1", "--host", "lab"))
	pid := endWorkerAtCleanup(t, w.Env, "o")
	assert.Empty(t, newSocketsOf(t, pid, before), "no socket without a linger")
	relay.Drop()
	assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "the worker ends with its link")
	r := w.Run("exec", "o", "x")
	assert.Contains(t, r.Stdout+r.Stderr, "link to lab lost")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The reattach authenticates the host as the first connection did: when
// the path comes back to a machine with another host key, the session is
// not handed to it.
func TestRemoteReattachChecksTheHostKey(t *testing.T) {
	t.Parallel()
	w, relay := lingerWorld(t)
	impostor := sshtest.Start(t, sshtest.Options{Authorized: []string{w.key.Public}})
	ok(t, w.Run("exec", "k", "x = 1", "--host", "lab"))
	endWorkerAtCleanup(t, w.Env, "k")
	relay.Drop()
	relay.Retarget(impostor.Addr())
	relay.Restore()
	r := w.Run("exec", "k", "x")
	assert.NotEqual(t, 0, r.Code, "%s", r)
	out := r.Stdout + r.Stderr
	assert.Contains(t, out, "cannot be reattached")
	assert.Contains(t, strings.ToLower(out), "host key")
	for _, pid := range impostor.Children() {
		assert.NotContains(t, sshtest.Cmdline(pid), "zlib", "nothing ran on the impostor")
	}
}
