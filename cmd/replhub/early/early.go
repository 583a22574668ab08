// Package early answers the commonest calls from its init function:
// `replhub --version`, and a plain `replhub exec NAME CODE` (with -t SECS,
// --json, --max-output N, --no-wait, --queue, --python P, --host H and
// --sudo or not), `replhub run CODE` (with exec's flags but --no-wait and
// --queue), `replhub wait NAME` (with -t, --json, --max-output and
// --cell N or not), `replhub sessions [NAME]` (with --json or not),
// `replhub interrupt NAME` (with --cell N or not), `replhub kill NAME`, or
// a query (`vars`, `inspect`, `complete`, `reset`, with their flags or
// not) whose session runs, its output to a program or to a terminal
// (where it shows the cell's output as it is written and a group's
// progress, as package cli does: stdio). Go runs every package's init
// before main, and those of the packages that only the hub, the MCP
// server and ssh need (net/http, JSON schemas, x/crypto/ssh, x509,
// encoding/gob) are most of a one-line call's start-up.
//
// Go initializes a package as soon as its imports are done and no ready
// package sorts before it (the spec's "Package initialization"). This
// package imports only internal/lean and a few standard packages
// (io, os, strconv, time), which import none of strings,
// bufio, net or encoding/json (see lean's doc), so its init runs after a
// score of the runtime's and the standard library's, before anything of
// replhub's or of its libraries; tests/startup_test.go checks that with
// GODEBUG=inittrace.
//
// A call it does not take returns from init untouched, and package cli
// runs it as before. A call it took but cannot finish (a reply it cannot
// print: an error, images, a group's; or the hub gone) it leaves in
// Pending, which main hands to package cli.
package early

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/replhub/replhub/internal/lean"
)

// Call is a plain exec's, run's, wait's, sessions', interrupt's, kill's
// or query's arguments.
type Call struct {
	// Op is the request's: "exec", "wait", "sessions", "interrupt",
	// "kill", "vars", "inspect", "complete" or "reset" (wire.OpExec ...).
	Op string
	// Code is an exec's.
	Name, Code string
	// Timeout is -t, in seconds.
	Timeout float64
	// JSON is --json.
	JSON bool
	// MaxOutput is --max-output; 0, the hub's default, when not given.
	MaxOutput int
	// Cell is a wait's or an interrupt's --cell; 0, whichever, when not
	// given.
	Cell int
	// NoWait and Queue are an exec's --no-wait and --queue.
	NoWait, Queue bool
	// Private says the exec is a run's (`replhub run CODE`): a session
	// of its own, new and named when the call is sent (Name is empty
	// until then), that ends with the call.
	Private bool
	// Python, Host and Sudo are an exec's --python, --host and --sudo:
	// how a new session starts. The hub checks a live one against Host
	// and Sudo; Python only picks a new one's interpreter.
	Python, Host string
	Sudo         bool
	// Expr is an inspect's expression, Text a completion's text.
	Expr, Text string
	// Wait is a query's --wait (not a reset's) as its client sends it:
	// -1 for --wait 0 (do not wait), 0 for under a nanosecond (the hub's
	// default).
	Wait float64
	// Limit is a vars' or a completion's --limit; 0, the worker's
	// default, when not given.
	Limit int
	// All is a vars' --all, KeepImports a reset's --keep-imports.
	All, KeepImports bool
}

// Sent is a plain call that init took and did not finish.
type Sent struct {
	Call
	// Unsent says the hub did not get it (Code is what standard input
	// held, for `-`).
	Unsent bool
	// Line is the hub's reply line; nil when the hub closed the
	// connection before it.
	Line []byte
	// Screen is what the call showed on a terminal before Line: the
	// cell's output, whose last line may be open.
	Screen *lean.Screen
}

// Pending is the call init left to package cli, or nil.
var Pending *Sent

// Ops of wire.Request, which this package cannot import (TestOps).
const (
	opExec      = "exec"
	opWait      = "wait"
	opSessions  = "sessions"
	opInterrupt = "interrupt"
	opKill      = "kill"
	opVars      = "vars"
	opInspect   = "inspect"
	opComplete  = "complete"
	opReset     = "reset"
)

