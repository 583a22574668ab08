package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// Every replhub process, a one-line CLI call too, runs the init of every
// package in the binary: what only the hub, the MCP server or a remote
// start needs (a compiled pattern, an embedded file's hash) is made at its
// first use, so that each of replhub's packages allocates next to nothing
// at init. Counts, not times: they do not depend on the machine's load.
func TestCLIInitIsCheap(t *testing.T) {
	cmd := exec.Command(hubtest.Binary(t), "--help")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	line := regexp.MustCompile(`^init (github\.com/replhub/replhub/\S+) @.*, (\d+) bytes, (\d+) allocs$`)
	seen := 0
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		seen++
		bytes, _ := strconv.Atoi(m[2])
		allocs, _ := strconv.Atoi(m[3])
		assert.LessOrEqual(t, allocs, 100, "%s allocates %d times at init: build it at its first use (sync.OnceValue, internal/lazyre)", m[1], allocs)
		assert.LessOrEqual(t, bytes, 16<<10, "%s allocates %d bytes at init: build it at its first use", m[1], bytes)
	}
	assert.Greater(t, seen, 3, "no init trace of replhub's packages in:\n%s", out)
}

// The binary links no package whose init builds a table every process
// pays for and that replhub can do without: x/net/html's entities were a
// tenth of a warm exec's page faults (hub.HTMLText reads HTML itself);
// runtime/metrics's descriptions of every GODEBUG setting cost a warm
// exec 1.3 ms (the hub reads its heap with runtime.ReadMemStats).
func TestNoCostlyInitIsLinked(t *testing.T) {
	cmd := exec.Command(hubtest.Binary(t), "--help")
	cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	run := initsRun(string(out))
	require.True(t, run["github.com/replhub/replhub/hub"], "no init trace in:\n%s", out)
	for _, p := range []string{"golang.org/x/net/html", "runtime/metrics"} {
		assert.False(t, run[p], "%s is linked again, and its init runs in every replhub process", p)
	}
}

// heavyInits are packages whose init only the hub, the MCP server, ssh or
// cobra need; a plain exec must end before any of them runs.
var heavyInits = []string{
	"github.com/modelcontextprotocol/go-sdk/mcp", "github.com/google/jsonschema-go/jsonschema",
	"golang.org/x/crypto/ssh", "net/http", "crypto/x509", "github.com/spf13/cobra",
}

// initsRun lists the packages whose init ran, from GODEBUG=inittrace=1's
// lines on stderr.
func initsRun(stderr string) map[string]bool {
	run := map[string]bool{}
	for _, l := range strings.Split(stderr, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "init" {
			run[f[1]] = true
		}
	}
	return run
}

// assertEarly checks that a call ended in package early's init: the
// trace has the runtime's first inits, and none of replhub's packages'
// nor of those early waits for no longer (net, encoding/gob: see
// internal/lean's doc).
func assertEarly(t *testing.T, stderr string) {
	t.Helper()
	run := initsRun(stderr)
	require.True(t, run["os"], "no init trace: %s", stderr)
	for p := range run {
		assert.False(t, strings.HasPrefix(p, "github.com/replhub/replhub/"), "%s's init ran", p)
	}
	for _, p := range append([]string{"net", "encoding/gob", "compress/flate"}, heavyInits...) {
		assert.False(t, run[p], "%s's init ran", p)
	}
}

