package tests

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// The password has bytes a shell or a careless quote would mangle.
const fakePassword = `p@ss w0rd 'ünï"cödé' $HOME ;x`

// fakeSudo is a world with the fake sudo and askpass of testdata.
type fakeSudo struct {
	dir      string
	sudo     string
	askpass  string
	log      string // what the fake sudo read as passwords
	calls    string // askpass calls
	expect   string // the password the fake sudo wants
	pwfile   string // what the askpass prints
	password string
}

func newFakeSudo(t *testing.T, password, given string) *fakeSudo {
	t.Helper()
	newer, _ := hubtest.PickPythons(t)
	dir, err := os.MkdirTemp("", "fakesudo-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	_, file, _, _ := runtime.Caller(0)
	td := filepath.Join(filepath.Dir(file), "testdata")
	src, err := os.ReadFile(filepath.Join(td, "fakesudo.py"))
	require.NoError(t, err)
	f := &fakeSudo{dir: dir, sudo: filepath.Join(dir, "sudo"), askpass: filepath.Join(td, "fakeaskpass.sh"),
		log: filepath.Join(dir, "sudo.log"), calls: filepath.Join(dir, "askpass.calls"),
		expect: filepath.Join(dir, "expect"), pwfile: filepath.Join(dir, "given"), password: password}
	require.NoError(t, os.WriteFile(f.sudo, append([]byte("#!"+newer+"\n"), src...), 0o755))
	require.NoError(t, os.WriteFile(f.expect, []byte(password+"\n"), 0o644))
	require.NoError(t, os.WriteFile(f.pwfile, []byte(given+"\n"), 0o644))
	return f
}

func (f *fakeSudo) vars(mode string) map[string]string {
	return map[string]string{
		"REPLHUB_SUDO": f.sudo, "FAKE_SUDO_MODE": mode, "FAKE_SUDO_LOG": f.log,
		"FAKE_SUDO_EXPECT_FILE": f.expect, "SUDO_ASKPASS": f.askpass,
		"FAKE_ASKPASS_FILE": f.pwfile, "FAKE_ASKPASS_CALLS": f.calls,
	}
}

func (f *fakeSudo) apply(e *hubtest.Env, mode string) {
	for k, v := range f.vars(mode) {
		e.Setenv(k, v)
	}
}

func (f *fakeSudo) askpassCalls() int {
	b, _ := os.ReadFile(f.calls)
	return strings.Count(string(b), "\n")
}

func (f *fakeSudo) sudoRead() string {
	b, _ := os.ReadFile(f.log)
	return string(b)
}

// scanForSecret watches every process's argv and environment until stop,
// and reports any that held secret.
func scanForSecret(secret string) (stop func() []string) {
	var mu sync.Mutex
	var found []string
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20000 && !done.Load(); i++ {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if _, err := strconv.Atoi(e.Name()); err != nil {
					continue
				}
				for _, what := range []string{"cmdline", "environ"} {
					b, err := os.ReadFile(filepath.Join("/proc", e.Name(), what))
					if err == nil && bytes.Contains(b, []byte(secret)) {
						mu.Lock()
						found = append(found, e.Name()+" "+what+": "+strings.ReplaceAll(string(b), "\x00", " "))
						mu.Unlock()
					}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() []string {
		done.Store(true)
		wg.Wait()
		return found
	}
}

// noSecretOnDisk checks the hub's log, transcripts and death notes.
func noSecretOnDisk(t *testing.T, e *hubtest.Env, secret string) {
	t.Helper()
	for _, root := range []string{e.Runtime, e.State} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				assert.NotContains(t, string(b), secret, "the password is in %s", p)
			}
			return nil
		})
	}
}

