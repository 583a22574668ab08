package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
	w := &sshWorld{servers: map[string]*sshtest.Server{}}
	w.home, w.user, w.key = sshHome(t)
	o.Authorized = append(o.Authorized, w.key.Public)
	var cfg, known []string
	for _, n := range names {
		s := sshtest.Start(t, o)
		w.servers[n] = s
		cfg = append(cfg, hostEntry(n, s.Port, w.user))
		known = append(known, s.KnownHostsLine())
	}
	w.Env = sshEnv(t, w.home, cfg, known)
	return w
}

// plainLogin is sshtest.Options whose logins get a HOME without rc files
// (and the newer Python's folder first on PATH), for a test that is not
// about the login's environment: root's ~/.bashrc here runs pyenv init,
// which costs each login its rehash and queues concurrent ones on its lock.
func plainLogin(t *testing.T) sshtest.Options {
	t.Helper()
	newer, _ := hubtest.PickPythons(t)
	return sshtest.Options{SetEnv: map[string]string{"HOME": t.TempDir(), "PATH": filepath.Dir(newer) + ":/usr/local/bin:/usr/bin:/bin"}}
}

// sshHome makes a $HOME with a key in ~/.ssh (removed at cleanup), for a
// world whose hub reaches loopback sshd's; it skips without sshd.
func sshHome(t *testing.T) (home, username string, key sshtest.Key) {
	t.Helper()
	sshtest.Need(t)
	home, err := os.MkdirTemp("", "replhub-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	u, err := user.Current()
	require.NoError(t, err)
	return home, u.Username, sshtest.NewKey(t, filepath.Join(home, ".ssh", "id_ed25519"), "")
}

// hostEntry is an ssh_config Host entry for a loopback port.
func hostEntry(alias string, port int, user string) string {
	return fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile ~/.ssh/id_ed25519\n", alias, port, user)
}

// sshEnv writes home's ~/.ssh/config and known_hosts and starts a world
// whose $HOME it is, with no agent and the newer Python.
func sshEnv(t *testing.T, home string, cfg, known []string) *hubtest.Env {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(strings.Join(cfg, "\n")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o600))
	e := hubtest.Start(t)
	e.Setenv("HOME", home)
	e.Setenv("SSH_AUTH_SOCK", "")
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	return e
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
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	port := w.servers["lab"].Port
	r := w.Run("exec", "rem", "import os; x = 41; (os.getppid() > 1, x + 1)", "--host", fmt.Sprintf("%s@127.0.0.1:%d", w.user, port))
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Regexp(t, `^\[created session 'rem' on 127\.0\.0\.1 \(python 3\.\d+\.\d+, cwd \S+\)\]\nOut\[1\]: \(True, 42\)\n$`, r.Stdout)
	// Without --host the name reaches the live remote session.
	r = w.Run("exec", "rem", "x")
	assert.Equal(t, "Out[2]: 41\n", r.Stdout, "%s", r)
	// With the same --host, and --python, it is a plain call, sent from
	// package early's init.
	w.Setenv("GODEBUG", "inittrace=1")
	r = w.Run("exec", "rem", "x + 2", "--host", fmt.Sprintf("%s@127.0.0.1:%d", w.user, port), "--python", "python3")
	assert.Equal(t, "Out[3]: 43\n", r.Stdout, "%s", r)
	assertEarly(t, r.Stderr)
	w.Setenv("GODEBUG", "")
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
	r = w.Run("kill", "rem")
	require.Equal(t, 0, r.Code, "%s", r)
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
	t.Parallel()
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

func TestRemoteJumps(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"gw1", "gw2", "target"}, sshtest.Options{})
	tp := w.servers["target"].Port
	w.appendConfig(t, fmt.Sprintf("Host viajumps\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  ProxyJump gw2,gw1\n", tp, w.user))
	cases := []struct {
		name  string
		args  []string
		route string
		via   []string
	}{
		{"j1", []string{"--host", "target", "--jump", "gw1"}, "target via gw1", []string{"gw1"}},
		{"j2", []string{"--host", "target", "--jump", "gw1,gw2"}, "target via gw1, gw2", []string{"gw1", "gw2"}},
		{"pj", []string{"--host", "viajumps"}, "viajumps via gw2, gw1", []string{"gw1", "gw2"}},
		{"off", []string{"--host", "viajumps", "--jump", "none"}, "viajumps", nil},
	}
	for _, c := range cases {
		before := map[string]int{}
		for n, s := range w.servers {
			before[n] = s.Connections()
		}
		r := w.Run(append([]string{"exec", c.name, "1 + 1"}, c.args...)...)
		require.Equal(t, 0, r.Code, "%s: %s", c.name, r)
		assert.Contains(t, r.Stdout, "on "+c.route+" (python", c.name)
		for _, j := range c.via {
			assert.Greater(t, w.servers[j].Connections(), before[j], "%s goes through %s", c.name, j)
		}
		if c.via == nil {
			assert.Equal(t, before["gw1"], w.servers["gw1"].Connections(), "no jump")
		}
	}
	r := w.Run("sessions")
	assert.Contains(t, r.Stdout, "j2  on target via gw1, gw2  pid")

	// config.json sets a jump per host pattern; a request's --jump wins and
	// "jump": [] turns it off.
	w.WriteConfig(`{"hosts": {"tar*": {"jump": ["gw2"]}}}`)
	r = w.Run("exec", "cfgjump", "1", "--host", "target")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "on target via gw2 (python")
	w.WriteConfig(`{"hosts": {"tar*": {"jump": ["gw2"]}, "target": {"jump": []}}}`)
	r = w.Run("exec", "cfgoff", "1", "--host", "target")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "on target (python")
}