// A plain `replhub exec NAME CODE` (CODE - for stdin), with -t,
// --max-output, --no-wait, --queue or not, whose output goes to a program
// runs from package early's init, before the inits of what only the hub,
// MCP and ssh need; the same call with another flag goes through cobra,
// and all print and exit alike.
func TestPlainExecSkipsHeavyInits(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	require.Equal(t, 0, e.Run("exec", "s", "x = 1", "--python", newer).Code)
	e.Setenv("GODEBUG", "inittrace=1")
	for _, c := range []struct {
		code, stdin, out string
		exit             int
	}{{"x + 1", "", "", 0}, {"-", "x + 1", "", 0}, {"print('hi'); 1/0", "", "hi\n", 1}} {
		plain := e.RunInput(c.stdin, "exec", "s", c.code)
		timed := e.RunInput(c.stdin, "exec", "-t", "20", "s", c.code)
		flagged := e.RunInput(c.stdin, "exec", "s", c.code, "--fanout", "4")
		for _, r := range []hubtest.Result{plain, timed, flagged} {
			assert.Equal(t, c.exit, r.Code, "%s", r)
		}
		assertEarly(t, plain.Stderr)
		assertEarly(t, timed.Stderr)
		assert.Equal(t, regexp.MustCompile(`\d+`).ReplaceAllString(plain.Stdout, "N"), regexp.MustCompile(`\d+`).ReplaceAllString(timed.Stdout, "N"))
		for _, p := range heavyInits {
			assert.True(t, initsRun(flagged.Stderr)[p], "exec with a flag did not run %s's init: is it still in the binary?", p)
		}
		if c.exit == 0 {
			assert.Regexp(t, `^Out\[\d+\]: 2\n$`, plain.Stdout)
			assert.Equal(t, regexp.MustCompile(`\d+`).ReplaceAllString(plain.Stdout, "N"), regexp.MustCompile(`\d+`).ReplaceAllString(flagged.Stdout, "N"))
		} else {
			for _, r := range []hubtest.Result{plain, flagged} {
				assert.True(t, strings.HasPrefix(r.Stdout, c.out), "%s", r)
				assert.Contains(t, r.Stdout, "ZeroDivisionError")
			}
		}
	}
	// --max-output reaches the hub from early's init, as through cobra.
	capped := e.Run("exec", "s", `print("a" * 500 + "z" * 500)`, "--max-output", "100")
	require.Equal(t, 0, capped.Code, "%s", capped)
	assertEarly(t, capped.Stderr)
	assert.Equal(t, strings.Repeat("a", 50)+"\n[... 901 characters left out ...]\n"+strings.Repeat("z", 49)+"\n", capped.Stdout)
	viaCobra := e.Run("exec", "s", `print("a" * 500 + "z" * 500)`, "--max-output", "100", "--fanout", "4")
	assert.Equal(t, capped.Stdout, viaCobra.Stdout)
	// --no-wait and --queue too: a cell started, one queued behind it.
	started := e.Run("exec", "s", "import time; time.sleep(1)", "--no-wait")
	queued := e.Run("exec", "s", "x + 2", "--queue")
	for _, r := range []hubtest.Result{started, queued} {
		assert.Equal(t, 0, r.Code, "%s", r)
		assertEarly(t, r.Stderr)
	}
	assert.Regexp(t, `^\[cell \d+ started: `, started.Stdout)
	m := regexp.MustCompile(`^\[cell (\d+) queued, `).FindStringSubmatch(queued.Stdout)
	require.NotNil(t, m, "%s", queued)
	assert.Regexp(t, `Out\[\d+\]: 3\n$`, e.Run("wait", "s", "--cell", m[1]).Stdout)
	// A new session, made from early's init too, in the caller's folder.
	fresh := e.Run("exec", "fresh", "import os; os.getcwd()")
	require.Equal(t, 0, fresh.Code, "%s", fresh)
	assertEarly(t, fresh.Stderr)
	assert.Contains(t, fresh.Stdout, "[created session 'fresh'")
	assert.Contains(t, fresh.Stdout, "Out[1]: '"+e.Cwd+"'")
	// --json too, printing what the whole command line prints (numbers
	// aside: cell numbers, durations).
	asJSON := e.Run("exec", "s", "x + 1", "--json")
	whole := e.Run("exec", "s", "x + 1", "--json", "--fanout", "4")
	require.Equal(t, 0, asJSON.Code, "%s", asJSON)
	assertEarly(t, asJSON.Stderr)
	number := regexp.MustCompile(`-?\d+(\.\d+)?(e-?\d+)?`)
	assert.Equal(t, number.ReplaceAllString(whole.Stdout, "N"), number.ReplaceAllString(asJSON.Stdout, "N"))
	assert.Contains(t, asJSON.Stdout, `"value": "2"`)
	// -t reaches the hub: a longer cell is left running (exit 3) once it
	// is up.
	t0 := time.Now()
	slow := e.Run("exec", "fresh", "import time; time.sleep(8)", "-t", "0.5")
	assert.Equal(t, 3, slow.Code, "%s", slow)
	assert.Less(t, time.Since(t0), 5*time.Second)
	assert.Contains(t, slow.Stdout, "still running after 0.5s", "%s", slow)
	assertEarly(t, slow.Stderr)
	e.Run("interrupt", "fresh")
	// An error of replhub's own: the same line, the same exit code.
	for _, args := range [][]string{{"exec", "s/x", "1"}, {"exec", "s/x", "1", "-t", "30"}, {"exec", "s/x", "1", "--max-output", "10000"}, {"exec", "s/x", "1", "--fanout", "4"}} {
		r := e.Run(args...)
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "\nreplhub: ", "%s", r)
	}
}

