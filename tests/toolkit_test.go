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
	t.Parallel()
	pythons(t, func(t *testing.T, py string) {
		e := hubtest.Start(t)
		dir := t.TempDir()
		e.Setenv("REPLHUB_MEMORY_DIR", filepath.Join(dir, "memory"))
		out := ok(t, e.Run("exec", "tk", fmt.Sprintf("cd(%q)", dir), "--python", py))
		assert.Contains(t, out, "cwd: "+dir)
		out = ok(t, e.Run("exec", "tk", `r = sh("echo out; echo err >&2", check=False); r`))
		assert.Contains(t, out, "out\n[stderr]\nerr\n")
		assert.NotContains(t, out, "Out[")
		out = ok(t, e.Run("exec", "tk", `(r.upper(), r.code, r.ok)`))
		assert.Contains(t, out, "('OUT\\n', 0, True)", "a result stays a str")
		r := e.Run("exec", "tk", `sh("exit 3")`)
		assert.Contains(t, r.Stdout, "CommandError: sh: exit 3")
		assert.NotContains(t, r.Stdout, "replhub_toolkit/", "the toolkit's frames are left out")
		out = ok(t, e.Run("exec", "tk", `try:
    sh(["no-such-command-here"])
except CommandError as e:
    print("caught:", e)`))
		assert.Contains(t, out, "caught: sh: no such command: no-such-command-here")
		out = ok(t, e.Run("exec", "tk", "tkhelp()"))
		for _, h := range []string{"read", "readn", "write", "edit", "edits", "sed", "splice", "insert", "glob", "grep",
			"diff", "sh", "bg", "sudo", "fetch", "cd", "memory", "tkhelp"} {
			assert.Regexp(t, `(?m)^`+h+` `, out)
		}
		// The file helpers and memory, where the data is.
		out = ok(t, e.Run("exec", "tk", `write("notes.txt", "alpha\nbeta\n")`))
		assert.Contains(t, out, "wrote 2 lines (11 bytes) to notes.txt")
		out = ok(t, e.Run("exec", "tk", `edit("notes.txt", "beta", "gamma")`))
		assert.Contains(t, out, "-beta\n+gamma\n")
		out = ok(t, e.Run("exec", "tk", `readn("notes.txt")`))
		assert.Contains(t, out, "     1\talpha\n     2\tgamma\n")
		out = ok(t, e.Run("exec", "tk", `(read("notes.txt"), grep("gam", "."), glob("*.txt"))`))
		assert.Contains(t, out, `('alpha\ngamma\n', ['notes.txt:2:gamma'], ['notes.txt'])`)
		r = e.Run("exec", "tk", `edit("notes.txt", "zeta", "x")`)
		assert.Contains(t, r.Stdout, "edit: ")
		assert.Contains(t, r.Stdout, "not found")
		b, err := os.ReadFile(filepath.Join(dir, "notes.txt"))
		require.NoError(t, err)
		assert.Equal(t, "alpha\ngamma\n", string(b), "a refused edit writes nothing")
		out = ok(t, e.Run("exec", "tk", `memory.write("build", "make -j8", index="how to build"); memory()`))
		assert.Contains(t, out, "build.md  how to build")
		b, err = os.ReadFile(filepath.Join(dir, "memory", "MEMORY.md"))
		require.NoError(t, err)
		assert.Contains(t, string(b), "build.md")
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
	t.Parallel()
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
	assert.True(t, hubtest.WaitGone(slow, 5*time.Second), "the job ended with its worker")
	assert.True(t, hubtest.WaitGone(left, 5*time.Second), "what sh left running ended with its worker")
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
	t.Parallel()
	w := newSSHWorld(t, []string{"lab", "gpu"}, sshtest.Options{})
	out := ok(t, w.Run("exec", "loc", `r = sh("pwd; echo $GREETING; cat; echo oops >&2", host="lab", cwd="/tmp", env={"GREETING": "hi there"}, input="from stdin\n", check=False); r`))
	assert.Contains(t, out, "/tmp\nhi there\nfrom stdin\n[stderr]\noops")
	out = ok(t, w.Run("exec", "loc", `sh(["printf", "%s|", "a'b", "$HOME"], host="lab")`))
	assert.Contains(t, out, "a'b|$HOME|", "an argv runs with no shell")
	r := w.Run("exec", "loc", `sh("exit 4", host="lab")`)
	assert.Contains(t, r.Stdout, "CommandError: sh: exit 4")
	t0 := time.Now()
	r = w.Run("exec", "loc", `sh("sleep 30", host="lab", timeout=1)`)
	assert.Contains(t, r.Stdout, "CommandTimeout: sh on lab: no end within")
	out = ok(t, w.Run("exec", "loc", `try:
    sh("true", host="no-such-host.invalid")
except CommandError as e:
    print("caught:", e)`))
	assert.Contains(t, out, "caught: sh")
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

// A root session (the fake sudo) and a session on a host have the same
// toolkit, working where they run.
func TestToolkitAsRootAndRemote(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	f := newFakeSudo(t, fakePassword, fakePassword)
	f.apply(e, "nopasswd")
	dir := t.TempDir()
	out := ok(t, e.Run("exec", "op", fmt.Sprintf(`write(%q, "root wrote\n"); (read(%q), str(sh("echo $0")).strip())`,
		filepath.Join(dir, "r.txt"), filepath.Join(dir, "r.txt")), "--sudo"))
	assert.Contains(t, out, "('root wrote\\n', 'bash')")

	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	out = ok(t, w.Run("exec", "far", `import os, tempfile
d = tempfile.mkdtemp()
write(os.path.join(d, "x.py"), "def f():\n    return 1\n")
edit(os.path.join(d, "x.py"), "return 1", "return 2")
(grep("return", d, type="py"), sh("cat x.py", cwd=d).count("return 2"))`, "--host", "lab"))
	assert.Regexp(t, `\(\['/tmp/[^']+/x\.py:2:    return 2'\], 1\)`, out)
}