func TestSudoRelayLocal(t *testing.T) {
	f := newFakeSudo(t, fakePassword, fakePassword)
	e := hubtest.Start(t)
	f.apply(e, "password")
	newer, _ := hubtest.PickPythons(t)
	stop := scanForSecret(fakePassword)
	r := e.Run("exec", "ops", "import os; 'relayed'", "--sudo", "--python", newer)
	leaks := stop()
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[created session 'ops' as root (python 3.")
	assert.Contains(t, r.Stdout, "Out[1]: 'relayed'")
	assert.Equal(t, fakePassword+"\n", f.sudoRead(), "the password arrives byte-exact as sudo's first stdin line, once")
	assert.Equal(t, 1, f.askpassCalls())
	b, _ := os.ReadFile(f.calls)
	assert.Contains(t, string(b), "(replhub root session 'ops')")
	assert.Empty(t, leaks, "the password is in no process's argv or environment")
	assert.NotContains(t, r.Stdout+r.Stderr, fakePassword)
	noSecretOnDisk(t, e, fakePassword)

	r = e.Run("sessions")
	assert.Regexp(t, `ops  as root  pid \d+`, r.Stdout)
	// A live root session is reached without --sudo; a user session is not
	// turned into one.
	r = e.Run("exec", "ops", "1 + 1")
	assert.Equal(t, "Out[2]: 2\n", r.Stdout)
	// With --sudo, a call to the live root session is a plain one, sent
	// from package early's init.
	e.Setenv("GODEBUG", "inittrace=1")
	r = e.Run("exec", "ops", "2 + 1", "--sudo")
	assert.Equal(t, "Out[3]: 3\n", r.Stdout)
	assertEarly(t, r.Stderr)
	e.Setenv("GODEBUG", "")
	e.Run("exec", "plain", "1", "--python", newer)
	r = e.Run("exec", "plain", "1", "--sudo")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "runs as your user, not as root")

	// After a root session died on its own, its name wants --sudo again.
	r = e.Run("exec", "ops", "import os; os._exit(9)")
	assert.Equal(t, 4, r.Code)
	r = e.Run("exec", "ops", "1", "--python", newer)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "session 'ops' ran as root")
	r = e.Run("exec", "ops", "'again'", "--sudo", "--python", newer)
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "exited with status 9")
	for _, p := range []string{e.Paths.Transcript("ops")} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	assert.Equal(t, 2, f.askpassCalls())
	noSecretOnDisk(t, e, fakePassword)
}

func TestSudoRefusals(t *testing.T) {
	newer, _ := hubtest.PickPythons(t)
	t.Run("wrong password", func(t *testing.T) {
		f := newFakeSudo(t, "right one", "wrong one")
		e := hubtest.Start(t)
		f.apply(e, "password")
		t0 := time.Now()
		r := e.Run("exec", "w", "1", "--sudo", "--python", newer)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "sudo: wrong password")
		assert.NotContains(t, r.Stderr, "wrong one")
		assert.Less(t, time.Since(t0), 5*time.Second, "recognised at once")
		assert.Equal(t, 1, f.askpassCalls(), "asked once, never retried")
		assert.Equal(t, "wrong one\n", f.sudoRead(), "sent once")
	})
	t.Run("no answer", func(t *testing.T) {
		f := newFakeSudo(t, "pw", "pw")
		e := hubtest.Start(t)
		f.apply(e, "silent")
		e.WriteConfig(`{"sudo_timeout": 2}`)
		t0 := time.Now()
		r := e.Run("exec", "s", "1", "--sudo", "--python", newer)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "no answer from sudo within 2s")
		assert.Less(t, time.Since(t0), 8*time.Second)
	})
	t.Run("no askpass", func(t *testing.T) {
		f := newFakeSudo(t, "pw", "pw")
		e := hubtest.Start(t)
		f.apply(e, "password")
		e.Setenv("SUDO_ASKPASS", "")
		r := e.Run("exec", "n", "1", "--sudo", "--python", newer)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "root session 'n' needs sudo's password: sudo wants a password, and $SUDO_ASKPASS is not set")
		assert.Empty(t, f.sudoRead())
	})
	t.Run("nopasswd mode", func(t *testing.T) {
		f := newFakeSudo(t, "pw", "pw")
		e := hubtest.Start(t)
		f.apply(e, "password")
		e.WriteConfig(`{"sudo": "nopasswd"}`)
		r := e.Run("exec", "n", "1", "--sudo", "--python", newer)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "the sudo mode there is nopasswd")
		assert.Equal(t, 0, f.askpassCalls())
	})
	t.Run("askpass mode asks even where sudo would not", func(t *testing.T) {
		f := newFakeSudo(t, "pw", "pw")
		e := hubtest.Start(t)
		f.apply(e, "nopasswd")
		e.WriteConfig(`{"sudo": "askpass"}`)
		r := e.Run("exec", "a", "'in'", "--sudo", "--python", newer)
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, 1, f.askpassCalls())
		assert.NotContains(t, r.Stdout, "pw", "a password sudo did not read is dropped by the worker, unechoed")
	})
	t.Run("auto on a nopasswd sudo asks nothing", func(t *testing.T) {
		f := newFakeSudo(t, "pw", "pw")
		e := hubtest.Start(t)
		f.apply(e, "nopasswd")
		r := e.Run("exec", "a", "'in'", "--sudo", "--python", newer)
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, 0, f.askpassCalls())
	})
}

