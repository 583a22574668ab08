package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// Every session starts with the toolkit: its results print as plain
// text, the listing leaves its names out, and REPLHUB_NO_TK=1 starts a
// session without it.
func TestToolkitInEverySession(t *testing.T) {
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		dir := t.TempDir()
		out := ok(t, e.Run("exec", "tk", fmt.Sprintf("cd(%q)", dir), "--python", py))
		assert.Contains(t, out, "cwd: "+dir)
		out = ok(t, e.Run("exec", "tk", `r = sh("echo out; echo err >&2", check=False); r`))
		assert.Contains(t, out, "out\n[stderr]\nerr\n")
		assert.NotContains(t, out, "Out[")
		out = ok(t, e.Run("exec", "tk", `(r.upper(), r.code, r.ok)`))
		assert.Contains(t, out, "('OUT\\n', 0, True)", "a result stays a str")
		r := e.Run("exec", "tk", `sh("exit 3")`)
		assert.Contains(t, r.Stdout, "CommandError: sh: exit 3")
		assert.NotContains(t, r.Stdout, "replhub_toolkit", "the toolkit's frames are left out")
		out = ok(t, e.Run("exec", "tk", `try:
    sh(["no-such-command-here"])
except CommandError as e:
    print("caught:", e)`))
		assert.Contains(t, out, "caught: sh: no such command: no-such-command-here")
		out = ok(t, e.Run("exec", "tk", "tkhelp()"))
		for _, h := range []string{"sh", "bg", "sudo", "fetch", "cd", "tkhelp"} {
			assert.Regexp(t, `(?m)^`+h+` `, out)
		}
		// Names: the toolkit's are left out of the listing.
		ok(t, e.Run("exec", "tk", "mine = 1"))
		for _, s := range sessionList(t, e).Sessions {
			if s.Name == "tk" {
				assert.Equal(t, []string{"mine", "r"}, s.Names)
			}
		}
		// Without the toolkit.
		e.Setenv("REPLHUB_NO_TK", "1")
		out = ok(t, e.Run("exec", "bare", "[n for n in ('sh', 'read', 'tkhelp') if n in dir()]", "--python", py))
		assert.Contains(t, out, "Out[1]: []")
	})
}

// A background job is mentioned when it ends, is listed while it runs,
// and ends with its session, however the session ends.
func TestToolkitBackgroundJobs(t *testing.T) {
	e := hubtest.Start(t)
	out := ok(t, e.Run("exec", "jobs", `import os
quick = bg("echo from the job; sleep 0.3")
slow = bg("sleep 300")
left = sh("sleep 301 & echo started")
(quick.pid, slow.pid, os.getpid())`))
	var quick, slow, worker int
	_, err := fmt.Sscanf(out[strings.Index(out, "Out[1]: "):], "Out[1]: (%d, %d, %d)", &quick, &slow, &worker)
	require.NoError(t, err, "%s", out)
	all := out
	out = ok(t, e.Run("exec", "jobs", "bg()"))
	assert.Contains(t, out, "sleep 300")
	all += out
	time.Sleep(600 * time.Millisecond)
	out = ok(t, e.Run("exec", "jobs", "quick.tail()"))
	assert.Contains(t, out, "from the job")
	all += out
	assert.Equal(t, 1, strings.Count(all, "[job 1 (echo from the job; sleep 0.3) ended: exit 0]"), "told once, when it ended: %s", all)
	// The worker dies at once: its jobs, and what sh left running, die too.
	left := findProcess(t, "sleep 301")
	require.NotZero(t, left)
	require.NoError(t, syscall.Kill(worker, syscall.SIGKILL))
	for i := 0; i < 200 && (hubtest.Alive(slow) || hubtest.Alive(left)); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	assert.False(t, hubtest.Alive(slow), "the job ended with its worker")
	assert.False(t, hubtest.Alive(left), "what sh left running ended with its worker")
}

// findProcess is the pid of a process whose command line is cmdline.
func findProcess(t *testing.T, cmdline string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			var pid int
			fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			return pid
		}
	}
	return 0
}

// sh(cmd, host=h) runs on h over the hub's connection, with cwd, env and
// input; a session on a host may run commands only where it may reach.
func TestToolkitShOnAHost(t *testing.T) {
	w := newSSHWorld(t, []string{"lab", "gpu"}, sshtest.Options{})
	out := ok(t, w.Run("exec", "loc", `r = sh("pwd; echo $GREETING; cat; echo oops >&2", host="lab", cwd="/tmp", env={"GREETING": "hi there"}, input="from stdin\n", check=False); r`))
	assert.Contains(t, out, "/tmp\nhi there\nfrom stdin\n[stderr]\noops")
	out = ok(t, w.Run("exec", "loc", `sh(["printf", "%s|", "a'b", "$HOME"], host="lab")`))
	assert.Contains(t, out, "a'b|$HOME|", "an argv runs with no shell")
	r := w.Run("exec", "loc", `sh("exit 4", host="lab")`)
	assert.Contains(t, r.Stdout, "CommandError: sh: exit 4")
	t0 := time.Now()
	r = w.Run("exec", "loc", `sh("sleep 30", host="lab", timeout=1)`)
	if !assert.Contains(t, r.Stdout, "no end within") {
		b, _ := os.ReadFile(w.Paths.Log())
		t.Logf("hub log:\n%s", b)
	}
	assert.Less(t, time.Since(t0), 10*time.Second)

	// From a session on lab: its own host yes, another host no.
	ok(t, w.Run("exec", "web", "x = 1", "--host", "lab"))
	out = ok(t, w.Run("exec", "web", `sh("echo same host", host="lab")`))
	assert.Contains(t, out, "same host")
	r = w.Run("exec", "web", `sh("echo elsewhere", host="gpu")`)
	assert.Contains(t, r.Stdout, "session 'web' on lab may not run commands on gpu")
	// On a remote session the toolkit runs there.
	out = ok(t, w.Run("exec", "web", `import os; (str(sh("echo $$")).strip() != str(os.getpid()), sh("hostname").strip() != "")`))
	assert.Contains(t, out, "(True, True)")
}
