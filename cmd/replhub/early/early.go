// Package early answers the commonest calls from its init function:
// `replhub --version`, and a plain `replhub exec NAME CODE` (with -t SECS,
// --json, --max-output N, --no-wait and --queue or not), `replhub wait
// NAME` (with -t, --json, --max-output and --cell N or not), `replhub
// sessions [NAME]` (with --json or not), `replhub interrupt NAME` (with
// --cell N or not) or `replhub kill NAME` whose output goes to a program
// (neither standard output nor standard error is a terminal) and whose
// session runs. Go runs every package's init before
// main, and those of the packages that only the hub, the MCP server and
// ssh need (net/http, JSON schemas, x/crypto/ssh, x509, encoding/gob) are
// most of a one-line call's start-up.
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
	"strconv"
	"time"

	"github.com/replhub/replhub/internal/lean"
)

// Call is a plain exec's, wait's, sessions', interrupt's or kill's
// arguments.
type Call struct {
	// Op is the request's: "exec", "wait", "sessions", "interrupt" or
	// "kill" (wire.OpExec, wire.OpWait, wire.OpSessions, wire.OpInterrupt,
	// wire.OpKill).
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
)

func init() {
	args := os.Args[1:]
	if IsVersion(args) {
		// As cobra prints it.
		os.Stdout.WriteString("replhub version " + lean.Version + "\n")
		os.Exit(0)
	}
	call, ok := PlainCall(args)
	if !ok || !lean.Supported || lean.IsTerminal(1) || lean.IsTerminal(2) {
		return
	}
	sent, exit := send(call, stdio{os.Stdin, os.Stdout, os.Stderr, os.Getenv})
	if exit >= 0 {
		os.Exit(exit)
	}
	Pending = sent
}

// stdio is what send reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
	getenv   func(string) string
}

// send sends the call (an exec again with the caller's folder and
// environment for a new session) and, when the reply is plain, prints it
// and returns its exit status. Otherwise it returns -1, and what package
// cli is to finish, or nil when cli is to do it all: no hub answers (cli
// starts one), the socket's folder is unsafe (cli says why).
func send(call Call, std stdio) (*Sent, int) {
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
		Queue: call.Queue, MaxOutput: call.MaxOutput, Plain: !call.JSON, JSON: call.JSON}
	sent := &Sent{Call: call}
	var disarm func()
	defer func() {
		if disarm != nil {
			disarm() // for package cli, when it goes on
		}
	}()
	for withEnv := false; ; withEnv = true {
		req, ok := lean.AppendRequest(nil, r)
		if !ok || len(req) > lean.MaxLine || c.Write(req) != nil {
			// The hub takes a request only whole, and it did not take it.
			sent.Unsent = true
			return sent, -1
		}
		wait := armAfter
		if withEnv {
			wait = armAfterNew
		}
		// Ctrl-C on a list, an interrupt or a kill has its default
		// action, as on the command line's: the command ends.
		if disarm == nil && (call.Op == opExec || call.Op == opWait) && !c.Readable(wait) {
			disarm = lean.CtrlC(lean.InterruptNote(name), std.err, func() { interrupt(sock, name) },
				func() { os.Exit(fail(std.err, "context canceled")) }, nil)
		}
		line, err := c.ReadLine()
		if err != nil {
			return sent, -1
		}
		if v, exit, text, ok := lean.ParsePlain(line); ok && v == lean.Protocol {
			if _, err := io.WriteString(std.out, text); err != nil {
				return nil, fail(std.err, err.Error())
			}
			return nil, exit
		}
		if !withEnv && call.Op == opExec && lean.IsNeedEnv(line) {
			// A new session, made in this process's folder and
			// environment, which only that needs (as client.Exec).
			r.Cwd, _ = os.Getwd()
			r.Env = os.Environ()
			continue
		}
		sent.Line = line
		return sent, -1
	}
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
// for `replhub wait` to collect.
const armAfter = 20 * time.Millisecond

// armAfterNew is armAfter for the exec that makes a new session, most of
// whose wait is the session's start: a Ctrl-C then cannot keep the cell
// from running once the session is up, armed or not (an interrupt finds
// no cell running yet), and ending the command at once is the better
// answer to it.
const armAfterNew = 250 * time.Millisecond

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
// PlainWait, PlainSessions, PlainInterrupt or PlainKill.
func PlainCall(args []string) (Call, bool) {
	for _, take := range []func([]string) (Call, bool){PlainExec, PlainWait, PlainSessions, PlainInterrupt, PlainKill} {
		if c, ok := take(args); ok {
			return c, true
		}
	}
	return Call{}, false
}

