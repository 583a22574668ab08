package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/nodeset"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// labWorld is a hub whose ssh_config names 32 hosts, lab-1 … lab-32, all
// on loopback: lab-1 … lab-30 are the ports of two real sshd's (15 each),
// lab-31 and lab-32 ports nothing listens on. lab-slow is a relay to
// lab-3's sshd, which a test makes hold connections.
//
// The lab's user logs in to a HOME of its own without rc files, with this
// machine's Python first on PATH (plainLogin): thirty real hosts each run
// their own rc files at once, but thirty logins into this machine's one
// HOME would queue behind each other on whatever the rc files lock
// (pyenv's rehash takes a lock, and each waits its turn: 60 s for 30).
type labWorld struct {
	*hubtest.Env
	ports map[string]int
	slow  *sshtest.Relay
}

func newLabWorld(t *testing.T) *labWorld {
	t.Helper()
	home, username, key := sshHome(t)
	w := &labWorld{ports: map[string]int{}}
	var known []string
	o := plainLogin(t)
	o.Authorized, o.MorePorts = []string{key.Public}, 14
	for i := 0; i < 2; i++ {
		s := sshtest.Start(t, o)
		for _, p := range s.Ports {
			w.ports[fmt.Sprintf("lab-%d", len(w.ports)+1)] = p
			known = append(known, s.KnownHostsLineAt(p))
		}
		if i == 0 {
			w.slow = sshtest.NewRelay(t, fmt.Sprintf("127.0.0.1:%d", w.ports["lab-3"]))
			known = append(known, s.KnownHostsLineAt(w.slow.Port))
		}
	}
	require.Len(t, known, 31)
	w.ports["lab-31"], w.ports["lab-32"] = sshtest.FreePort(t), sshtest.FreePort(t)
	var cfg []string
	for i := 1; i <= 32; i++ {
		alias := fmt.Sprintf("lab-%d", i)
		cfg = append(cfg, hostEntry(alias, w.ports[alias], username))
	}
	cfg = append(cfg, hostEntry("lab-slow", w.slow.Port, username))
	w.Env = sshEnv(t, home, cfg, known)
	// Swapping 30 sessions at the hub's stop would only slow the test.
	w.WriteConfig(`{"groups": {"lab": ["lab-[1-32]"], "few": ["lab-[1-3]", "lab-31"]}, "swap_after_hours": 0, "linger": 0}`)
	return w
}

// portCell binds port to the sshd port the session came in on: which
// lab host it runs on.
const portCell = `import os; port = int(os.environ["SSH_CONNECTION"].split()[3])`