// remoteFakeSudo is a world of hosts names, each an sshd whose logins
// find the fake sudo (wanting fakePassword), and whose client's askpass
// gives it.
func remoteFakeSudo(t *testing.T, names ...string) (*fakeSudo, *sshWorld) {
	t.Helper()
	f := newFakeSudo(t, fakePassword, fakePassword)
	env := f.vars("password")
	set := map[string]string{}
	for _, k := range []string{"REPLHUB_SUDO", "FAKE_SUDO_MODE", "FAKE_SUDO_LOG", "FAKE_SUDO_EXPECT_FILE"} {
		set[k] = env[k]
	}
	w := newSSHWorld(t, names, sshtest.Options{SetEnv: set})
	w.Setenv("SUDO_ASKPASS", f.askpass)
	w.Setenv("FAKE_ASKPASS_FILE", f.pwfile)
	w.Setenv("FAKE_ASKPASS_CALLS", f.calls)
	return f, w
}

func TestSudoRelayRemote(t *testing.T) {
	f, w := remoteFakeSudo(t, "web")
	stop := scanForSecret(fakePassword)
	r := w.Run("exec", "web", "import os; 'relayed'", "--host", "web", "--sudo")
	leaks := stop()
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[created session 'web' on web as root (python 3.")
	assert.Equal(t, fakePassword+"\n", f.sudoRead(), "byte-exact, once, and the payload was not read as a password")
	assert.Empty(t, leaks)
	noSecretOnDisk(t, w.Env, fakePassword)
	r = w.Run("sessions")
	assert.Contains(t, r.Stdout, "web  on web  as root  pid")

	// A wrong password remotely: recognised at once, and the payload is
	// never offered to sudo as a second try.
	require.NoError(t, os.WriteFile(f.pwfile, []byte("not it\n"), 0o644))
	require.NoError(t, os.Remove(f.log))
	t0 := time.Now()
	r = w.Run("exec", "web2", "1", "--host", "web", "--sudo")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "sudo: wrong password")
	// Two starts (sudo -n, then with the password) of a few hundred ms
	// each, seconds on a loaded machine; one that waited for sudo's
	// bound instead would take it whole.
	assert.Less(t, time.Since(t0), sudo.DefaultTimeout/2, "recognised, not waited out")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, "not it\n", f.sudoRead())
}

// sudoUsers are the users sudoUser made, each set up once a run: tests
// running side by side share one, so a test that ends must not take its
// rule or change its password under another (removeSudoRules ends them).
var sudoUsers = struct {
	sync.Mutex
	done map[string]sudoSetup
}{done: map[string]sudoSetup{}}

type sudoSetup struct {
	password string
	nopasswd bool
	err      error
}

