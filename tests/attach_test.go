package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// tty runs the binary in a real terminal: a tmux server of the test's own.
type tty struct {
	t    *testing.T
	sock string
}

// newTTY runs `replhub args...` with env in a fresh 120x50 terminal; when
// the program ends the pane shows "[exit N]".
func newTTY(t *testing.T, env []string, cwd string, bin string, args ...string) *tty {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs tmux (apt-get install tmux): %v", err)
		}
		t.Skipf("needs tmux: %v", err)
	}
	y := &tty{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	// The shell outlives a Ctrl-C that reaches its process group too (a
	// trap, unlike an ignored signal, is not inherited).
	script := `trap : INT; cd "$1" && shift && "$@"; echo "[exit $?]"; exec sleep 300`
	argv := []string{"-S", y.sock, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "120", "-y", "50",
		"env", "-i"}
	argv = append(argv, env...)
	argv = append(argv, "TERM=screen", "sh", "-c", script, "sh", cwd, bin)
	argv = append(argv, args...)
	out, err := exec.Command("tmux", argv...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { exec.Command("tmux", "-S", y.sock, "kill-server").Run() })
	return y
}

// keys sends tmux key names (Enter, C-c, Tab) and literal text.
func (y *tty) keys(keys ...string) {
	y.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", y.sock, "send-keys", "-t", "t"}, keys...)...).CombinedOutput()
	require.NoError(y.t, err, "%s", out)
}

// line types text and Enter.
func (y *tty) line(text string) {
	y.t.Helper()
	out, err := exec.Command("tmux", "-S", y.sock, "send-keys", "-t", "t", "-l", text).CombinedOutput()
	require.NoError(y.t, err, "%s", out)
	y.keys("Enter")
}