func TestFanout(t *testing.T) {
	t.Parallel()
	w := newLabWorld(t)
	bad := w.ports["lab-7"]
	cell := fmt.Sprintf("%s\nif port == %d: raise ValueError('bad host')\nprint('hello from the lab')\n'ok'", portCell, bad)

	t.Run("grouped", func(t *testing.T) {
		start := time.Now()
		// 32 sshd logins and Python starts at once: a loaded machine
		// takes more than exec's default 30 s.
		r := w.Run("exec", "probe", cell, "--hosts", "@lab", "-t", "240")
		t.Logf("first exec on 32 hosts: %s", time.Since(start))
		assert.Equal(t, 2, r.Code, "a host that could not run it is worse than one that raised: %s", r)
		assert.Contains(t, r.Stdout, "[group 'probe' on 32 hosts: 29 ok, 1 raised, 2 could not run; created 30 sessions probe@HOST]\n")
		assert.Contains(t, r.Stdout, "-\nlab-[1-6,8-30] (29)\n---")
		assert.Contains(t, r.Stdout, "-\nhello from the lab\nOut[1]: 'ok'\n")
		assert.Regexp(t, `(?s)-\nlab-7 \(1\)\n-+\nTraceback .*ValueError: bad host\n`, r.Stdout)
		assert.Contains(t, r.Stdout, "failed on 3 of 32 hosts:\n")
		assert.Contains(t, r.Stdout, "  lab-7: raised ValueError: bad host\n")
		assert.Regexp(t, `\n  lab-31: could not run: .*connection refused`, r.Stdout)
		assert.Regexp(t, `\n  lab-32: could not run: .*connection refused`, r.Stdout)
		assert.Empty(t, r.Stderr, "no progress line off a terminal")

		l := w.Run("sessions", "probe")
		assert.Regexp(t, `(?m)^probe@lab-12  on lab-12  pid \d+  python 3\.`, l.Stdout)
		assert.Equal(t, 30, strings.Count(l.Stdout, "\nprobe@lab-")+1, "the group's sessions: %s", l.Stdout)
	})

	t.Run("json", func(t *testing.T) {
		r := w.Run("exec", "probe", "port", "--json")
		require.Equal(t, 2, r.Code, "%s", r)
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		require.Len(t, lines, 32)
		seen := map[string]bool{}
		for _, line := range lines {
			var h wire.HostResult
			require.NoError(t, json.Unmarshal([]byte(line), &h), line)
			seen[h.Host] = true
			assert.Equal(t, "probe@"+h.Host, h.Session)
			switch h.Host {
			case "lab-31", "lab-32":
				assert.Equal(t, wire.StatusFailed, h.Status)
				assert.Contains(t, h.Failure, "connection refused")
			default:
				assert.Equal(t, wire.StatusOK, h.Status, line)
				require.NotNil(t, h.Value, line)
				assert.Equal(t, fmt.Sprint(w.ports[h.Host]), *h.Value, "each host's own state: %s", line)
				assert.Equal(t, 2, h.Cell)
			}
		}
		assert.Len(t, seen, 32)
	})

	t.Run("again without hosts", func(t *testing.T) {
		// Two answers, by the parity of each host's port.
		r := w.Run("exec", "probe", "port % 2")
		require.Equal(t, 2, r.Code, "%s", r)
		var odd, even []string
		for host, p := range w.ports {
			if host == "lab-31" || host == "lab-32" {
				continue
			}
			if p%2 == 1 {
				odd = append(odd, host)
			} else {
				even = append(even, host)
			}
		}
		for _, hs := range [][]string{odd, even} {
			if len(hs) > 0 {
				assert.Contains(t, r.Stdout, fmt.Sprintf("\n%s (%d)\n", nodeset.Fold(hs), len(hs)))
			}
		}
		assert.Contains(t, r.Stdout, "Out[3]: 1\n")
		assert.Contains(t, r.Stdout, "[group 'probe' on 32 hosts: 30 ok, 2 could not run]\n")
		// One of them alone, by its name.
		r = w.Run("exec", "probe@lab-3", "port")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, fmt.Sprintf("Out[4]: %d\n", w.ports["lab-3"]), r.Stdout)
	})

	// From here on the group is redefined on a few hosts at a time: their
	// sessions are up, so nothing waits for a start.
	t.Run("slow host, wait and interrupt", func(t *testing.T) {
		slow := fmt.Sprintf("import time\nif port == %d: time.sleep(60)\nport", w.ports["lab-2"])
		r := w.Run("exec", "probe", slow, "--hosts", "lab-[1-3]", "-t", "3")
		require.Equal(t, 3, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[group 'probe' on 3 hosts: 2 ok, 1 still running]")
		assert.Contains(t, r.Stdout, "  lab-2: timed out: the cell still runs (`replhub wait probe` collects it)\n")
		r = w.Run("interrupt", "probe")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "lab-2: interrupted cell 4 of session 'probe@HOST' (KeyboardInterrupt raised in it); `replhub wait probe")
		assert.Contains(t, r.Stdout, "lab-[1,3]: session 'probe@HOST' is idle: nothing to interrupt")
		r = w.Run("wait", "probe")
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "KeyboardInterrupt")
		assert.Contains(t, r.Stdout, "lab-2: raised KeyboardInterrupt")
	})

	t.Run("group cells", func(t *testing.T) {
		// lab-3 ran a cell alone, so the group's cells have other numbers
		// there; the reply says which, and wait takes the group's.
		r := w.Run("exec", "probe", "port", "--no-wait")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[group cell 5 is cell 6 on lab-3]\n")
		r = w.Run("wait", "probe", "--cell", "5")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[group cell 5 is cell 6 on lab-3]\n")
		assert.Contains(t, r.Stdout, fmt.Sprintf("Out[5]: %d\n", w.ports["lab-1"]))
		assert.Contains(t, r.Stdout, fmt.Sprintf("Out[6]: %d\n", w.ports["lab-3"]))
		r = w.Run("exec", "probe", "port + 1", "--json")
		require.Equal(t, 0, r.Code, "%s", r)
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var h wire.HostResult
			require.NoError(t, json.Unmarshal([]byte(line), &h), line)
			assert.Equal(t, 6, h.GroupCell, line)
			assert.Equal(t, map[bool]int{true: 7, false: 6}[h.Host == "lab-3"], h.Cell, line)
		}
		r = w.Run("interrupt", "probe", "--cell", "6")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "lab-3: cell 7 of session 'probe@HOST' has finished: nothing to interrupt\n", "interrupt maps it too")
		r = w.Run("wait", "probe", "--cell", "99")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "group 'probe' has no cell 99 on record (this hub knows its cells 1 to 6)")
		assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), "one line: %s", r.Stderr)
	})

	t.Run("slow connection", func(t *testing.T) {
		// lab-slow takes the connection and says nothing: the reply does
		// not wait for ssh's own limits, and wait tells how it went.
		w.slow.Hold()
		start := time.Now()
		r := w.Run("exec", "probe", portCell+"\nport", "--hosts", "lab-[1-3],lab-slow", "-t", "3")
		took := time.Since(start)
		require.Equal(t, 3, r.Code, "%s", r)
		assert.Less(t, took, 9*time.Second, "bounded by -t: %s", r)
		assert.Contains(t, r.Stdout, "[group 'probe' on 4 hosts: 3 ok, 1 still connecting]\n")
		assert.Contains(t, r.Stdout, "\n  lab-slow: still connecting: ")
		r = w.Run("wait", "probe", "-t", "1")
		assert.Equal(t, 3, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "\n  lab-slow: still connecting: ")
		// Once the host answers, the session starts and its cell runs.
		w.slow.Release()
		r = w.Run("wait", "probe", "-t", "30")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "\nlab-slow (1)\n")
		assert.Contains(t, r.Stdout, fmt.Sprintf("\nOut[1]: %d\n", w.ports["lab-3"]))
		r = w.Run("kill", "probe@lab-slow")
		require.Equal(t, 0, r.Code, "%s", r)

		// A start that fails after the reply is told by wait. (The drop
		// ends the connection the hub keeps to lab-slow.)
		w.slow.Drop()
		w.slow.Restore()
		w.slow.Hold()
		r = w.Run("exec", "late", "1", "--hosts", "lab-slow", "-t", "2")
		require.Equal(t, 3, r.Code, "%s", r)
		w.slow.Drop()
		defer w.slow.Restore()
		r = w.Run("wait", "late", "-t", "20")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Regexp(t, `\n  lab-slow: could not run: `, r.Stdout)
	})

	t.Run("mcp", func(t *testing.T) {
		cs := mcpSession(t, w.Env, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		text, isErr := callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{
			"name": "probe", "code": "import platform; platform.system()", "hosts": "@few"}})
		assert.True(t, isErr, "a host that could not run it: %s", text)
		assert.Contains(t, text, "[group 'probe' on 4 hosts: 3 ok, 1 could not run]\n")
		assert.Contains(t, text, "\nlab-[1-3] (3)\n")
		assert.Contains(t, text, "Out: 'Linux'\n", "the hosts' cells have other numbers")
		assert.Regexp(t, `\n  lab-31: could not run: `, text)
		text, isErr = callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{
			"name": "probe", "code": "print('x' * 30000)"}})
		assert.True(t, isErr)
		assert.LessOrEqual(t, len(text), 10000, "a reply is bounded like any other")
		assert.Contains(t, text, "characters of this reply left out")
		text, _ = callText(t, ctx, cs, &sdk.CallToolParams{Name: "wait", Arguments: map[string]any{"name": "probe"}})
		assert.Contains(t, text, "\nlab-[1-3] (3)\n")
		assert.Contains(t, text, "[idle: nothing to collect]")
	})

	t.Run("in a session", func(t *testing.T) {
		code := `g = sessions_on(["lab-[1-3]", "lab-31"], name="probe")
g.put("k", 5)
got = g.get("k")
pairs = g.call("divmod", 7, 2)
bad = g.call("int", "x")
[repr(g), sorted(got.items())[:3], pairs["lab-2"], type(got["lab-31"]).__name__, type(bad["lab-1"]).__name__, "invalid literal" in str(bad["lab-3"])]`
		r := w.Run("exec", "driver", code, "-t", "120")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, `"<group 'probe' on 3 hosts; 1 could not be opened: lab-31>", [('lab-1', 5), ('lab-2', 5), ('lab-3', 5)], (3, 1), 'HubError', 'HubError', True]`)
		// Each session's transcript records what it served.
		b, err := os.ReadFile(w.Paths.Transcript("probe@lab-2"))
		require.NoError(t, err)
		assert.Contains(t, string(b), "call from 'driver'")
		// From a session on a host: the group's side comes late over the
		// link, and reach is checked for each host.
		r = w.Run("exec", "probe@lab-3", `g = sessions_on("lab-[3-4]", name="far"); (repr(g), "may not reach" in str(g.get("k")["lab-4"]))`, "-t", "120")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, `("<group 'far' on 1 host; 1 could not be opened: lab-4>", True)`)
		// The command line's group is still the one the user defined (over
		// MCP above, on the same hosts): a session's request never redefines it.
		r = w.Run("exec", "probe", "k + 1")
		assert.Contains(t, r.Stdout, "[group 'probe' on 4 hosts: 3 ok, 1 could not run]\n")
		assert.Contains(t, r.Stdout, "Out: 6\n")
	})

	t.Run("progress on a terminal", func(t *testing.T) {
		script, err := exec.LookPath("script")
		if err != nil {
			t.Skip("needs script (util-linux)")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, "-qefc", w.Bin+" exec probe 'import time; time.sleep(1.5); 1' --hosts lab-[1-2],lab-31", "/dev/null")
		cmd.Env, cmd.Dir = w.Vars, w.Cwd
		out, _ := cmd.CombinedOutput()
		assert.Regexp(t, regexp.MustCompile(`probe: [0-2]/3 done`), string(out))
		assert.Contains(t, string(out), "lab-[1-2] (2)")

		// The group's name alone is a plain exec, which package early's
		// init sends: it draws the progress before any of replhub's
		// packages is initialized (package cli prints the group's reply).
		// The members' output is not streamed: it is the group's reply's,
		// shown once in its block.
		cmd = exec.CommandContext(ctx, script, "-qefc", w.Bin+" exec probe 'import time; print(\"hi from a member\"); time.sleep(1.5); 2'", "/dev/null")
		cmd.Env, cmd.Dir = append(slices.Clone(w.Vars), "GODEBUG=inittrace=1"), w.Cwd
		out, _ = cmd.CombinedOutput()
		drawn := regexp.MustCompile(`probe: [0-2]/3 done`).FindIndex(out)
		require.NotNil(t, drawn, "%s", out)
		inits := strings.Index(string(out), "init github.com/replhub/replhub/")
		assert.Less(t, drawn[0], inits, "%s", out)
		assert.Contains(t, string(out), "lab-[1-2] (2)")
		assert.Equal(t, 1, strings.Count(string(out), "hi from a member"), "%s", out)
		assert.Regexp(t, `lab-\[1-2\] \(2\)\r?\n(.*\n)*hi from a member`, string(out))
	})

	t.Run("kill", func(t *testing.T) {
		r := w.Run("kill", "probe")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "lab-31: no session 'probe@HOST'\nlab-[1-2]: killed session 'probe@HOST'\ngroup 'probe' is forgotten\n", r.Stdout)
		l := w.Run("sessions", "probe")
		assert.NotContains(t, l.Stdout, "probe@lab-1 ")
		assert.Contains(t, l.Stdout, "probe@lab-3 ")
		// What is left of the group is found again by its sessions' names.
		r = w.Run("exec", "probe", "1")
		assert.Contains(t, r.Stdout, "[group 'probe' on 28 hosts: 28 ok]\n")
		assert.Contains(t, r.Stdout, "\nlab-[3-30] (28)\n")
	})

	t.Run("no host could run it", func(t *testing.T) {
		// A group none of whose sessions started is not kept: its name is
		// free for a single session.
		r := w.Run("exec", "ghost", "1", "--hosts", "lab-[31-32]")
		require.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "2 could not run")
		r = w.Run("exec", "ghost", "1")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[created session 'ghost' (")
		assert.NotContains(t, r.Stdout, "lab-")
		require.Equal(t, 0, w.Run("kill", "ghost").Code)
	})
}