// sudoUser makes the local user name (once a run) with a random password
// and a sudoers rule: NOPASSWD for all, or all with the password. It
// skips where the tests are not root or sudo is missing (outside CI).
func sudoUser(t *testing.T, name string, nopasswd bool) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("real sudo tests run as root (CI does)")
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs sudo (apt-get install sudo)")
		}
		t.Skip("needs sudo")
	}
	sudoUsers.Lock()
	defer sudoUsers.Unlock()
	got, ok := sudoUsers.done[name]
	if !ok {
		got = setUpSudoUser(name, nopasswd)
		sudoUsers.done[name] = got
	}
	require.NoError(t, got.err)
	require.Equal(t, nopasswd, got.nopasswd, "user %s is set up one way for every test", name)
	return got.password
}

func setUpSudoUser(name string, nopasswd bool) sudoSetup {
	if _, err := osuser.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/bash", name).CombinedOutput(); err != nil {
			return sudoSetup{err: fmt.Errorf("useradd %s: %v: %s", name, err, out)}
		}
	}
	// Random, so that a copy found in memory can only be this run's.
	password := "pw-" + rand.Text()
	cmd := exec.Command("chpasswd")
	cmd.Stdin = strings.NewReader(name + ":" + password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return sudoSetup{err: fmt.Errorf("chpasswd: %v: %s", err, out)}
	}
	rule := fmt.Sprintf("Defaults:%s !lecture\n%s ALL=(ALL) ALL\n", name, name)
	if nopasswd {
		rule = fmt.Sprintf("%s ALL=(ALL) NOPASSWD: ALL\n", name)
	}
	file := sudoRule(name)
	if err := os.WriteFile(file, []byte(rule), 0o440); err != nil {
		return sudoSetup{err: err}
	}
	if out, err := exec.Command("visudo", "-cf", file).CombinedOutput(); err != nil {
		os.Remove(file)
		return sudoSetup{err: fmt.Errorf("visudo: %v: %s", err, out)}
	}
	return sudoSetup{password: password, nopasswd: nopasswd}
}

func sudoRule(name string) string { return "/etc/sudoers.d/replhub-test-" + name }

// removeSudoRules removes the rules sudoUser wrote, at the end of the run.
func removeSudoRules() {
	sudoUsers.Lock()
	defer sudoUsers.Unlock()
	for name := range sudoUsers.done {
		os.Remove(sudoRule(name))
	}
}

// askpassFor writes an askpass program the user can run: it prints the
// password (from a file only the user reads) and records its calls.
func askpassFor(t *testing.T, e *hubtest.Env, password string) (program, calls string) {
	t.Helper()
	dir := filepath.Join(e.Dir, "askpass")
	require.NoError(t, os.Mkdir(dir, 0o755))
	pwfile, calls := filepath.Join(dir, "pw"), filepath.Join(dir, "calls")
	program = filepath.Join(dir, "askpass.sh")
	require.NoError(t, os.WriteFile(pwfile, []byte(password+"\n"), 0o600))
	require.NoError(t, os.WriteFile(calls, nil, 0o600))
	require.NoError(t, os.WriteFile(program, []byte("#!/bin/sh\necho called >> "+calls+"\ncat "+pwfile+"\n"), 0o755))
	out, err := exec.Command("chown", e.As+":", pwfile, calls).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return program, calls
}

func countLines(p string) int {
	b, _ := os.ReadFile(p)
	return strings.Count(string(b), "\n")
}