// opRun is the command word of a run, which goes to the hub as an exec
// with Private set.
const opRun = "run"

func init() {
	args := os.Args[1:]
	if IsVersion(args) {
		// As cobra prints it.
		os.Stdout.WriteString("replhub version " + lean.Version + "\n")
		os.Exit(0)
	}
	call, ok := PlainCall(args)
	if !ok || !lean.Supported {
		return
	}
	// One P once the reply is slow (slowAfter), unless GOMAXPROCS says
	// otherwise. The wait is a blocking system call (ppoll, read), and
	// the runtime's monitor thread leaves a P in one for 10 ms while
	// another P is idle, waking every 20 µs to look: some 95 times for a
	// new session's wait. With one P it takes that P back at once and
	// sleeps. Fifty calls at once on two cores each paid for that. But
	// the change stops the world and empties the other P's caches, which
	// cost a warm call more than its short wait does.
	ps := 0
	var slow func()
	if os.Getenv("GOMAXPROCS") == "" {
		slow = func() { ps = runtime.GOMAXPROCS(1) }
	}
	sent, exit := send(call, stdio{os.Stdin, os.Stdout, os.Stderr, os.Getenv, lean.IsTerminal(1), lean.IsTerminal(2), slow})
	if exit >= 0 {
		os.Exit(exit)
	}
	if ps > 0 {
		runtime.GOMAXPROCS(ps) // package cli's, as before
	}
	Pending = sent
}

// stdio is what send reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
	getenv   func(string) string
	// outTTY and errTTY say that out and err are terminals: a terminal
	// sees an exec's output as it is written, and a group's progress, as
	// package cli shows them (cmdenv's Exec and Wait).
	outTTY, errTTY bool
	// slow, when not nil, is called once a reply has not come within
	// slowAfter, or once the hub says the session is new.
	slow func()
}

// slowAfter is how long send waits for a reply before it calls slow: a
// warm call's reply comes well within it, a new session's does not.
const slowAfter = 2 * time.Millisecond

