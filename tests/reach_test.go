package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/sshtest"
)

// everyOp is a cell that tries each request on the session named target
// through a handle made by hand (so that open's own check does not stop
// the rest: a hostile host can send any frame) and prints, per request,
// "ok" or the error's text on one line.
func everyOp(target, dir string) string {
	return fmt.Sprintf(`H = type(session("web"))
t = H({"name": %[1]q})
tries = [
    ("call", lambda: t.call("len", b"abc")),
    ("put", lambda: t.put(planted=1)),
    ("get", lambda: t.get("secret")),
    ("push", lambda: t.push(b"planted", %[2]q)),
    ("pull", lambda: t.pull(%[3]q)),
    ("attach", lambda: session(%[1]q)),
    ("open-here", lambda: session("newloc", host="local")),
    ("kill", lambda: t.kill()),
]
for op, f in tries:
    try:
        f()
        print(op, "ok")
    except Exception as e:
        print(op, "|" + str(e).replace("\n", "\\n"))
`, target, filepath.Join(dir, "planted.txt"), filepath.Join(dir, "secret.txt"))
}

// opLines parses everyOp's output: op → "ok" or the error.
func opLines(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		op, rest, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		got[op] = strings.TrimPrefix(rest, "|")
	}
	return got
}

func TestReachRemoteToLocal(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	secret := filepath.Join(w.Dir, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("local secret"), 0o600))
	ok(t, w.Run("exec", "loc", "secret = 41"))
	ok(t, w.Run("exec", "web", "1", "--host", "lab"))
	ok(t, w.Run("exec", "peer", "here = 'peer'", "--host", "lab"))

	// Without config.json, every request on the local session is refused
	// with one line that names the key to set.
	refusal := func(name string) string {
		return fmt.Sprintf(`session 'web' on lab may not reach '%s' (local): add "reach": ["local"] for "lab" under "hosts" in %s`,
			name, w.Paths.ConfigFile())
	}
	out := ok(t, w.Run("exec", "web", everyOp("loc", w.Dir)))
	got := opLines(t, out)
	for _, op := range []string{"call", "put", "get", "push", "pull", "attach", "kill"} {
		assert.Equal(t, refusal("loc"), got[op], "%s\n%s", op, out)
	}
	assert.Equal(t, refusal("newloc"), got["open-here"], out)
	// The refusal reaches the user as the cell's error, too.
	r := w.Run("exec", "web", `session("loc").call("len", b"")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, refusal("loc"))

	// Nothing happened here: loc lives, untouched; no file landed; no
	// session was opened.
	assert.Contains(t, ok(t, w.Run("exec", "loc", "secret, 'planted' in globals()")), "(41, False)")
	assert.NoFileExists(t, filepath.Join(w.Dir, "planted.txt"))
	assert.NotContains(t, ok(t, w.Run("sessions")), "newloc")

	// The same host's sessions are reachable; a new session with no host
	// opens beside its opener; the listing holds only what web may reach.
	out = ok(t, w.Run("exec", "web", fmt.Sprintf(`p = session("peer")
p.put(v=5)
p.push(b"beside", %[1]q)
helper = session("helper")
(p.get("v", "here"), p.call("len", b"abcd"), p.pull(%[1]q), helper, sorted(s["name"] for s in sessions()))`,
		filepath.Join(w.Dir, "beside.txt"))))
	assert.Contains(t, out, "((5, 'peer'), 4, b'beside', <session 'helper' on lab, python ")
	assert.Contains(t, out, "['helper', 'peer', 'web'])")
	out = ok(t, w.Run("exec", "web", `session("helper").kill(); sorted(s["name"] for s in sessions())`))
	assert.Contains(t, out, "['peer', 'web']")

	// "local" names this machine for --host too.
	assert.Contains(t, ok(t, w.Run("exec", "loc", "secret", "--host", "local")), "41")
	assert.Contains(t, ok(t, w.Run("exec", "byname", "1", "--host", "local")), "[created session 'byname' (python ")
	ok(t, w.Run("kill", "byname"))

	// A local session still reaches the remote ones.
	out = ok(t, w.Run("exec", "loc", `r = session("peer"); r.put(fromloc=1); r.get("here", "fromloc"), session("web").call("len", b"xy")`))
	assert.Contains(t, out, "(('peer', 1), 2)")

	// "reach": ["local"] for the host's pattern lets it act on local
	// sessions; config.json is read per request, so no restart.
	w.WriteConfig(`{"hosts": {"l*b": {"reach": ["local"]}}}`)
	out = ok(t, w.Run("exec", "web", `l = session("loc")
l.put(planted=2)
(l.get("secret"), l.call("len", b"abc"), l.pull(`+fmt.Sprintf("%q", secret)+`), session("newloc", host="local"), len(sessions()))`))
	assert.Contains(t, out, "(41, 3, b'local secret', <session 'newloc' here, python ")
	assert.Contains(t, out, ", 4)", "loc, newloc, peer, web")
	ok(t, w.Run("exec", "web", `session("newloc").kill()`))
	assert.NotContains(t, ok(t, w.Run("sessions")), "newloc")

	// Revoked: refused again at once. A rule that sets "reach" is named in the advice.
	w.WriteConfig(`{"hosts": {"l*b": {"reach": ["gpu-*"]}}}`)
	r = w.Run("exec", "web", `session("loc").get("secret")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, fmt.Sprintf(`session 'web' on lab may not reach 'loc' (local): add "local" to the "reach" of "l*b" under "hosts" in %s`, w.Paths.ConfigFile()))

	// "*" reaches everything, kill included.
	w.WriteConfig(`{"hosts": {"lab": {"reach": ["*"]}}}`)
	got = opLines(t, ok(t, w.Run("exec", "web", everyOp("loc", w.Dir))))
	for _, op := range []string{"call", "put", "get", "push", "pull", "attach", "open-here", "kill"} {
		assert.Equal(t, "ok", got[op], op)
	}
	assert.NotRegexp(t, `(?m)^loc  pid`, ok(t, w.Run("sessions")), "web killed loc")
}