func TestRealSudo(t *testing.T) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3, which another user can run")
	}
	t.Run("password", func(t *testing.T) {
		pw := sudoUser(t, "rhpw", false)
		e := hubtest.StartAs(t, "rhpw")
		program, calls := askpassFor(t, e, pw)
		e.Setenv("SUDO_ASKPASS", program)
		e.Setenv("REPLHUB_PYTHON", py)
		stop := scanForSecret(pw)
		r := e.Run("exec", "ops", "import os; (os.geteuid(), os.getuid())", "--sudo")
		leaks := stop()
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[created session 'ops' as root")
		assert.Contains(t, r.Stdout, "Out[1]: (0, 0)")
		assert.Equal(t, 1, countLines(calls))
		assert.Empty(t, leaks)
		noSecretOnDisk(t, e, pw)
		r = e.Run("exec", "ops", "open('/etc/shadow').read(5)")
		assert.Contains(t, r.Stdout, "Out[2]: 'root:'")
		// sudo passes the worker no cell pipe: its exec frames come on a
		// cell link to its socket, from its first cell on.
		r = e.Run("exec", "ops", cellsProbe)
		assert.Contains(t, r.Stdout, "Out[3]: (True, 3)", "%s", r)
		// The toolkit works as root; a user session's sudo() goes through
		// the real sudo with $SUDO_ASKPASS.
		r = e.Run("exec", "ops", `(str(sh("id -u")).strip(), read("/etc/shadow")[:5])`)
		assert.Contains(t, r.Stdout, "('0', 'root:')", "%s", r)
		r = e.Run("exec", "mine", `(str(sh("id -u")).strip() != "0", str(sudo("id -u")).strip())`)
		assert.Contains(t, r.Stdout, "(True, '0')", "%s", r)
		r = e.Run("kill", "ops")
		assert.Equal(t, 0, r.Code, "%s", r)

		// A user session opens its root twin, which pulls a root-only file,
		// and pushes one that keeps its owner.
		target := filepath.Join(e.Dir, "rootfile")
		require.NoError(t, os.WriteFile(target, []byte("old"), 0o640))
		require.NoError(t, os.Chown(target, 0, 0))
		r = e.Run("exec", "me", fmt.Sprintf(`import os
root = session("me").sudo() if False else session("me2", sudo=True)
shadow = root.pull("/etc/shadow")
root.push(b"new", %q)
(os.getuid() != 0, shadow[:5], root.call(lambda: os.geteuid()))`, target))
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "(True, b'root:', 0)")
		assert.Equal(t, 3, countLines(calls), "the hub asked through the creator's $SUDO_ASKPASS (and sudo() once)")
		fi, err := os.Stat(target)
		require.NoError(t, err)
		assert.Equal(t, uint32(0), fi.Sys().(*syscall.Stat_t).Uid)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
		b, _ := os.ReadFile(target)
		assert.Equal(t, "new", string(b))
	})
	t.Run("wrong password", func(t *testing.T) {
		sudoUser(t, "rhpw", false)
		e := hubtest.StartAs(t, "rhpw")
		program, calls := askpassFor(t, e, "not the password")
		e.Setenv("SUDO_ASKPASS", program)
		e.Setenv("REPLHUB_PYTHON", py)
		t0 := time.Now()
		r := e.Run("exec", "ops", "1", "--sudo")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "sudo: wrong password")
		assert.Less(t, time.Since(t0), 10*time.Second, "recognised when sudo says so, not after the 40 s limit")
		assert.Equal(t, 1, countLines(calls), "the askpass program runs exactly once")
	})
	t.Run("no askpass", func(t *testing.T) {
		sudoUser(t, "rhpw", false)
		e := hubtest.StartAs(t, "rhpw")
		e.Setenv("REPLHUB_PYTHON", py)
		r := e.Run("exec", "ops", "1", "--sudo")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "$SUDO_ASKPASS is not set")
	})
	t.Run("nopasswd", func(t *testing.T) {
		sudoUser(t, "rhnp", true)
		e := hubtest.StartAs(t, "rhnp")
		program, calls := askpassFor(t, e, "unused")
		e.Setenv("SUDO_ASKPASS", program)
		e.Setenv("REPLHUB_PYTHON", py)
		r := e.Run("exec", "ops", "import os; os.geteuid()", "--sudo")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[1]: 0")
		assert.Equal(t, 0, countLines(calls), "auto on a NOPASSWD rule never calls the askpass program")

		// A run as root ends its root worker and leaves nothing.
		r = e.Run("run", "import os; (os.geteuid(), os.getpid())", "--sudo")
		require.Equal(t, 0, r.Code, "%s", r)
		m := regexp.MustCompile(`Out\[1\]: \(0, (\d+)\)`).FindStringSubmatch(r.Stdout)
		require.NotNil(t, m, "%s", r)
		pid, _ := strconv.Atoi(m[1])
		assert.True(t, hubtest.WaitGone(pid, 5*time.Second), "the root worker ended")
		assert.NotContains(t, e.Run("sessions", "--json").Stdout, `"run-`)
	})
	t.Run("over ssh", func(t *testing.T) {
		sshtest.Need(t)
		pw := sudoUser(t, "rhpw", false)
		e := hubtest.StartAs(t, "rhpw")
		home := e.Getenv("HOME")
		key := sshtest.NewKey(t, filepath.Join(home, ".ssh", "id_ed25519"), "")
		srv := sshtest.Start(t, sshtest.Options{Authorized: []string{key.Public}})
		require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(srv.KnownHostsLine()+"\n"), 0o600))
		out, err := exec.Command("chown", "-R", "rhpw:", filepath.Join(home, ".ssh")).CombinedOutput()
		require.NoError(t, err, "%s", out)
		program, calls := askpassFor(t, e, pw)
		e.Setenv("SUDO_ASKPASS", program)
		e.Setenv("REPLHUB_PYTHON", py)
		// Through a relay the test can cut: the root session outlives a
		// dropped link, and comes back without the password.
		relay := sshtest.NewRelay(t, srv.Addr())
		require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"),
			[]byte(srv.KnownHostsLine()+"\n"+srv.KnownHostsLineAt(relay.Port)+"\n"), 0o600))
		r := e.Run("exec", "web", "import os; secret = 7; (os.geteuid(), os.getuid())", "--host", fmt.Sprintf("rhpw@127.0.0.1:%d", relay.Port), "--sudo", "--python", py)
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "as root (python 3.")
		assert.Contains(t, r.Stdout, "Out[1]: (0, 0)")
		assert.Equal(t, 1, countLines(calls))
		pid := endWorkerAtCleanup(t, e, "web")
		relay.Drop()
		time.Sleep(1500 * time.Millisecond)
		require.True(t, hubtest.Alive(pid), "the root worker outlives its link")
		relay.Restore()
		r = e.Run("exec", "web", "(os.geteuid(), secret, os.getpid())")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, fmt.Sprintf("(0, 7, %d)", pid))
		assert.Contains(t, r.Stdout, "came back at")
		assert.Equal(t, 1, countLines(calls), "no password asked again")
	})
}