// send sends the call (an exec again with the caller's folder and
// environment for a new session) and, when the reply is plain, prints it
// and returns its exit status. Otherwise it returns -1, and what package
// cli is to finish, or nil when cli is to do it all: no hub answers (cli
// starts one), the socket's folder is unsafe (cli says why).
func send(call Call, std stdio) (*Sent, int) {
	if call.Private {
		// Where /dev/urandom cannot be read, cli names it (crypto/rand).
		var err error
		if call.Name, err = runName(); err != nil {
			return nil, -1
		}
	}
	name := call.Name
	dir, _ := lean.RuntimeDir(std.getenv)
	if lean.CheckDir(dir) != nil {
		return nil, -1
	}
	sock := dir + "/" + lean.SocketName
	c, err := lean.Dial(sock)
	if err != nil {
		return nil, -1
	}
	defer c.Close()
	if call.Code == "-" {
		if call.Code, err = lean.ReadCode(std.in); err != nil {
			return nil, fail(std.err, err.Error())
		}
	}
	// --json asks for JSON without "plain": a hub too old to know it
	// answers with the whole result, which package cli prints as JSON.
	r := lean.Request{Op: call.Op, Name: name, Code: call.Code, Timeout: call.Timeout, NoWait: call.NoWait, Cell: call.Cell,
		Python: call.Python, Host: call.Host, Sudo: call.Sudo, Private: call.Private,
		Queue: call.Queue, Expr: call.Expr, Text: call.Text, All: call.All, KeepImports: call.KeepImports,
		MaxOutput: call.MaxOutput, Limit: call.Limit, Wait: call.Wait, Plain: !call.JSON, JSON: call.JSON}
	r.Stream = std.outTTY && call.Op == opExec && !call.JSON && !call.NoWait && !call.Queue
	r.Progress = std.errTTY && (call.Op == opExec || call.Op == opWait) && !call.Private
	// A new session is made in this process's folder and environment,
	// which only that needs (as client.Exec): they go once the hub asks
	// for them, or at once for a run, whose session is always new.
	withOrigin := func() {
		r.Cwd, _ = os.Getwd()
		r.Env = os.Environ()
	}
	note, stopped, stoppedExit := lean.InterruptNote(name), lean.StoppedWaiting(name), lean.ExitRunning
	if call.Private {
		withOrigin()
		note, stopped, stoppedExit = lean.RunInterruptNote, lean.RunStopped, lean.ExitFailure
	}
	sent := &Sent{Call: call, Screen: &lean.Screen{Out: std.out, Err: std.err}}
	var disarm func()
	defer func() {
		if disarm != nil {
			disarm() // for package cli, when it goes on
		}
	}()
	// slow is called once, before a wait that is long (see stdio).
	goSlow := func() {
		if std.slow != nil {
			std.slow()
			std.slow = nil
		}
	}
	for withEnv := call.Private; ; withEnv = true {
		req, ok := lean.AppendRequest(nil, r)
		if !ok || len(req) > lean.MaxLine || c.Write(req) != nil {
			// The hub takes a request only whole, and it did not take it.
			sent.Unsent = true
			return sent, -1
		}
		// A run's session is always new: its start is a long wait.
		if std.slow != nil && (call.Private || !c.Readable(slowAfter)) {
			goSlow()
		}
		arm := time.Now().Add(armAfter)
		if withEnv {
			// A new session's start is a long wait, beside which the
			// handler costs nothing: armed at once. An interrupt during
			// the start ends its first cell before it runs.
			arm = time.Now()
		}
		var line []byte
		for {
			// Ctrl-C on a list, an interrupt or a kill has its default
			// action, as on the command line's: the command ends. Past
			// the deadline it is armed even while output pours in.
			if d := time.Until(arm); disarm == nil && (call.Op == opExec || call.Op == opWait) && (d <= 0 || !c.Readable(d)) {
				disarm = lean.CtrlC(note, sent.Screen.Notes(), func() { interrupt(sock, name) },
					func() {
						sent.Screen.Close()
						fail(std.err, stopped)
						os.Exit(stoppedExit)
					}, nil)
			}
			if line, err = c.ReadLine(); err != nil {
				sent.Screen.ClearProgress()
				return sent, -1
			}
			if !showNews(sent.Screen, line) {
				break
			}
		}
		sent.Screen.ClearProgress()
		if v, exit, text, ok := lean.ParsePlain(line); ok && v == lean.Protocol {
			sent.Screen.EndLine(text != "")
			if _, err := io.WriteString(std.out, text); err != nil {
				return nil, fail(std.err, err.Error())
			}
			return nil, exit
		}
		if !withEnv && call.Op == opExec && lean.IsNeedEnv(line) {
			// A new session: its start is a long wait, however fast
			// this answer came.
			goSlow()
			withOrigin()
			continue
		}
		sent.Line = line
		return sent, -1
	}
}

// showNews shows line on scr when it is news that comes before a reply
// (a cell's output, a group's progress), and reports whether it was. A
// line of news lean cannot read is one no streaming exec sends (an event
// with parts): it shows nothing.
func showNews(scr *lean.Screen, line []byte) bool {
	if !lean.IsNews(line) {
		return false
	}
	if v, kind, text, ok := lean.ParseEvent(line); ok && v == lean.Protocol && kind == lean.EventOut {
		scr.Output(text)
	} else if v, p, ok := lean.ParseProgress(line); ok && v == lean.Protocol {
		scr.Progress(p) // asked for only when standard error is a terminal
	}
	return true
}

// fail says what failed as package cli does, one line on standard error,
// and returns its exit status (cmdenv.ExitFailure).
func fail(errw io.Writer, msg string) int {
	io.WriteString(errw, "replhub: "+msg+"\n")
	return 2
}