// PlainExec reports whether args are `exec NAME CODE`, CODE being `-`
// for standard input, with no flag but -t (its seconds, else
// lean.DefaultTimeout), --json, --max-output, --no-wait and --queue,
// written anywhere after exec in any of the ways cobra takes them: -t S,
// -tS, -t=S, --timeout S, --timeout=S; --json, --json=BOOL (so too
// --no-wait and --queue); --max-output N, --max-output=N; the last one
// counting. Any other argument that starts with - (so `--` too),
// an empty argument, or a value that cobra would refuse
// (strconv.ParseFloat and lean.TimeoutOK, strconv.ParseBool,
// strconv.ParseInt in base 0 and 0 to lean.MaxOutput) leave the call to
// package cli, which says what is wrong.
func PlainExec(args []string) (Call, bool) {
	if len(args) < 3 || args[0] != opExec {
		return Call{}, false
	}
	c, words, ok := plainFlags(args[1:], opExec)
	if !ok || len(words) != 2 || words[0] == "" || words[1] == "" || words[0] == "-" {
		return Call{}, false
	}
	c.Name, c.Code = words[0], words[1]
	return c, true
}

// PlainWait reports whether args are `wait NAME` with no flag but -t,
// --json, --max-output and --cell (--cell N, --cell=N; a number cobra
// takes, from 0), as PlainExec says.
func PlainWait(args []string) (Call, bool) {
	if len(args) < 2 || args[0] != opWait {
		return Call{}, false
	}
	c, words, ok := plainFlags(args[1:], opWait)
	if !ok || len(words) != 1 || words[0] == "" || words[0] == "-" || c.Cell < 0 {
		return Call{}, false
	}
	c.Name = words[0]
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
	return plainName(args, opInterrupt)
}

// PlainKill reports whether args are `kill NAME` with no flag, as
// PlainExec says.
func PlainKill(args []string) (Call, bool) {
	return plainName(args, opKill)
}

// plainName reads args as command op's word, then one name and op's flags.
func plainName(args []string, op string) (Call, bool) {
	if len(args) < 2 || args[0] != op {
		return Call{}, false
	}
	c, words, ok := plainFlags(args[1:], op)
	if !ok || len(words) != 1 || words[0] == "" || words[0] == "-" {
		return Call{}, false
	}
	c.Name = words[0]
	return c, true
}

// plainFlags reads args, those after the command op's word, as PlainExec
// says: the flags op takes into c, and the words. An exec and a wait take
// -t and --max-output (timed); they and the list take --json; a wait and
// an interrupt take --cell; a kill takes none.
func plainFlags(args []string, op string) (c Call, words []string, ok bool) {
	c.Op = op
	timed := op == opExec || op == opWait
	if timed {
		c.Timeout = lean.DefaultTimeout
	}
	cellGiven := false
	for i := 0; i < len(args); i++ {
		a, secs := args[i], ""
		switch {
		case (timed || op == opSessions) && isFlag(a, "--json"):
			if c.JSON, ok = boolFlag(a, "--json"); !ok {
				return Call{}, nil, false
			}
			continue
		case op == opExec && isFlag(a, "--no-wait"):
			if c.NoWait, ok = boolFlag(a, "--no-wait"); !ok {
				return Call{}, nil, false
			}
			continue
		case op == opExec && isFlag(a, "--queue"):
			if c.Queue, ok = boolFlag(a, "--queue"); !ok {
				return Call{}, nil, false
			}
			continue
		case timed && isFlag(a, "--max-output"):
			if c.MaxOutput, i, ok = intFlag(args, i, "--max-output"); !ok {
				return Call{}, nil, false
			}
			continue
		case (op == opWait || op == opInterrupt) && isFlag(a, "--cell"):
			if c.Cell, i, ok = intFlag(args, i, "--cell"); !ok {
				return Call{}, nil, false
			}
			cellGiven = true
			continue
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
		op == opInterrupt && cellGiven && c.Cell < 1 {
		return Call{}, nil, false
	}
	// As the command line's client sends it, through a time.Duration: under
	// a nanosecond is 0, the hub's default.
	c.Timeout = time.Duration(c.Timeout * float64(time.Second)).Seconds()
	return c, words, true
}

// isFlag reports whether a is the long flag name, alone or with =VALUE.
func isFlag(a, name string) bool {
	return a == name || hasPrefix(a, name+"=")
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
	v := args[i][len(name):]
	if v == "" {
		if i++; i == len(args) {
			return 0, i, false
		}
		v = args[i]
	} else {
		v = v[1:]
	}
	n64, err := strconv.ParseInt(v, 0, 64)
	return int(n64), i, err == nil
}

// hasPrefix is strings.HasPrefix, which this package does not import (see
// its doc).
func hasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}