func TestRemoteProxyCommand(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	relay := filepath.Join(w.home, "relay.py")
	require.NoError(t, os.WriteFile(relay, []byte(`import os, socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    while True:
        b = os.read(0, 65536)
        if not b:
            s.shutdown(socket.SHUT_WR)
            return
        s.sendall(b)
threading.Thread(target=up, daemon=True).start()
while True:
    b = s.recv(65536)
    if not b:
        break
    os.write(1, b)
`), 0o600))
	newer, _ := hubtest.PickPythons(t)
	w.appendConfig(t, fmt.Sprintf("Host proxied\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  ProxyCommand %s %s %%p\n", w.servers["lab"].Port, w.user, newer, relay))
	r := w.Run("exec", "px", "'through the proxy'", "--host", "proxied")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 'through the proxy'")
}

func TestRemoteAuth(t *testing.T) {
	t.Parallel()
	home := "" // set below, after the world exists
	_ = home
	agentKeyDir, err := os.MkdirTemp("", "agentkey-")
	require.NoError(t, err)
	defer os.RemoveAll(agentKeyDir)
	agentKey := sshtest.NewKey(t, filepath.Join(agentKeyDir, "agent_ed25519"), "")
	locked := sshtest.NewKey(t, filepath.Join(agentKeyDir, "locked_ed25519"), "secret phrase")
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{Authorized: []string{agentKey.Public, locked.Public}})
	port := w.servers["lab"].Port
	w.appendConfig(t, fmt.Sprintf(`Host viaagent
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile ~/.ssh/none_here
Host locked
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
`, port, w.user, port, w.user, locked.Path))

	// A passphrase-protected key without an agent: a clear error naming it.
	r := w.Run("exec", "lk", "1", "--host", "locked")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "key "+locked.Path+" is protected by a passphrase and no ssh-agent holds it: run ssh-add "+locked.Path)

	// Without the agent the agent-only host is refused, keys only.
	r = w.Run("exec", "ag", "1", "--host", "viaagent")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "accepted none of the keys offered")
	assert.Contains(t, r.Stderr, "never a password")

	// With an agent the test starts, it works.
	sock := filepath.Join(agentKeyDir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	require.NoError(t, agent.Start())
	defer func() { agent.Process.Kill(); agent.Wait() }()
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil }, func() string { return "no agent socket " + sock })
	add := exec.Command("ssh-add", agentKey.Path)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	out, err := add.CombinedOutput()
	require.NoError(t, err, "%s", out)
	w.Setenv("SSH_AUTH_SOCK", sock)
	r = w.Run("exec", "ag", "'agent'", "--host", "viaagent")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 'agent'")
}

