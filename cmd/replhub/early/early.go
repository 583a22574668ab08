// Package early answers the commonest calls from its init function:
// `replhub --version`, and a plain `replhub exec NAME CODE` whose output
// goes to a program (neither standard output nor standard error is a
// terminal) and whose session runs. Go runs every package's init before
// main, and those of the packages that only the hub, the MCP server and
// ssh need (net/http, JSON schemas, x/crypto/ssh, x509, encoding/gob) are
// most of a one-line call's start-up.
//
// Go initializes a package as soon as its imports are done and no ready
// package sorts before it (the spec's "Package initialization"). This
// package imports only os, os/signal and internal/lean, which import none
// of strings, bufio, net or encoding/json (see lean's doc), so its init
// runs after a score of the runtime's and the standard library's, before
// anything of replhub's or of its libraries; tests/startup_test.go checks
// that with GODEBUG=inittrace.
//
// A call it does not take returns from init untouched, and package cli
// runs it as before. A call it sent but whose reply it cannot print
// (an error, a display, a session not there yet) it leaves in Pending,
// which main hands to package cli with the reply line.
package early

import (
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/replhub/replhub/internal/lean"
)

// Sent is a plain exec that init took and did not finish.
type Sent struct {
	Name, Code string
	// Unsent says the hub did not get it (Code is what standard input
	// held, for `-`).
	Unsent bool
	// Line is the hub's reply line; nil when the hub closed the
	// connection before it.
	Line []byte
}

// Pending is the exec init left to package cli, or nil.
var Pending *Sent

// Ops of wire.Request, which this package cannot import (TestOps).
const (
	opExec      = "exec"
	opInterrupt = "interrupt"
)

func init() {
	args := os.Args[1:]
	if IsVersion(args) {
		// As cobra prints it.
		os.Stdout.WriteString("replhub version " + lean.Version + "\n")
		os.Exit(0)
	}
	name, code, ok := PlainExec(args)
	if !ok || !lean.Supported || lean.IsTerminal(1) || lean.IsTerminal(2) {
		return
	}
	Pending = exec(name, code)
}

// exec sends the exec (again with the caller's folder and environment
// for a new session) and prints its reply when it is plain; otherwise
// returns what package cli is to finish, or nil when it is to do it all:
// no hub answers (cli starts one), the socket's folder is unsafe (cli
// says why).
func exec(name, code string) *Sent {
	dir, _ := lean.RuntimeDir(os.Getenv)
	if lean.CheckDir(dir) != nil {
		return nil
	}
	sock := dir + "/" + lean.SocketName
	c, err := lean.Dial(sock)
	if err != nil {
		return nil
	}
	if code == "-" {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, lean.MaxLine+1))
		if err != nil {
			fail("reading code from stdin: " + err.Error())
		}
		if len(b) > lean.MaxLine {
			fail(lean.CodeTooBig)
		}
		code = string(b)
	}
	r := lean.Request{Op: opExec, Name: name, Code: code, Timeout: lean.DefaultTimeout, Plain: true}
	// SIGINT is ignored while the reply is quick to come, and handled
	// after: setting up a handler (two threads, a few hundred
	// microseconds) would be a tenth of a warm call.
	var k ctrlC
	signal.Ignore(os.Interrupt)
	defer k.disarm() // for package cli, when this returns
	for withEnv := false; ; withEnv = true {
		req, ok := lean.AppendRequest(nil, r)
		if !ok || len(req) > lean.MaxLine || c.Write(req) != nil {
			// The hub takes a request only whole, and it did not take it.
			c.Close()
			return &Sent{Name: name, Code: code, Unsent: true}
		}
		if k.sig == nil && !c.Readable(armAfter) {
			k.arm(name, sock)
		}
		line, err := c.ReadLine()
		if err != nil {
			return &Sent{Name: name, Code: code}
		}
		if v, exit, text, ok := lean.ParsePlain(line); ok && v == lean.Protocol {
			if _, err := os.Stdout.WriteString(text); err != nil {
				fail(err.Error())
			}
			os.Exit(exit)
		}
		if !withEnv && lean.IsNeedEnv(line) {
			// A new session, made in this process's folder and
			// environment, which only that needs (as client.Exec).
			r.Cwd, _ = os.Getwd()
			r.Env = os.Environ()
			continue
		}
		return &Sent{Name: name, Code: code, Line: line}
	}
}

// fail ends the process as package cli does on a failure: one line on
// standard error, exit status 2 (cmdenv.ExitFailure).
func fail(msg string) {
	os.Stderr.WriteString("replhub: " + msg + "\n")
	os.Exit(2)
}

// armAfter is how long a reply may take before Ctrl-C is armed: a
// Ctrl-C sooner than that after the call is sent is lost, as one before
// cmdenv's handler is in place is.
const armAfter = 20 * time.Millisecond

// ctrlC is an exec's Ctrl-C: ignored, then armed.
type ctrlC struct{ sig chan os.Signal }

// arm makes a first Ctrl-C interrupt the cell, saying so, and a second
// stop waiting, as package cli's exec does.
func (k *ctrlC) arm(name, sock string) {
	sig := make(chan os.Signal, 2)
	k.sig = sig
	signal.Notify(sig, os.Interrupt)
	go func() {
		<-sig
		os.Stderr.WriteString(lean.InterruptNote(name) + "\n")
		go interrupt(sock, name)
		<-sig
		os.Stderr.WriteString("replhub: context canceled\n")
		os.Exit(2)
	}()
}

// disarm gives SIGINT back its default action, which a process that
// package cli goes on with needs: an ignored SIGINT would be ignored in
// the hub it may start, and so in its sessions, which could not be
// interrupted. os/signal gives it back only through Notify: an ignored
// signal stays ignored through Reset.
func (k *ctrlC) disarm() {
	if k.sig == nil {
		k.sig = make(chan os.Signal, 1)
		signal.Notify(k.sig, os.Interrupt)
	}
	signal.Stop(k.sig)
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

// PlainExec reports whether args are `exec NAME CODE` and nothing else,
// CODE being `-` for standard input: no flag (an argument that starts
// with -, which also leaves `--` to cobra) and no empty argument, which
// package cli refuses with its own message.
func PlainExec(args []string) (name, code string, ok bool) {
	if len(args) != 3 || args[0] != "exec" {
		return "", "", false
	}
	name, code = args[1], args[2]
	if name == "" || code == "" || name[0] == '-' || code[0] == '-' && code != "-" {
		return "", "", false
	}
	return name, code, true
}