// armAfter is how long a reply may take before Ctrl-C is armed. Setting
// up a handler (os/signal's two threads) is a fifth of a warm call, which
// most cells answer well within that; sooner, Ctrl-C has its default
// action: the command ends at once, and the cell runs on in its session,
// for `replhub wait` to collect (a run's session ends with the command).
const armAfter = 20 * time.Millisecond

// runName is a run's session name (lean.RunName) from /dev/urandom, as
// package cli makes it from crypto/rand, whose init is not cheap.
func runName() (string, error) {
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return "", err
	}
	defer f.Close()
	return lean.RunName(f)
}

// interrupt asks the hub to interrupt session name's cell.
func interrupt(sock, name string) {
	c, err := lean.Dial(sock)
	if err != nil {
		return
	}
	defer c.Close()
	req, _ := lean.AppendRequest(nil, lean.Request{Op: opInterrupt, Name: name})
	if c.Write(req) == nil {
		c.ReadLine()
	}
}

// IsVersion reports whether args ask for the version alone, as cobra's
// version flag takes it: `--version` or `-v`.
func IsVersion(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-v")
}

// PlainCall is the plain call that args are, of whichever kind: PlainExec,
// PlainRun, PlainWait, PlainSessions, PlainInterrupt, PlainKill or
// PlainQuery.
func PlainCall(args []string) (Call, bool) {
	for _, take := range []func([]string) (Call, bool){PlainExec, PlainRun, PlainWait, PlainSessions, PlainInterrupt, PlainKill, PlainQuery} {
		if c, ok := take(args); ok {
			return c, true
		}
	}
	return Call{}, false
}

// PlainExec reports whether args are `exec NAME CODE`, CODE being `-`
// for standard input, with no flag but -t (its seconds, else
// lean.DefaultTimeout), --json, --max-output, --no-wait, --queue,
// --python, --host and --sudo, written anywhere after exec in any of the
// ways cobra takes them: -t S, -tS, -t=S, --timeout S, --timeout=S;
// --json, --json=BOOL (so too --no-wait, --queue and --sudo);
// --max-output N, --max-output=N (so too --python and --host, whose value
// is the next word whatever it is); the last one counting. Any other argument that starts with - (so `--` too),
// an empty argument, or a value that cobra would refuse
// (strconv.ParseFloat and lean.TimeoutOK, strconv.ParseBool,
// strconv.ParseInt in base 0 and 0 to lean.MaxOutput) leave the call to
// package cli, which says what is wrong.
func PlainExec(args []string) (Call, bool) {
	c, words, ok := plainWords(args, opExec, 2)
	if !ok || words[1] == "" {
		return Call{}, false
	}
	c.Code = words[1]
	return c, true
}

// PlainRun reports whether args are `run CODE` (CODE not empty, `-` for
// standard input) with no flag but exec's, less --no-wait and --queue, as
// PlainExec says: an exec, Private, whose Name send makes.
func PlainRun(args []string) (Call, bool) {
	if len(args) < 2 || args[0] != opRun {
		return Call{}, false
	}
	c, words, ok := plainFlags(args[1:], opRun)
	if !ok || len(words) != 1 || words[0] == "" {
		return Call{}, false
	}
	c.Op, c.Code, c.Private = opExec, words[0], true
	return c, true
}

// PlainWait reports whether args are `wait NAME` with no flag but -t,
// --json, --max-output and --cell (--cell N, --cell=N; a number cobra
// takes, from 0), as PlainExec says.
func PlainWait(args []string) (Call, bool) {
	c, _, ok := plainWords(args, opWait, 1)
	if !ok || c.Cell < 0 {
		return Call{}, false
	}
	return c, true
}

// PlainSessions reports whether args are `sessions` or `sessions NAME`
// with no flag but --json, as PlainExec says.
func PlainSessions(args []string) (Call, bool) {
	if len(args) < 1 || args[0] != opSessions {
		return Call{}, false
	}
	c, words, ok := plainFlags(args[1:], opSessions)
	if !ok || len(words) > 1 || len(words) == 1 && (words[0] == "" || words[0] == "-") {
		return Call{}, false
	}
	if len(words) == 1 {
		c.Name = words[0]
	}
	return c, true
}