func TestRemoteHostKeys(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	stranger := sshtest.Start(t, sshtest.Options{Authorized: []string{w.key.Public}})
	acceptor := sshtest.Start(t, sshtest.Options{Authorized: []string{w.key.Public}})
	w.appendConfig(t, fmt.Sprintf(`Host stranger
  HostName 127.0.0.1
  Port %d
  User %s
Host acceptor
  HostName 127.0.0.1
  Port %d
  User %s
  StrictHostKeyChecking accept-new
`, stranger.Port, w.user, acceptor.Port, w.user))
	known := filepath.Join(w.home, ".ssh", "known_hosts")

	// Unknown: refused with its fingerprint and the one command that trusts it.
	r := w.Run("exec", "st", "1", "--host", "stranger")
	require.Equal(t, 2, r.Code, "%s", r)
	fp := strings.TrimSpace(string(must(exec.Command("ssh-keygen", "-lf", stranger.HostKey.Path+".pub").Output())))
	assert.Contains(t, r.Stderr, "the host key of stranger (127.0.0.1:"+fmt.Sprint(stranger.Port)+") is unknown: ssh-ed25519 "+strings.Fields(fp)[1])
	cmdLine := ""
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "echo ") {
			cmdLine = strings.TrimSpace(l)
		}
	}
	require.NotEmpty(t, cmdLine, "%s", r)
	out, err := exec.Command("sh", "-c", cmdLine).CombinedOutput()
	require.NoError(t, err, "%s", out)
	r = w.Run("exec", "st", "'trusted'", "--host", "stranger")
	require.Equal(t, 0, r.Code, "%s", r)

	// accept-new records an unknown key.
	r = w.Run("exec", "acc", "1", "--host", "acceptor")
	require.Equal(t, 0, r.Code, "%s", r)
	b, _ := os.ReadFile(known)
	assert.Contains(t, string(b), acceptor.KnownHostsLine())

	// A changed key is refused loudly, accept-new or not, and never overridden.
	other := sshtest.NewKey(t, filepath.Join(w.home, "otherhost"), "")
	changed := strings.ReplaceAll(string(b), acceptor.KnownHostsLine(), fmt.Sprintf("[127.0.0.1]:%d %s", acceptor.Port, strings.Join(strings.Fields(other.Public)[:2], " ")))
	require.NoError(t, os.WriteFile(known, []byte(changed), 0o600))
	require.Equal(t, 0, w.Run("kill", "acc").Code)
	w.StopHub() // a fresh connection must be made
	r = w.Run("exec", "acc2", "1", "--host", "acceptor")
	require.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "THE HOST KEY OF acceptor")
	assert.Contains(t, r.Stderr, "HAS CHANGED")
	assert.Contains(t, r.Stderr, "will not connect")
	b2, _ := os.ReadFile(known)
	assert.Equal(t, changed, string(b2), "known_hosts untouched")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestRemoteNoiseAndPythonDiscovery(t *testing.T) {
	t.Parallel()
	noise, err := os.CreateTemp("", "noise-*.sh")
	require.NoError(t, err)
	defer os.Remove(noise.Name())
	// Only the login's own shell is noisy: bash scripts it runs (a version
	// manager's) source BASH_ENV too.
	noise.WriteString("if [ -z \"$NOISY\" ]; then export NOISY=1; echo 'Welcome! rc file noise on stdout'; echo 'and noise on stderr' >&2; fi\n")
	noise.Close()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{SetEnv: map[string]string{"BASH_ENV": noise.Name()}})
	r := w.Run("exec", "n", "print('clean'); 1", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout, "noise")
	assert.Contains(t, r.Stdout, "clean\nOut[1]: 1\n")

	// A glob of interpreters: the one with the local sessions' minor wins.
	ps := hubtest.Pythons()
	newer, _ := hubtest.PickPythons(t)
	localMinor := ""
	for v, p := range ps {
		if p == newer {
			localMinor = v
		}
	}
	glob := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(newer))), "*", "bin", "python3.*")
	res, r2 := jsonResult(t, w.Env, "exec", "--json", "g", "import sys; sys.executable", "--host", "lab", "--pythons", glob)
	require.Equal(t, 0, r2.Code, "%s", r2)
	require.NotNil(t, res.Created)
	assert.True(t, strings.HasPrefix(res.Created.Python, localMinor+"."), "picked %s, local is %s", res.Created.Python, localMinor)

	// --python pinned to a missing path: a clear error.
	r = w.Run("exec", "p", "1", "--host", "lab", "--python", "/no/such/python3")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "python /no/such/python3 is not there")
	r = w.Run("exec", "p", "1", "--host", "lab", "--python", "/bin/sh;rm")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "give one interpreter's name or path")
}