// A plain `replhub run CODE` (CODE - for stdin), with exec's flags but
// --no-wait and --queue, runs from package early's init too, and prints
// and exits as the same run through cobra (with `--` before CODE, which
// early leaves to it): a value in the caller's folder, stdin, a cell that
// raises, a session that dies, the timeout, --json, --max-output and
// --python; and leaves nothing behind. A run with --transcript, which
// early does not take, goes through cobra.
func TestPlainRunSkipsHeavyInits(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("start").Code)
	e.Setenv("GODEBUG", "inittrace=1")
	// What differs from run to run: its session's name, numbers.
	same := func(s string) string {
		return regexp.MustCompile(`-?\d+(\.\d+)?(e-?\d+)?`).ReplaceAllString(regexp.MustCompile(`run-[0-9a-f]{16}`).ReplaceAllString(s, "RUN"), "N")
	}
	for _, c := range []struct {
		stdin string
		flags []string
		code  string
		exit  int
		out   string
	}{
		{"", nil, "import os; os.getcwd()", 0, "Out[1]: '" + e.Cwd + "'\n"},
		{"x = 6\nx * 7\n", nil, "-", 0, "Out[1]: 42\n"},
		{"", nil, "print('hi'); 1/0", 1, "hi\n"},
		{"", nil, "import os; os._exit(3)", 4, "[session 'run-"},
		{"", []string{"-t", "0.5"}, "import time; time.sleep(30)", 3, "[cell still running after 0.5s, so the run stopped it"},
		{"", []string{"--json"}, "1 + 1", 0, "{\n"},
		{"", []string{"--max-output", "100"}, "print('a' * 500 + 'z' * 500)", 0, strings.Repeat("a", 50) + "\n[... 901 characters left out ...]\n"},
		{"", []string{"--python", newer, "--timeout=20"}, "import sys; sys.executable", 0, "Out[1]: "},
	} {
		args := append(append([]string{"run"}, c.flags...), c.code)
		plain := e.RunInput(c.stdin, args...)
		viaCobra := e.RunInput(c.stdin, append(append([]string{"run"}, c.flags...), "--", c.code)...)
		assert.Equal(t, c.exit, plain.Code, "%s", plain)
		assert.Equal(t, c.exit, viaCobra.Code, "%s", viaCobra)
		assertEarly(t, plain.Stderr)
		assert.True(t, initsRun(viaCobra.Stderr)["github.com/spf13/cobra"], "%s", viaCobra)
		assert.True(t, strings.HasPrefix(plain.Stdout, c.out), "%q: %s", args, plain)
		assert.Equal(t, same(viaCobra.Stdout), same(plain.Stdout), "%q", args)
	}
	kept := e.Run("run", "'kept'", "--transcript")
	require.Equal(t, 0, kept.Code, "%s", kept)
	assert.True(t, initsRun(kept.Stderr)["github.com/spf13/cobra"], "%s", kept)
	path := regexp.MustCompile(`\[transcript: (.*)\]`).FindStringSubmatch(kept.Stderr)
	require.NotNil(t, path, "%s", kept)
	require.NoError(t, os.Remove(path[1]))
	nothingLeft(t, e, 0)
}

// A plain `replhub wait NAME`, with -t, --cell, --json and --max-output
// or not, whose output goes to a program runs from package early's init
// too, and prints and exits as the same wait through cobra (written with
// `--` before NAME, which early leaves to it): a cell still running, one
// that finished, capped, and a queued one, which exits as running.
func TestPlainWaitSkipsHeavyInits(t *testing.T) {
	earlyThenCobra(t, "w", func(e *hubtest.Env, w string, call func(args ...string) hubtest.Result) {
		wait := func(flags ...string) hubtest.Result {
			t.Helper()
			return call(append([]string{"wait"}, flags...)...)
		}
		r := e.Run("exec", w, `time.sleep(1.5); print("a" * 500 + "z" * 500); 7`, "-t", "0.2")
		require.Equal(t, 3, r.Code, "%s", r)
		r = wait("-t", "0.2")
		assert.Equal(t, 3, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "still running after", "%s", r)
		r = wait("-t", "20", "--max-output", "100")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, strings.Repeat("a", 50)+"\n[... 901 characters left out ...]\n", "%s", r)
		assert.Regexp(t, `Out\[\d+\]: 7\n$`, r.Stdout)

		require.Equal(t, 0, e.Run("exec", w, "time.sleep(1.5)", "--no-wait").Code)
		m := queued(t, e, w, "8")
		r = wait("--cell", m, "-t", "0.1", "--json")
		assert.Equal(t, 3, r.Code, "a queued cell has not even started: %s", r)
		assert.Contains(t, r.Stdout, `"status": "queued"`, "%s", r)
		r = wait("--cell", m, "-t", "20")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Regexp(t, `Out\[\d+\]: 8\n$`, r.Stdout)
		e.Run("kill", w) // its unread cell is not the next pass's note
	})
}

