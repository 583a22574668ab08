package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// sshWorld is a hub whose $HOME holds an ssh config, a key and known_hosts
// for loopback sshd's started by the test.
type sshWorld struct {
	*hubtest.Env
	home    string
	user    string
	key     sshtest.Key
	servers map[string]*sshtest.Server
}

// newSSHWorld starts one sshd per name, each trusting the world's key, and
// writes ~/.ssh/config with a Host entry per name (HostName, Port, User,
// IdentityFile) and known_hosts with their keys.
func newSSHWorld(t *testing.T, names []string, o sshtest.Options) *sshWorld {
	t.Helper()
	sshtest.Need(t)
	home, err := os.MkdirTemp("", "replhub-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	u, err := user.Current()
	require.NoError(t, err)
	w := &sshWorld{home: home, user: u.Username, servers: map[string]*sshtest.Server{}}
	w.key = sshtest.NewKey(t, filepath.Join(home, ".ssh", "id_ed25519"), "")
	o.Authorized = append(o.Authorized, w.key.Public)
	var cfg, known []string
	for _, n := range names {
		s := sshtest.Start(t, o)
		w.servers[n] = s
		cfg = append(cfg, fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile ~/.ssh/id_ed25519\n", n, s.Port, w.user))
		known = append(known, s.KnownHostsLine())
	}
	w.writeConfig(t, strings.Join(cfg, "\n"))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o600))
	w.Env = hubtest.Start(t)
	w.Setenv("HOME", home)
	w.Setenv("SSH_AUTH_SOCK", "")
	newer, _ := hubtest.PickPythons(t)
	w.Setenv("REPLHUB_PYTHON", newer)
	return w
}

func (w *sshWorld) writeConfig(t *testing.T, cfg string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(w.home, ".ssh", "config"), []byte(cfg), 0o600))
}

func (w *sshWorld) appendConfig(t *testing.T, cfg string) {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(w.home, ".ssh", "config"))
	w.writeConfig(t, cfg+"\n"+string(b))
}

// remotePids finds the workers a server runs (python processes below it).
func remotePids(s *sshtest.Server) []int {
	var out []int
	for _, pid := range s.Children() {
		if strings.Contains(sshtest.Cmdline(pid), "-c import os,zlib") {
			out = append(out, pid)
		}
	}
	return out
}

func TestRemotePlainHost(t *testing.T) {
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	port := w.servers["lab"].Port
	r := w.Run("exec", "rem", "import os; x = 41; (os.getppid() > 1, x + 1)", "--host", fmt.Sprintf("%s@127.0.0.1:%d", w.user, port))
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Regexp(t, `^\[created session 'rem' on 127\.0\.0\.1 \(python 3\.\d+\.\d+, cwd \S+\)\]\nOut\[1\]: \(True, 42\)\n$`, r.Stdout)
	// Without --host the name reaches the live remote session.
	r = w.Run("exec", "rem", "x")
	assert.Equal(t, "Out[2]: 41\n", r.Stdout, "%s", r)
	// With another host it is refused.
	r = w.Run("exec", "rem", "x", "--host", "elsewhere")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'rem' runs on")
	r = w.Run("sessions")
	assert.Regexp(t, `rem  on 127\.0\.0\.1  pid \d+  python 3\.`, r.Stdout)
	// Transcripts stay on this machine.
	b, err := os.ReadFile(w.Paths.Transcript("rem"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "x + 1")
	require.Equal(t, 0, w.Run("kill", "rem").Code)
	waitNoWorkers(t, w.servers["lab"])
}

func waitNoWorkers(t *testing.T, s *sshtest.Server) {
	t.Helper()
	for i := 0; i < 250; i++ {
		if len(remotePids(s)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("workers still running on the far side: %v", remotePids(s))
}

func TestRemoteAliasSemanticsAndSharedConnection(t *testing.T) {
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	s := w.servers["lab"]
	newer, older := hubtest.PickPythons(t)
	for i, name := range []string{"a1", "a2"} {
		r := w.Run("exec", name, "import time; time.sleep(0.2); 1", "--host", "lab", "--python", []string{newer, older}[i])
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[created session '"+name+"' on lab (python 3.")
	}
	for i := 0; i < 3; i++ {
		for _, name := range []string{"a1", "a2"} {
			require.Equal(t, 0, w.Run("exec", name, "1").Code)
		}
	}
	assert.Equal(t, 1, s.Connections(), "two sessions and several cells share one connection")

	// Interrupt of a remote sleep.
	r := w.Run("exec", "a1", "time.sleep(60)", "-t", "0.5")
	require.Equal(t, 3, r.Code, "%s", r)
	require.Equal(t, 0, w.Run("interrupt", "a1").Code)
	r = w.Run("wait", "a1", "-t", "10")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)

	// Tracebacks show the cell's lines, not the worker's, remotely too.
	r = w.Run("exec", "a2", "def f():\n    raise ValueError('far')\nf()")
	assert.Contains(t, r.Stdout, `File "<cell-5>", line 2, in f`)
	assert.NotContains(t, r.Stdout, "replhub_worker")

	r = w.Run("sessions", "--json")
	var l wire.SessionList
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &l), "%s", r)
	require.Len(t, l.Sessions, 2)
	assert.Equal(t, "lab", l.Sessions[0].Host)
	assert.Equal(t, "lab", l.Sessions[0].Route)
	assert.True(t, strings.HasPrefix(l.Sessions[1].Python, "3.6") || strings.HasPrefix(l.Sessions[1].Python, "3.7") || strings.HasPrefix(l.Sessions[1].Python, "3.8"),
		"an old Python works remotely: %s", l.Sessions[1].Python)
}