// TestSudoRelayGroup: a root group whose hosts want sudo's password asks
// for it once, before any cell runs, and hands it to each host.
func TestSudoRelayGroup(t *testing.T) {
	f, w := remoteFakeSudo(t, "web", "db")
	stop := scanForSecret(fakePassword)
	r := w.Run("exec", "ops", "print('once'); 'root'", "--hosts", "web,db", "--sudo")
	leaks := stop()
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[group 'ops' on 2 hosts: 2 ok; created 2 sessions ops@HOST]\n")
	assert.Contains(t, r.Stdout, "\ndb,web (2)\n")
	assert.Equal(t, 1, strings.Count(r.Stdout, "once\n"), "the cell ran once on each host, after the password: %s", r)
	assert.Equal(t, 1, f.askpassCalls(), "one question for the group")
	b, _ := os.ReadFile(f.calls)
	assert.Equal(t, fmt.Sprintf("[sudo] password for %s on db,web (replhub root session 'ops@HOST'): \n", w.user), string(b))
	assert.Equal(t, fakePassword+"\n"+fakePassword+"\n", f.sudoRead(), "byte-exact, once on each host")
	assert.Empty(t, leaks)
	noSecretOnDisk(t, w.Env, fakePassword)
	r = w.Run("sessions")
	assert.Contains(t, r.Stdout, "ops@web  on web  as root  pid")
	assert.Contains(t, r.Stdout, "ops@db  on db  as root  pid")
}