// A host reaches another host only when config.json says so.
func TestReachBetweenHosts(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"hostA", "hostB"}, sshtest.Options{})
	ok(t, w.Run("exec", "ra", "1", "--host", "hostA"))
	ok(t, w.Run("exec", "rb", "v = 7", "--host", "hostB"))
	r := w.Run("exec", "ra", `session("rb").get("v")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, fmt.Sprintf(`session 'ra' on hostA may not reach 'rb' (on hostB): add "reach": ["hostB"] for "hostA" under "hosts" in %s`, w.Paths.ConfigFile()))
	r = w.Run("exec", "ra", `session("rc", host="hostB")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "may not reach 'rc' (on hostB)")
	assert.NotContains(t, ok(t, w.Run("sessions")), "rc  on")

	w.WriteConfig(`{"hosts": {"host*": {"reach": ["host*"]}}}`)
	out := ok(t, w.Run("exec", "ra", `session("rb").get("v"), session("rc", host="hostB")`))
	assert.Contains(t, out, "(7, <session 'rc' on hostB, python ")
	// The grant is per host pattern and one way: hostB may reach hostA,
	// but neither reaches this machine.
	ok(t, w.Run("exec", "loc", "1"))
	r = w.Run("exec", "rb", `session("loc")`)
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, `may not reach 'loc' (local): add "local" to the "reach" of "host*"`)
}

// A session on a host may not open a session elsewhere by its name
// NAME@HOST, nor have the hub remember a group on hosts it may not reach:
// the user's next exec of that name would run there.
func TestReachImpliedHostAndGroups(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	ok(t, w.Run("exec", "web", "1", "--host", "lab"))

	out := ok(t, w.Run("exec", "web", `try:
    session("pwn@local")
    print("opened")
except Exception as e:
    print("|" + str(e))
`))
	assert.Contains(t, out, "|session 'web' on lab may not reach 'pwn@local' (local)")
	assert.NotContains(t, ok(t, w.Run("sessions")), "pwn@local", "nothing was started")

	out = ok(t, w.Run("exec", "web", `g = sessions_on(["db-prod"], name="deploy"); repr(g)`))
	assert.Contains(t, out, "1 could not be opened: db-prod")
	r := w.Run("exec", "deploy", "1")
	assert.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout+r.Stderr, "db-prod", "the refused request defined no group")
	assert.Contains(t, r.Stdout, "[created session 'deploy' (python ")
}

// A jump host is one more host the hub logs in to, and dials from, for
// the session that names it: a session on a host may open a session
// through jump hosts only that it may reach.
func TestReachJumpHosts(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab", "other"}, plainLogin(t))
	ok(t, w.Run("exec", "h", "1", "--host", "lab"))
	refusal := func(name, jump string) string {
		return fmt.Sprintf(`session 'h' on lab may not open '%s' through %s: add "reach": [%q] for "lab" under "hosts" in %s`,
			name, jump, jump, w.Paths.ConfigFile())
	}
	for _, c := range []struct{ name, jump string }{{"x", "other"}, {"y", "other:25"}, {"z", "127.0.0.1:1"}} {
		r := w.Run("exec", "h", fmt.Sprintf(`session(%q, host="lab", jump=[%q])`, c.name, c.jump))
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, refusal(c.name, c.jump))
		// A group's members too.
		r = w.Run("exec", "h", fmt.Sprintf(`sessions_on("lab", "g%s", jump=[%q])`, c.name, c.jump))
		assert.Contains(t, r.Stdout, "<group 'g"+c.name+"' on 0 hosts; 1 could not be opened: lab>", "%s", r)
	}
	assert.NotRegexp(t, `(?m)^(x|y|z|g.*)  `, ok(t, w.Run("sessions")))

	// Its own host as a jump, and one that config.json lets it reach.
	w.WriteConfig(`{"hosts": {"lab": {"reach": ["other"]}}}`)
	assert.Contains(t, ok(t, w.Run("exec", "h", `session("x", host="lab", jump=["other"])`)), "<session 'x' on lab via other, python ")
	assert.Contains(t, ok(t, w.Run("exec", "h", `session("v", host="other", jump=["lab"])`)), "<session 'v' on other via lab, python ")
}