// `replhub sessions [NAME] [--json]` whose output goes to a program runs
// from package early's init too, and prints what it prints through cobra
// (with `--` before NAME, or at the end, which early leaves to it); of a
// name it lacks, it says what the command line says.
func TestPlainSessionsSkipsHeavyInits(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	require.Equal(t, 0, e.Run("exec", "s", "x = 1").Code)
	require.Equal(t, 0, e.Run("exec", "t", "y = 2").Code)
	e.Setenv("GODEBUG", "inittrace=1")
	number := regexp.MustCompile(`\d+(\.\d+)?`)
	for _, c := range []struct{ flags, name []string }{{nil, nil}, {nil, []string{"s"}}, {[]string{"--json"}, nil}, {[]string{"--json"}, []string{"t"}}} {
		plain := e.Run(append(append([]string{"sessions"}, c.flags...), c.name...)...)
		require.Equal(t, 0, plain.Code, "%s", plain)
		assertEarly(t, plain.Stderr)
		whole := e.Run(append(append(append([]string{"sessions"}, c.flags...), "--"), c.name...)...)
		require.Equal(t, 0, whole.Code, "%s", whole)
		assert.True(t, initsRun(whole.Stderr)["github.com/spf13/cobra"], "%s", whole)
		assert.Equal(t, number.ReplaceAllString(whole.Stdout, "N"), number.ReplaceAllString(plain.Stdout, "N"), "%q %q", c.flags, c.name)
		listed := func(name string) string { return `(?m)^` + name + `  pid |"name": "` + name + `"` }
		if c.name == nil {
			assert.Regexp(t, listed("s"), plain.Stdout)
			assert.Regexp(t, listed("t"), plain.Stdout)
		} else {
			other := map[string]string{"s": "t", "t": "s"}[c.name[0]]
			assert.Regexp(t, listed(c.name[0]), plain.Stdout)
			assert.NotRegexp(t, listed(other), plain.Stdout, "narrowed to %s", c.name[0])
		}
	}
	r := e.Run("sessions", "nosuch")
	assert.Equal(t, 2, r.Code, "%s", r)
	assert.Contains(t, r.Stderr, "\nreplhub: no session 'nosuch'\n", "%s", r)
}

// earlyOrCobra runs args then name, through cobra (with `--` before name,
// which early leaves to it) or from early's init, and checks that it ran
// so; an error of replhub's own (exit 2) is printed by package cli either
// way.
func earlyOrCobra(t *testing.T, e *hubtest.Env, viaCobra bool, name string, args ...string) hubtest.Result {
	t.Helper()
	args = slices.Clone(args)
	at := slices.Index(args, nameHere)
	if at < 0 {
		at, args = len(args), append(args, nameHere)
	}
	args[at] = name
	if viaCobra {
		args = slices.Insert(args, at, "--")
	}
	r := e.Run(args...)
	if viaCobra {
		assert.True(t, initsRun(r.Stderr)["github.com/spf13/cobra"], "%s", r)
	} else if r.Code != 2 {
		assertEarly(t, r.Stderr)
	}
	return r
}

// `replhub interrupt NAME [--cell N]` and `replhub kill NAME` whose output
// goes to a program run from package early's init too, and print and exit
// as through cobra (with `--` before NAME): a running cell interrupted, a
// queued one taken out, an idle session's, a session killed, and the
// error for a name the hub lacks.
func TestPlainInterruptAndKillSkipHeavyInits(t *testing.T) {
	earlyThenCobra(t, "s", func(e *hubtest.Env, s string, call func(args ...string) hubtest.Result) {
		require.Equal(t, 0, e.Run("exec", s, "time.sleep(30)", "--no-wait").Code)
		r := call("interrupt", "--cell", queued(t, e, s, "8"))
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "queue", "%s", r)
		r = call("interrupt")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "interrupted cell", "%s", r)
		assert.Contains(t, e.Run("wait", s, "-t", "20").Stdout, "KeyboardInterrupt")
		r = call("interrupt")
		assert.Equal(t, 0, r.Code, "%s", r)
		r = call("kill")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "killed session", "%s", r)
		r = call("kill")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "\nreplhub: ", "%s", r)
	})
}

