package boot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SIGINT flood (sigint_test.go) while cells read two repositories
// with the git module, one through git's binary and the module's own
// reader of packs, and one (SHA-256) through a long-lived `git cat-file
// --batch`, and ask systemctl: no fd and no process is left behind, and
// each read gets its own object. Through subprocess.run, one flood left a
// zombie git for nearly every cell (on every Python) and 50 to 220 more
// open fds.
func TestSigintFloodModules(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	sha1, sha256 := gitRepo(t), gitRepo(t, "--object-format=sha256")
	mods, err := filepath.Abs("modules")
	require.NoError(t, err)
	eachPython(t, func(t *testing.T, py string) {
		// The modules from their folder, as their tests take them: a
		// session's import of them asks the hub, which this test is not.
		w := startWorkerEnv(t, py, []string{"PYTHONPATH=" + mods})
		runOK(t, w, fmt.Sprintf("import git, systemd\nA, B = git.repo(%s), git.repo(%s)\n"+
			"HA, HB = A.run('rev-parse HEAD').strip(), B.run('rev-parse HEAD').strip()\n"+
			"FB = B.run('rev-parse HEAD:f.txt').strip()\nN, S = 0, [0] * 5\n"+
			"assert B.log(1)[0].id == HB and A.log(1)[0].id == HA", pyStr(sha1), pyStr(sha256)))
		// One kind of read a cell, in turn: nearly every cell is cut short
		// within its first read. B's reads go to its cat-file whole
		// (B._odb, under the module's cache of objects), one at a time.
		floodKeepsFds(t, w, "N += 1\nfor _ in range(10):\n    S[N % 5] += 1\n"+
			"    if N % 5 == 0:\n        A.status()\n        assert A.run('rev-parse HEAD').strip() == HA\n"+
			"    elif N % 5 == 1:\n        D = git.repo(A.workdir)\n        assert D.log(1)[0].id == HA and D.cat('HEAD:f.txt') == 'one\\n'\n"+
			"    elif N % 5 == 2:\n        assert B._odb.read(HB)[0] == 'commit' and B._odb.read(FB) == ('blob', b'one\\n')\n"+
			"    elif N % 5 == 3:\n        C = git.repo(B.workdir)\n        assert C.log(1)[0].id == HB and C.cat('HEAD:f.txt') == 'one\\n'\n"+
			"    else:\n        try:\n            systemd._systemctl(['is-system-running'], False)\n        except systemd.SystemdError:\n            pass", 10)
		runOK(t, w, "assert all(S), S\nC = D = None\nimport gc; gc.collect()\nA.status()\nassert B._odb.read(HB)[0] == 'commit' and B._odb.read(FB) == ('blob', b'one\\n')")
		assert.Eventually(t, func() bool { return len(children(w.cmd.Process.Pid)) <= 1 }, // B's cat-file
			5*time.Second, 20*time.Millisecond, "processes left: %v", children(w.cmd.Process.Pid))
	})
}

// gitRepo makes a repository of one commit (f.txt), packed, with git
// init's args.
func gitRepo(t *testing.T, args ...string) string {
	dir := t.TempDir()
	for _, argv := range [][]string{append([]string{"init", "-q"}, args...), {"add", "f.txt"},
		{"-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "one"}, {"repack", "-adq"}} {
		if argv[0] == "add" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one\n"), 0o600))
		}
		cmd := exec.Command("git", argv...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil && argv[0] == "init" && len(args) > 0 {
			t.Skipf("this git cannot init %v (SHA-256 came in git 2.29): %s", args, out)
		}
		require.NoError(t, err, "git %v: %s", argv, out)
	}
	return dir
}

// The same while cells call a D-Bus method through the systemd module's
// libsystemd binding (a private dbus-daemon as the user bus): no bus
// connection is left open, and the binding still answers. One flood left
// 410 to 445 connections open (a bus opened but not yet in its with
// block has no finalizer), and the library's lock, kept by a
// KeyboardInterrupt as it was let go of, wedged the worker in 2 runs of 3.
func TestSigintFloodSystemdBus(t *testing.T) {
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("no dbus-daemon here")
	}
	sock := filepath.Join(t.TempDir(), "bus")
	d := exec.Command(daemon, "--session", "--nofork", "--nopidfile", "--address=unix:path="+sock)
	require.NoError(t, d.Start())
	t.Cleanup(func() { d.Process.Kill(); d.Wait() })
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the file comes before listen()
	mods, err := filepath.Abs("modules")
	require.NoError(t, err)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerEnv(t, py, []string{"PYTHONPATH=" + mods, "DBUS_SESSION_BUS_ADDRESS=unix:path=" + sock})
		runOK(t, w, "import systemd\nsystemd.BACKEND = 'bus'\nD = ('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus')\n"+
			"assert 'org.freedesktop.DBus' in systemd.call(*D, 'ListNames', user=True)")
		floodKeepsFds(t, w, "for _ in range(10):\n    systemd.call(*D, 'ListNames', user=True)", 0)
		runOK(t, w, "assert 'org.freedesktop.DBus' in systemd.call(*D, 'ListNames', user=True)")
	})
}