// PlainInterrupt reports whether args are `interrupt NAME` with no flag
// but --cell (a number from 1, which cobra checks when given), as
// PlainExec says.
func PlainInterrupt(args []string) (Call, bool) {
	c, _, ok := plainWords(args, opInterrupt, 1)
	return c, ok
}

// PlainKill reports whether args are `kill NAME` with no flag, as
// PlainExec says.
func PlainKill(args []string) (Call, bool) {
	c, _, ok := plainWords(args, opKill, 1)
	return c, ok
}

// PlainQuery reports whether args are `vars NAME`, `inspect NAME EXPR`
// (EXPR not empty), `complete NAME TEXT` or `reset NAME`, with no flag
// but their own, as PlainExec says: --json; --wait SECS (from 0 to
// lean.MaxTimeout, strconv.ParseFloat) but on a reset; --limit N (from 0)
// on vars and complete; --all on vars; --keep-imports on reset.
func PlainQuery(args []string) (Call, bool) {
	if len(args) == 0 {
		return Call{}, false
	}
	switch op := args[0]; op {
	case opVars, opReset:
		c, _, ok := plainWords(args, op, 1)
		return c, ok
	case opInspect:
		if c, w, ok := plainWords(args, op, 2); ok && w[1] != "" {
			c.Expr = w[1]
			return c, true
		}
	case opComplete:
		if c, w, ok := plainWords(args, op, 2); ok {
			c.Text = w[1]
			return c, true
		}
	}
	return Call{}, false
}

// plainWords reads args as command op's word, then op's flags and n
// words, the first of them the session's name (not empty, nor -).
func plainWords(args []string, op string, n int) (Call, []string, bool) {
	if len(args) < 1+n || args[0] != op {
		return Call{}, nil, false
	}
	c, words, ok := plainFlags(args[1:], op)
	if !ok || len(words) != n || words[0] == "" || words[0] == "-" {
		return Call{}, nil, false
	}
	c.Name = words[0]
	return c, words, true
}