// nameHere, among earlyOrCobra's args, is where the session's name goes
// (`inspect NAME EXPR`); without it, the name goes last.
const nameHere = "{name}"

// `replhub vars`, `inspect`, `complete` and `reset` whose output goes to
// a program run from package early's init too, with each of their flags,
// and print and exit as through cobra: answers, JSON, an expression that
// raised, a busy session, a reset, and a name the hub lacks.
func TestPlainQueriesSkipHeavyInits(t *testing.T) {
	earlyThenCobra(t, "q", func(e *hubtest.Env, q string, call func(args ...string) hubtest.Result) {
		require.Equal(t, 0, e.Run("exec", q, `import json; cfg = {"port": 1}; _p = 1; x = 1`).Code)
		r := call("vars")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "cfg   dict  {'port': 1}\n", "%s", r)
		r = call("vars", "--all", "--limit", "1", "--json", "--wait=0.5")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, `"name": "_p"`, "%s", r)
		r = call("inspect", nameHere, "json.JSONDecoder") // a repr without an address
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "signature: (*, object_hook=None", "%s", r)
		r = call("inspect", "--json", nameHere, "1/0")
		assert.Equal(t, 1, r.Code, "an expression that raised: %s", r)
		assert.Contains(t, r.Stdout, "ZeroDivisionError", "%s", r)
		r = call("complete", nameHere, `cfg["p`)
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Equal(t, "cfg[\"port\"]\n", r.Stdout, "%s", r)
		r = call("complete", "--limit", "1", nameHere, "")
		assert.Equal(t, 0, r.Code, "%s", r)

		require.Equal(t, 0, e.Run("exec", q, "time.sleep(2)", "--no-wait").Code)
		r = call("vars", "--wait", "0")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "is busy", "%s", r)
		r = call("reset")
		assert.Equal(t, 2, r.Code, "%s", r)
		r = call("vars", "--wait", "20")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "[waited", "%s", r)

		r = call("reset", "--keep-imports")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "modules kept: json, time", "%s", r)
		r = call("reset", "--json")
		assert.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, `"removed": 2`, "%s", r)
		e.Run("kill", q)
		r = call("vars")
		assert.Equal(t, 2, r.Code, "%s", r)
		assert.Contains(t, r.Stderr, "no session", "%s", r)
	})
}

// earlyThenCobra runs pass twice against one hub, each time on a session
// of its own in the same state (prefix0, then prefix1, time imported):
// first with its calls (args, then the session's name) from early's init,
// then through cobra (earlyOrCobra); the two must print the same, numbers
// aside: the exit code, standard output and replhub's line of error.
func earlyThenCobra(t *testing.T, prefix string, pass func(e *hubtest.Env, name string, call func(args ...string) hubtest.Result)) {
	t.Helper()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	number := regexp.MustCompile(`\d+(\.\d+)?`)
	said := regexp.MustCompile(`(?m)^replhub: .*$`)
	var printed [2][]string
	for i, viaCobra := range []bool{false, true} {
		name := fmt.Sprintf("%s%d", prefix, i)
		require.Equal(t, 0, e.Run("exec", name, "import time").Code)
		e.Setenv("GODEBUG", "inittrace=1")
		pass(e, name, func(args ...string) hubtest.Result {
			t.Helper()
			r := earlyOrCobra(t, e, viaCobra, name, args...)
			printed[i] = append(printed[i], number.ReplaceAllString(fmt.Sprintf("%d %s%s", r.Code, r.Stdout, said.FindString(r.Stderr)), "N"))
			return r
		})
	}
	assert.Equal(t, printed[1], printed[0])
}

// queued queues code in session name and returns its cell's number.
func queued(t *testing.T, e *hubtest.Env, name, code string) string {
	t.Helper()
	q := e.Run("exec", name, code, "--queue")
	m := regexp.MustCompile(`\[cell (\d+) queued`).FindStringSubmatch(q.Stdout)
	require.NotNil(t, m, "%s", q)
	return m[1]
}