// A link lost with linger off ends the session; linger_test.go has the
// sessions that outlive it.
func TestRemoteLinkLoss(t *testing.T) {
	w := newSSHWorld(t, []string{"hang", "drop"}, sshtest.Options{})
	w.WriteConfig(`{"linger": 0}`)
	for _, n := range []string{"hang", "drop"} {
		w.appendConfig(t, fmt.Sprintf("Host %s\n  ServerAliveInterval 1\n", n))
	}
	// A link that hangs: the sshd serving it is stopped.
	require.Equal(t, 0, w.Run("exec", "h", "import time", "--host", "hang").Code)
	hang := w.servers["hang"]
	kids := hang.Children()
	require.NotEmpty(t, kids)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	t0 := time.Now()
	r := w.Run("exec", "h", "time.sleep(30)", "-t", "20")
	took := time.Since(t0)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "link to hang lost: no answer to 3 keepalives 1s apart")
	assert.Less(t, took, 6*time.Second, "dead within about three keepalive intervals")
	waitNoWorkers(t, hang)

	// A link that drops: the sshd serving it is killed.
	require.Equal(t, 0, w.Run("exec", "d", "import time", "--host", "drop").Code)
	drop := w.servers["drop"]
	ran := make(chan hubtest.Result, 1)
	go func() { ran <- w.Run("exec", "d", "time.sleep(30)", "-t", "20") }()
	waitRunning(t, w.Env, "d", 2) // the link drops under the running cell
	t0 = time.Now()
	for _, pid := range drop.Children() {
		if !strings.Contains(sshtest.Cmdline(pid), "zlib") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	r = <-ran
	assert.Equal(t, 4, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "link to drop lost")
	assert.Less(t, time.Since(t0), 3*time.Second, "reported at once")
	waitNoWorkers(t, drop)

	// The name stays tied to its host after such a death.
	r = w.Run("exec", "d", "1")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'd' ran on drop, not local")
	r = w.Run("exec", "d", "'back'", "--host", "drop")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "link to drop lost")
	assert.Contains(t, r.Stdout, "Out[1]: 'back'")
}

func TestSSHConfigResolution(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	s := w.servers["lab"]
	require.NoError(t, os.Link(w.key.Path, filepath.Join(w.home, ".ssh", "id_"+w.user+"_ed25519")))
	inc := filepath.Join(w.home, ".ssh", "extra.conf")
	require.NoError(t, os.WriteFile(inc, []byte(fmt.Sprintf("Host included\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %%d/.ssh/id_%%r_ed25519\n", s.Port, w.user)), 0o600))
	w.appendConfig(t, "Include ~/.ssh/extra.conf\nMatch exec \"true\"\n  User nobody-at-all\nHost *\n  ConnectTimeout 5\n")
	r := w.Run("exec", "inc", "'ok'", "--host", "included")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: 'ok'")
	assert.Contains(t, r.Stdout, "Match exec")
	assert.Contains(t, r.Stdout, "that line is skipped, the rest is used")
	r = w.Run("exec", "inc2", "'ok'", "--host", "included")
	assert.NotContains(t, r.Stdout, "Match exec", "warned once")
}

func TestRemoteHashedKnownHostsJumpKeysAndTimeouts(t *testing.T) {
	w := newSSHWorld(t, []string{"gw", "target"}, sshtest.Options{})
	known := filepath.Join(w.home, ".ssh", "known_hosts")
	out, err := exec.Command("ssh-keygen", "-H", "-f", known).CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, _ := os.ReadFile(known)
	require.True(t, strings.HasPrefix(string(b), "|1|"), "hashed: %s", b)
	r := w.Run("exec", "hashed", "1", "--host", "target", "--jump", "gw")
	require.Equal(t, 0, r.Code, "hashed known_hosts entries work, for the jump and the target: %s", r)

	// A jump host is checked like any other: an unknown one is refused.
	stranger := sshtest.Start(t, sshtest.Options{Authorized: []string{w.key.Public}})
	w.appendConfig(t, fmt.Sprintf("Host strangegw\n  HostName 127.0.0.1\n  Port %d\n  User %s\n", stranger.Port, w.user))
	r = w.Run("exec", "viastranger", "1", "--host", "target", "--jump", "strangegw")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "jump host strangegw: remote: the host key of strangegw")

	// ConnectTimeout bounds the handshake, which x/crypto does not bound.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accept, then say nothing
		}
	}()
	w.appendConfig(t, fmt.Sprintf("Host silent\n  HostName 127.0.0.1\n  Port %d\n  ConnectTimeout 1\n", ln.Addr().(*net.TCPAddr).Port))
	t0 := time.Now()
	r = w.Run("exec", "silent", "1", "--host", "silent")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "no ssh handshake within ConnectTimeout 1s")
	assert.Less(t, time.Since(t0), 5*time.Second)
}

func TestRemoteThroughMCP(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"gw", "lab"}, sshtest.Options{})
	cs := mcpSession(t, w.Env, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	text, isErr := callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{
		"name": "m", "code": "import socket; 'remote'", "host": "lab", "jump": []string{"gw"}}})
	assert.False(t, isErr, text)
	assert.Contains(t, text, "[created session 'm' on lab via gw (python 3.")
	assert.Contains(t, text, "Out[1]: 'remote'")
	text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "sessions", Arguments: map[string]any{}})
	assert.Contains(t, text, "m  on lab via gw  pid")
}