// The same while cells read a journal folder (systemd-journal-remote
// makes its file) through the systemd module's libsystemd binding, whole
// and cut short after its first entry: every journal opened is closed.
func TestSigintFloodSystemdJournal(t *testing.T) {
	var remote string
	for _, p := range []string{"systemd-journal-remote", "/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote"} {
		if path, err := exec.LookPath(p); err == nil {
			remote = path
			break
		}
	}
	if remote == "" {
		t.Skip("no systemd-journal-remote here")
	}
	dir := t.TempDir()
	var export strings.Builder
	now := time.Now().Unix()
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&export, "__CURSOR=s=1;i=%d\n__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n"+
			"_BOOT_ID=0123456789abcdef0123456789abcdef\n_HOSTNAME=t\nMESSAGE=entry %d\n_SYSTEMD_UNIT=demo.service\nPRIORITY=6\n_PID=%d\n\n",
			i, (now-100+int64(i))*1000000, i, i, 40+i)
	}
	cmd := exec.Command(remote, "-o", filepath.Join(dir, "t.journal"), "-")
	cmd.Stdin = strings.NewReader(export.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	mods, err := filepath.Abs("modules")
	require.NoError(t, err)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerEnv(t, py, []string{"PYTHONPATH=" + mods})
		runOK(t, w, fmt.Sprintf("import systemd, _libsystemd\nassert _libsystemd.libsystemd() is not None\n"+
			"systemd.BACKEND = 'bus'\nJ = %s\nN = 0\nassert len(systemd.journal('demo', since=None, directory=J)) == 50", pyStr(dir)))
		before := openFds(t, w.cmd.Process.Pid)
		cells := floodWith(t, w, "N += 1\nfor _ in range(10):\n    if N % 2:\n"+
			"        assert len(systemd.journal('demo', since=None, directory=J)) == 50\n    else:\n"+
			"        G = _libsystemd.read_journal([], ['MESSAGE'], None, False, J)\n        next(G)\n        G = None")
		runOK(t, w, "G = None\nimport gc; gc.collect()")
		assert.LessOrEqual(t, openFds(t, w.cmd.Process.Pid), before, "open files after %d cells", cells)
		runOK(t, w, "assert len(systemd.journal('demo', since=None, directory=J)) == 50")
	})
}

// git's cat-file starts with Popen's poll step guarded (children), as the
// toolkit's commands do, even in a session that has run no command: a
// KeyboardInterrupt between that step's lock and its try would keep
// Popen's lock, and the process's end would wait for it for ever.
func TestCatFileStartsWithPopenPollGuarded(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	repo := gitRepo(t, "--object-format=sha256")
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = repo
	head, err := cmd.Output()
	require.NoError(t, err)
	mods, err := filepath.Abs("modules")
	require.NoError(t, err)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerEnv(t, py, []string{"PYTHONPATH=" + mods})
		runOK(t, w, fmt.Sprintf("import subprocess, sys, replhub_toolkit\n"+
			"assert 'replhub_toolkit.children' not in sys.modules\n"+
			"poll = subprocess.Popen._internal_poll.__code__\nassert poll not in replhub_toolkit._SIGINT[0].guarded\n"+
			"import git\nB = git.repo(%s)\nassert B._odb.read(%s)[0] == 'commit'\n"+
			"assert 'replhub_toolkit.shell' not in sys.modules\nassert poll in replhub_toolkit._SIGINT[0].guarded",
			pyStr(repo), pyStr(strings.TrimSpace(string(head)))))
	})
}

// A cat-file that stays after EOF is killed and reaped within a bound,
// even where a KeyboardInterrupt left Popen's lock taken: Popen's own
// wait would then wait for ever, in the SIGINT section.
func TestCatFileEndIsBoundedWithPopenLockTaken(t *testing.T) {
	mods, err := filepath.Abs("modules")
	require.NoError(t, err)
	eachPython(t, func(t *testing.T, py string) {
		w := startWorkerEnv(t, py, []string{"PYTHONPATH=" + mods})
		runOK(t, w, "import _programs, git, subprocess, time\n"+
			"p = _programs.start(['sh', '-c', 'exec sleep 30'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"+
			"p._waitpid_lock.acquire()\nt0 = time.monotonic()\ngit._end(p)\ntook = time.monotonic() - t0\n"+
			"p._waitpid_lock.release()\nassert p.returncode is not None\nassert took < 5, took")
	})
}