// `replhub --version` (or -v) is answered from package early's init too,
// with cobra's line; any other word beside it goes through cobra.
func TestVersionSkipsHeavyInits(t *testing.T) {
	bin := hubtest.Binary(t)
	for _, args := range [][]string{{"--version"}, {"-v"}, {"--version=true"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cmd.Environ(), "GODEBUG=inittrace=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "%q: %s", args, errb.String())
		assert.Regexp(t, `^replhub version \S+\n$`, out.String(), "%q", args)
		if args[0] == "--version=true" {
			assert.True(t, initsRun(errb.String())["github.com/spf13/cobra"], "%s", errb.String())
		} else {
			assertEarly(t, errb.String())
		}
	}
}

// ignoresSIGINT reports whether process pid ignores SIGINT (/proc's
// SigIgn mask).
func ignoresSIGINT(t *testing.T, pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^SigIgn:\s*([0-9a-f]+)$`).FindSubmatch(b)
	require.NotNil(t, m, "%s", b)
	mask, err := strconv.ParseUint(string(m[1]), 16, 64)
	require.NoError(t, err)
	return mask&(1<<(int(syscall.SIGINT)-1)) != 0
}

// Ctrl-C on a plain exec interrupts the cell, as on any exec, once the
// reply is slow to come (early's armAfter: sooner, it ends the command).
// The call starts with SIGINT ignored, as a shell's background job does:
// arming the handler then shows in /proc, and a Ctrl-C sent sooner could
// not end it.
func TestPlainExecCtrlC(t *testing.T) {
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	require.Equal(t, 0, e.Run("exec", "c", "import time", "--python", newer).Code)
	code, stdout, stderr := execCtrlC(t, e, "c")
	assert.Equal(t, 1, code, "stdout %s stderr %s", stdout, stderr)
	assert.Contains(t, stdout, "KeyboardInterrupt")
	assert.Contains(t, stderr, "[interrupting session 'c'")
}

// execCtrlC runs `replhub exec NAME CODE ARGS...` (e.Bin) whose cell says
// that it started and sleeps (session name has imported time), with
// SIGINT ignored at first, as a background job has it; it sends Ctrl-C
// once the cell runs and /proc shows the handler armed, so that it cannot
// race the arming, and returns what the command gave once it ended.
func execCtrlC(t *testing.T, e *hubtest.Env, name string, args ...string) (code int, stdout, stderr string) {
	return execCtrlCs(t, e, name, "time.sleep(60)", 1, args...)
}

// execCtrlCs is execCtrlC with the cell's body after it says it started,
// and times Ctrl-Cs: each after the one before was told of on standard
// error ("[interrupting").
func execCtrlCs(t *testing.T, e *hubtest.Env, name, body string, times int, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "started")
	argv := append([]string{"-c", `trap '' INT; exec "$0" "$@"`, e.Bin, "exec", name,
		"open(" + strconv.Quote(mark) + ", 'w').close()\n" + body}, args...)
	cmd := exec.Command("sh", argv...)
	cmd.Env, cmd.Dir = e.Vars, e.Cwd
	var out, errb hubtest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if _, err := os.Stat(mark); err == nil && !ignoresSIGINT(t, cmd.Process.Pid) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("exec ended before its cell started: %v: %s %s", err, out.String(), errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("the cell did not start, or Ctrl-C was not armed: %s %s", out.String(), errb.String())
		}
	}
	for i := range times {
		if i > 0 {
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(errb.String(), "[interrupting"); {
				require.True(t, time.Now().Before(deadline), "the first Ctrl-C was not told of: %s", errb.String())
				time.Sleep(20 * time.Millisecond)
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("exec did not return after Ctrl-C: %s %s", out.String(), errb.String())
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// A second Ctrl-C stops the wait on a cell that swallows the first, on a
// plain exec and through cobra: one line that says the cell runs on and
// how to collect it, and the exit code of a cell still running.
func TestSecondCtrlCStopsWaiting(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	require.Equal(t, 0, e.Run("exec", "c2", "import time", "--python", newer).Code)
	swallow := "while True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass"
	for _, args := range [][]string{nil, {"--"}} { // "--": through cobra
		code, stdout, stderr := execCtrlCs(t, e, "c2", swallow, 2, args...)
		assert.Equal(t, 3, code, "%v: stdout %s stderr %s", args, stdout, stderr)
		assert.Contains(t, stderr, "replhub: stopped waiting at the second Ctrl-C; the cell runs on in session 'c2': `replhub wait c2` collects it", "%v", args)
		assert.NotContains(t, stderr, "context canceled")
		r := e.Run("kill", "c2")
		require.Equal(t, 0, r.Code, "%s", r)
		require.Equal(t, 0, e.Run("exec", "c2", "import time", "--python", newer).Code)
	}
}