// plainFlags reads args, those after the command op's word, as PlainExec
// says: the flags op takes into c, and the words. An exec, a run and a
// wait take -t and --max-output (timed); they, the list and the queries
// take --json; an exec and a run take --python, --host and --sudo, an
// exec --no-wait and --queue too; a wait and an interrupt take --cell; a
// kill takes none; the queries take theirs (PlainQuery).
func plainFlags(args []string, op string) (c Call, words []string, ok bool) {
	c.Op = op
	timed := op == opExec || op == opWait || op == opRun
	if timed {
		c.Timeout = lean.DefaultTimeout
	}
	query := op == opVars || op == opInspect || op == opComplete || op == opReset
	waits := query && op != opReset
	if waits {
		c.Wait = lean.DefaultQueryWait
	}
	// The long flags op takes, by name, and where each goes.
	bools, ints, floats, strs := map[string]*bool{}, map[string]*int{}, map[string]*float64{}, map[string]*string{}
	if timed || op == opSessions || query {
		bools["--json"] = &c.JSON
	}
	if timed {
		ints["--max-output"] = &c.MaxOutput
	}
	if op == opWait || op == opInterrupt {
		ints["--cell"] = &c.Cell
	}
	switch op {
	case opExec:
		bools["--no-wait"], bools["--queue"] = &c.NoWait, &c.Queue
		fallthrough
	case opRun:
		bools["--sudo"], strs["--python"], strs["--host"] = &c.Sudo, &c.Python, &c.Host
	case opVars:
		bools["--all"], ints["--limit"] = &c.All, &c.Limit
	case opComplete:
		ints["--limit"] = &c.Limit
	case opReset:
		bools["--keep-imports"] = &c.KeepImports
	}
	if waits {
		floats["--wait"] = &c.Wait
	}
	cellGiven := false
	for i := 0; i < len(args); i++ {
		a, secs := args[i], ""
		name := flagName(a)
		if p := bools[name]; p != nil {
			if *p, ok = boolFlag(a, name); !ok {
				return Call{}, nil, false
			}
			continue
		}
		if p := ints[name]; p != nil {
			if *p, i, ok = intFlag(args, i, name); !ok {
				return Call{}, nil, false
			}
			cellGiven = cellGiven || name == "--cell"
			continue
		}
		if p := floats[name]; p != nil {
			if *p, i, ok = floatFlag(args, i, name); !ok {
				return Call{}, nil, false
			}
			continue
		}
		if p := strs[name]; p != nil {
			// pflag's StringVar: the next word, whatever it is; empty,
			// package cli refuses it.
			if *p, i, ok = flagValue(args, i, name); !ok || *p == "" {
				return Call{}, nil, false
			}
			continue
		}
		switch {
		case timed && (a == "-t" || a == "--timeout"):
			if i++; i == len(args) {
				return Call{}, nil, false
			}
			secs = args[i]
		case timed && hasPrefix(a, "--timeout="):
			secs = a[len("--timeout="):]
		case timed && len(a) > 2 && a[:2] == "-t":
			if secs = a[2:]; secs[0] == '=' {
				secs = secs[1:]
			}
		case a == "" || a[0] != '-' || a == "-":
			words = append(words, a)
			continue
		default:
			return Call{}, nil, false
		}
		var err error
		if c.Timeout, err = strconv.ParseFloat(secs, 64); err != nil {
			return Call{}, nil, false
		}
	}
	// Checked once, at the end, as cobra does.
	if timed && !lean.TimeoutOK(c.Timeout) || c.MaxOutput < 0 || c.MaxOutput > lean.MaxOutput ||
		(op == opInterrupt || op == opWait) && cellGiven && c.Cell < 1 || !(c.Wait >= 0 && c.Wait <= lean.MaxTimeout) || c.Limit < 0 {
		return Call{}, nil, false
	}
	// As the command line's client sends them, through a time.Duration:
	// under a nanosecond is 0, the hub's default; a query's --wait 0 is
	// -1, not to wait.
	c.Timeout = time.Duration(c.Timeout * float64(time.Second)).Seconds()
	if waits && c.Wait == 0 {
		c.Wait = -1
	} else {
		c.Wait = time.Duration(c.Wait * float64(time.Second)).Seconds()
	}
	return c, words, true
}

// flagName is the long flag a names, written alone or with =VALUE; ""
// for any other argument.
func flagName(a string) string {
	if !hasPrefix(a, "--") {
		return ""
	}
	for i := 2; i < len(a); i++ {
		if a[i] == '=' {
			return a[:i]
		}
	}
	return a
}

// boolFlag reads the bool flag name written a: true alone, else its
// =VALUE as pflag reads it (strconv.ParseBool).
func boolFlag(a, name string) (v, ok bool) {
	if a == name {
		return true, true
	}
	v, err := strconv.ParseBool(a[len(name)+1:])
	return v, err == nil
}

// intFlag reads the number of the int flag name at args[i], written
// `name N` or `name=N`, as pflag's IntVar does (strconv.ParseInt in base
// 0, the next word whatever it is); i is then the index of its last word.
func intFlag(args []string, i int, name string) (n, last int, ok bool) {
	v, last, ok := flagValue(args, i, name)
	n64, err := strconv.ParseInt(v, 0, 64)
	return int(n64), last, ok && err == nil
}

// floatFlag is intFlag for a float flag (pflag's Float64Var:
// strconv.ParseFloat).
func floatFlag(args []string, i int, name string) (f float64, last int, ok bool) {
	v, last, ok := flagValue(args, i, name)
	f, err := strconv.ParseFloat(v, 64)
	return f, last, ok && err == nil
}

// flagValue is the value of the flag name at args[i]: after its = or the
// next word; false when there is none.
func flagValue(args []string, i int, name string) (v string, last int, ok bool) {
	if v = args[i][len(name):]; v != "" {
		return v[1:], i, true
	}
	if i++; i == len(args) {
		return "", i, false
	}
	return args[i], i, true
}

// hasPrefix is strings.HasPrefix, which this package does not import (see
// its doc).
func hasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}