func TestFanoutRefusals(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.WriteConfig(`{"groups": {"g": ["@g"]}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hosts", "lab-[1-5000]"}, "more than 1024 hosts"},
		{[]string{"--hosts", "@nope"}, "no group @nope"},
		{[]string{"--hosts", "@g"}, "nest deeper"},
		{[]string{"--hosts", "me@lab-1"}, "use host names or ssh_config aliases"},
		{[]string{"--hosts", "lab-[1-3"}, "without its ]"},
		{[]string{"--hosts", "a", "--host", "b"}, "--host and --hosts do not go together"},
	} {
		r := e.Run(append([]string{"exec", "x", "1"}, tc.args...)...)
		assert.Equal(t, 2, r.Code, "%v: %s", tc.args, r)
		assert.Contains(t, r.Stderr, tc.want, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), "one line: %s", r.Stderr)
	}
	r := e.Run("exec", "solo", "1")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("exec", "solo", "1", "--hosts", "lab-1")
	assert.Contains(t, r.Stderr, "'solo' is a single session")
	r = e.Run("exec", "solo@lab-1", "1", "--hosts", "lab-2")
	assert.Contains(t, r.Stderr, "a group's name has no @")
	r = e.Run("exec", "solo@lab-1", "1", "--host", "lab-2")
	assert.Contains(t, r.Stderr, "runs on lab-1, as its name says")
	hosts := []string{"n10", "n9", "n1"}
	sort.Strings(hosts)
	assert.Equal(t, "n[1,9-10]", nodeset.Fold(hosts))
}