// screen is what the terminal shows, its scrollback too, without the
// spaces that end its lines; with escapes, its colours as escape sequences.
func (y *tty) screen(escapes bool) string {
	args := []string{"-S", y.sock, "capture-pane", "-p", "-J", "-S", "-500", "-t", "t"}
	if escapes {
		args = append(args, "-e")
	}
	out, err := exec.Command("tmux", args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("[tmux capture-pane: %v: %s]", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
}

// waitFor polls the screen until re matches, up to d.
func (y *tty) waitFor(re string, d time.Duration) string {
	y.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(d)
	for {
		s := y.screen(false)
		if rx.MatchString(s) {
			return s
		}
		if time.Now().After(deadline) {
			y.t.Fatalf("the terminal never showed %q within %s; it shows:\n%s\n%q", re, d, s, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consoleEnv gives a world a home of its own (the console and its Python
// read nothing of the real one) and a fixed Python.
func consoleEnv(t *testing.T, e *hubtest.Env) {
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("HOME", t.TempDir())
	e.Setenv("REPLHUB_PYTHON", newer)
}

const waitLong = 30 * time.Second

// waitRunning waits until session name runs cell n.
func waitRunning(t *testing.T, e *hubtest.Env, name string, n int) {
	t.Helper()
	c := e.Client()
	waitFor(t, func() bool {
		l, err := c.Sessions(context.Background())
		require.NoError(t, err)
		return slices.ContainsFunc(l.Sessions, func(s wire.SessionInfo) bool { return s.Name == name && s.RunningCell == n })
	}, func() string { return fmt.Sprintf("session %s never ran cell %d", name, n) })
}

func TestAttachConsole(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	consoleEnv(t, e)
	r := e.Run("exec", "desk", "x = 41")
	require.Equal(t, 0, r.Code, "%s", r)
	y := newTTY(t, e.Vars, e.Cwd, e.Bin, "attach", "desk")
	y.waitFor(`\[attached to 'desk' \(python 3\.\d+\.\d+, local, cwd .*\)`, waitLong)
	y.waitFor(`(?m)^>>>$`, waitLong)
	assert.Regexp(t, "\x1b\\[32m(\x1b\\[\\d+m)*>>> ", y.screen(true), "the prompt is coloured on a terminal")

	// A function over "..." lines, ended by an empty line, then called.
	y.line("def f(a):")
	y.waitFor(`(?m)^\.\.\.$`, waitLong)
	y.line("    return a + x")
	y.line("")
	y.line("f(1)")
	y.waitFor(`(?m)^Out\[3\]: 42$`, waitLong)

	// Tab completes a name the session defined.
	y.line("zebra_total = 7")
	y.waitFor(`(?m)^>>> zebra_total = 7\n>>>$`, waitLong)
	y.keys("zebra_to", "Tab")
	y.waitFor(`(?m)^>>> zebra_total$`, waitLong)
	y.keys("Enter")
	y.waitFor(`(?m)^Out\[5\]: 7$`, waitLong)

	// Ctrl-C at the prompt clears the line.
	y.keys("nonsense(")
	y.waitFor(`(?m)^>>> nonsense\($`, waitLong)
	y.keys("C-c")
	y.line("2 + 2")
	y.waitFor(`(?m)^Out\[6\]: 4$`, waitLong)

	// A running cell is busy for the agent; Ctrl-C interrupts it.
	y.line("import time; time.sleep(30)")
	running := time.Now()
	waitRunning(t, e, "desk", 7)
	busy := e.Run("exec", "desk", "1")
	assert.Equal(t, 2, busy.Code, "%s", busy)
	assert.Contains(t, busy.Stderr, "busy")
	queued := e.Run("exec", "desk", "'queued'", "--queue")
	assert.Contains(t, queued.Stdout, "[cell 8 queued", "%s", queued)
	y.keys("C-c")
	s := y.waitFor(`(?m)KeyboardInterrupt\n`, waitLong)
	assert.Less(t, time.Since(running), 20*time.Second)
	assert.Contains(t, s, "time.sleep(30)")
	// The queued cell starts once the console's ends, and shows there.
	y.waitFor(`\[cell 8, from another client\]\n>>> 'queued'\nOut\[8\]: 'queued'\n`, waitLong)
	waited := e.Run("wait", "desk", "--cell", "8")
	assert.Contains(t, waited.Stdout, "Out[8]: 'queued'", "%s", waited)

	// The agent's cell shows in the console, code and output, and the
	// agent hears once that a person worked here.
	r = e.Run("exec", "desk", "print('agent says hi'); f(5)")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[9]: 46")
	// The first reply to anybody else (here, the queued cell's) says once
	// that a person worked here.
	replies := queued.Stdout + waited.Stdout + r.Stdout
	assert.Contains(t, queued.Stdout, "[someone worked in this session from `replhub attach`: cells 2-7]\n")
	assert.Equal(t, 1, strings.Count(replies, "someone worked"), "%s", replies)
	y.waitFor(`\[cell 9, from another client\]\n>>> print\('agent says hi'\); f\(5\)\nagent says hi\nOut\[9\]: 46\n`, waitLong)
	r = e.Run("exec", "desk", "zebra_total")
	assert.Equal(t, "Out[10]: 7\n", r.Stdout, "the note comes once")

	// Ctrl-] detaches; the session keeps its state.
	y.keys("C-]")
	y.waitFor(`\[detached from 'desk'; the session goes on\]\n\[exit 0\]`, waitLong)
	r = e.Run("exec", "desk", "f(1), zebra_total")
	assert.Equal(t, "Out[11]: (42, 7)\n", r.Stdout, "%s", r)

	// The history is the session's own, and private.
	hist := filepath.Join(e.Paths.State, "history", "desk")
	fi, err := os.Stat(hist)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	b, _ := os.ReadFile(hist)
	assert.Contains(t, string(b), "zebra_total = 7\n")
}

func TestAttachNeedsTerminal(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	r := e.Run("attach", "nobody")
	assert.Equal(t, 2, r.Code)
	assert.Equal(t, "replhub: attach needs a terminal: for a script, use `replhub exec nobody -`\n", r.Stderr)
}

func TestAttachRemote(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("exec", "far", "import socket; y = 2", "--host", "lab")
	require.Equal(t, 0, r.Code, "%s", r)
	w.Setenv("NO_COLOR", "1")
	y := newTTY(t, w.Vars, w.Cwd, w.Bin, "attach", "far")
	y.waitFor(`\[attached to 'far' \(python 3\.\d+\.\d+, on lab, cwd .*\)`, waitLong)
	y.waitFor(`(?m)^>>>$`, waitLong)
	assert.NotRegexp(t, "\x1b\\[32m(\x1b\\[\\d+m)*>>> ", y.screen(true), "NO_COLOR turns colours off")
	y.line("def g(n):")
	y.line("    return n * y")
	y.line("")
	y.line("g(21)")
	y.waitFor(`(?m)^Out\[3\]: 42$`, waitLong)
	r = w.Run("exec", "far", "print('from the agent'); g(1)")
	assert.Contains(t, r.Stdout, "someone worked in this session from `replhub attach`: cells 2-3")
	y.waitFor(`>>> print\('from the agent'\); g\(1\)\nfrom the agent\nOut\[4\]: 2\n`, waitLong)
	y.keys("C-d")
	y.waitFor(`\[detached from 'far'; the session goes on\]\n\[exit 0\]`, waitLong)
	r = w.Run("exec", "far", "g(2)")
	assert.Equal(t, "Out[5]: 4\n", r.Stdout, "%s", r)
}

// On a terminal, exec and run show a long cell's output as it is written.
func TestExecStreamsOnTerminal(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	consoleEnv(t, e)
	code := "import time\nfor i in range(8):\n    print('tick', i, flush=True); time.sleep(0.3)\n'end'"
	y := newTTY(t, e.Vars, e.Cwd, e.Bin, "exec", "stream", code)
	s := y.waitFor(`tick 1\n`, waitLong)
	assert.NotContains(t, s, "[exit", "tick 1 shows while the cell still runs")
	assert.NotContains(t, s, "tick 7")
	s = y.waitFor(`\[exit 0\]`, waitLong)
	assert.Contains(t, s, "tick 0\ntick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\ntick 7\nOut[1]: 'end'\n[exit 0]")
	assert.Equal(t, 1, strings.Count(s, "tick 7"), "streamed output is not shown again")

	// So does run.
	y = newTTY(t, e.Vars, e.Cwd, e.Bin, "run", code)
	s = y.waitFor(`tick 1\n`, waitLong)
	assert.NotContains(t, s, "[exit", "tick 1 shows while the run's cell still runs")
	s = y.waitFor(`\[exit 0\]`, waitLong)
	assert.Contains(t, s, "tick 6\ntick 7\nOut[1]: 'end'\n[exit 0]")

	// Not on a terminal, the reply is as it was.
	r := e.Run("exec", "stream", "print('a'); print('b'); 3")
	assert.Equal(t, "a\nb\nOut[2]: 3\n", r.Stdout)

	// On a terminal too, exec runs from package early's init: its output
	// shows as it is written, once, and the reply starts on a line of its
	// own.
	gate := filepath.Join(e.Dir, "gate-stream")
	code = fmt.Sprintf("import os, time\nprint('x', end='', flush=True)\nwhile not os.path.exists(%q): time.sleep(0.02)\n7", gate)
	y = newTTY(t, append(slices.Clone(e.Vars), "GODEBUG=inittrace=1"), e.Cwd, e.Bin, "exec", "stream", code)
	s = y.waitFor(`\nx\n$`, waitLong)
	assert.NotContains(t, s, "Out[3]", "x shows while the cell still runs")
	openGate(t, gate)
	s = y.waitFor(`\[exit 0\]`, waitLong)
	assert.Contains(t, s, "\nx\nOut[3]: 7\n[exit 0]")
	assert.Equal(t, 1, strings.Count(s, "\nx\n"), "streamed output is not shown again")
	assertEarly(t, s)

	// Ctrl-C there interrupts the cell, past the 20 ms in which it ends
	// the command instead; its note ends the open line of output first.
	y = newTTY(t, e.Vars, e.Cwd, e.Bin, "exec", "stream", "import time\nprint('y', end='', flush=True)\ntime.sleep(60)")
	y.waitFor(`(?m)^y$`, waitLong)
	time.Sleep(200 * time.Millisecond)
	y.keys("C-c")
	s = y.waitFor(`\[exit 1\]`, waitLong)
	assert.Regexp(t, `(?m)^y(\^C)?\n\[interrupting session 'stream'; Ctrl-C again stops waiting\]\n`, s) // the terminal echoes ^C
	assert.Contains(t, s, "KeyboardInterrupt")
}

// The agent over MCP: its cell shows in the console as the agent's, and its
// next reply says once that a person worked in the session.
func TestAttachBesideMCPAgent(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	consoleEnv(t, e)
	e.Setenv("REPLHUB_MEMORY_DIR", t.TempDir())
	cs := mcpSession(t, e, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(code string) string {
		text, isErr := callText(t, ctx, cs, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": "pair", "code": code}})
		require.False(t, isErr, "%s", text)
		return text
	}
	run("base = 10")
	y := newTTY(t, e.Vars, e.Cwd, e.Bin, "attach", "pair")
	y.waitFor(`(?m)^>>>$`, waitLong)
	y.line("v = base + 5")
	y.waitFor(`(?m)^>>> v = base \+ 5\n>>>$`, waitLong)
	text := run("print('agent'); v * 2")
	assert.Contains(t, text, "[someone worked in this session from `replhub attach`: cell 2]")
	assert.Contains(t, text, "Out[3]: 30")
	y.waitFor(`\[cell 3, from the agent\]\n>>> print\('agent'\); v \* 2\nagent\nOut\[3\]: 30\n`, waitLong)
	assert.NotContains(t, run("v"), "someone worked", "the note comes once")

	// A line entered while the agent's cell runs waits in the queue, and
	// runs when that cell ends; Ctrl-C takes a queued one out.
	// The agent's cell runs until the line is queued, however slow the
	// machine.
	gate := filepath.Join(e.Dir, "gate-pair")
	r := e.Run("exec", "pair", fmt.Sprintf("import os, time\nwhile not os.path.exists(%q): time.sleep(0.02)\n'agent done'", gate), "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	waitRunning(t, e, "pair", 5)
	y.line("'after'")
	y.waitFor(`\[cell 6 is queued behind the running cell \(1 ahead of it\); it runs when that ends, Ctrl-C takes it out\]`, waitLong)
	openGate(t, gate)
	y.waitFor(`Out\[5\]: 'agent done'\nOut\[6\]: 'after'\n`, waitLong)
	r = e.Run("exec", "pair", "time.sleep(30)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	waitRunning(t, e, "pair", 7)
	y.line("'never'")
	y.waitFor(`\[cell 8 is queued`, waitLong)
	y.keys("C-c")
	y.waitFor(`cell 8 .*\n>>>\n`, waitLong)
	r = e.Run("interrupt", "pair")
	assert.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("wait", "pair", "--cell", "7")
	assert.Contains(t, r.Stdout, "KeyboardInterrupt")
	assert.NotContains(t, y.screen(false), "'never'\nOut", "the queued cell never ran")
}

// A root session (through a stand-in sudo) takes a console as any other.
func TestAttachRoot(t *testing.T) {
	t.Parallel()
	f := newFakeSudo(t, fakePassword, fakePassword)
	e := hubtest.Start(t)
	f.apply(e, "password")
	consoleEnv(t, e)
	r := e.Run("exec", "ops", "import os; n = 40", "--sudo")
	require.Equal(t, 0, r.Code, "%s", r)
	y := newTTY(t, e.Vars, e.Cwd, e.Bin, "attach", "ops")
	y.waitFor(`\[attached to 'ops' \(python 3\.\d+\.\d+, local, as root, cwd .*\)`, waitLong)
	y.line("n + 2")
	y.waitFor(`(?m)^Out\[2\]: 42$`, waitLong)
	y.keys("C-d")
	y.waitFor(`\[exit 0\]`, waitLong)
	assert.Equal(t, 1, f.askpassCalls(), "attach asks no password: it reaches the live session")
}
