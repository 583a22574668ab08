// Package sudo owns elevation: the modes (auto, nopasswd, askpass), sudo's
// command line, recognising what sudo says while a root worker starts, and
// running the $SUDO_ASKPASS program on the caller's side.
//
// A password travels only as a byte slice: from the askpass program's stdout
// to the client, over the hub's socket (raw bytes after the request line,
// never in JSON: see package wire), onto the first line of the new worker's
// stdin for `sudo -k -S`. It is never in argv, the environment, a
// log, a transcript, a death note or an error message, and every holder
// zeroes its slice after use (Zero).
package sudo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Modes, from config.json's "sudo" (top level and per host pattern).
const (
	// Auto tries `sudo -n` first, and asks for a password only when sudo
	// wants one. The default.
	Auto = "auto"
	// NoPasswd never asks; it fails where sudo wants a password.
	NoPasswd = "nopasswd"
	// AskPass always asks, skipping the -n try.
	AskPass = "askpass"
)

// DefaultTimeout bounds a root start where sudo says nothing recognisable.
const DefaultTimeout = 40 * time.Second

// Mode returns m, or Auto when m is empty.
func Mode(m string) string {
	if m == "" {
		return Auto
	}
	return m
}

// NewPrompt makes a prompt no other program prints, so that its second
// appearance tells a wrong password at once.
func NewPrompt() string {
	var b [6]byte
	rand.Read(b[:])
	return "[replhub-sudo-" + hex.EncodeToString(b[:]) + "] password: "
}

// Args is sudo's command line before the command: `sudo -n --` for a try
// that must not ask, `sudo -k -S -p PROMPT --` to read the password from
// the first stdin line (-k: even when credentials are cached, so that the
// line is always consumed by sudo and never reaches the worker).
func Args(bin string, withPassword bool, prompt string) []string {
	if bin == "" {
		bin = "sudo"
	}
	if !withPassword {
		return []string{bin, "-n", "--"}
	}
	return []string{bin, "-k", "-S", "-p", prompt, "--"}
}

// Kinds of Error.
const (
	KindWrongPassword    = "wrong_password"
	KindPasswordRequired = "password_required"
	KindNoTTY            = "no_tty"
	KindNotSudoer        = "not_sudoer"
	KindNoAnswer         = "no_answer"
)

// Error is a refusal recognised in what sudo printed.
type Error struct {
	Kind string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// IsKind reports whether err is a sudo *Error of kind.
func IsKind(err error, kind string) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == kind
}

// Watcher reads what sudo writes to stderr while a root worker starts and
// recognises its verdicts. Not safe for concurrent use.
type Watcher struct {
	prompt  string
	buf     []byte
	prompts int
}

// NewWatcher watches for prompt (empty for a `sudo -n` try).
func NewWatcher(prompt string) *Watcher { return &Watcher{prompt: prompt} }

var refusals = []struct {
	text, kind, msg string
}{
	{"Sorry, try again", KindWrongPassword, "sudo: wrong password"},
	{"incorrect password attempt", KindWrongPassword, "sudo: wrong password"},
	{"a password is required", KindPasswordRequired, "sudo: a password is required"},
	{"a terminal is required", KindNoTTY, "sudo: it insists on a terminal (\"you must have a tty\"); allow it without one in sudoers (Defaults !requiretty)"},
	{"must have a tty", KindNoTTY, "sudo: it insists on a terminal (\"you must have a tty\"); allow it without one in sudoers (Defaults !requiretty)"},
	{"is not in the sudoers file", KindNotSudoer, "sudo: this user is not in the sudoers file"},
	{"is not allowed to execute", KindNotSudoer, "sudo: this user may not run the interpreter as root (sudoers)"},
	{"may not run sudo", KindNotSudoer, "sudo: this user may not run sudo"},
}

// Feed takes the next bytes of stderr and returns an *Error once sudo has
// refused, nil otherwise. The prompt is recognised as a whole even when it
// arrives in pieces.
func (w *Watcher) Feed(p []byte) error {
	w.buf = append(w.buf, p...)
	if w.prompt != "" {
		w.prompts += bytes.Count(w.buf, []byte(w.prompt))
		if w.prompts > 1 {
			return &Error{KindWrongPassword, "sudo: wrong password"}
		}
	}
	s := string(w.buf)
	for _, r := range refusals {
		if strings.Contains(s, r.text) {
			return &Error{r.kind, r.msg}
		}
	}
	// Keep a tail long enough to hold a split prompt or refusal.
	if w.prompt != "" {
		if i := bytes.LastIndex(w.buf, []byte(w.prompt)); i >= 0 {
			w.buf = w.buf[i+len(w.prompt):]
		}
	}
	if n := len(w.buf); n > 256 {
		w.buf = append(w.buf[:0], w.buf[n-256:]...)
	}
	return nil
}

// AskError means the askpass program could not give a password.
type AskError struct {
	Program string
	Err     error
}

func (e *AskError) Error() string {
	return fmt.Sprintf("sudo: the askpass program %s failed: %v", e.Program, e.Err)
}

// ErrNoAskPass is returned when a password is needed and $SUDO_ASKPASS is
// not set.
var ErrNoAskPass = errors.New("sudo wants a password, and $SUDO_ASKPASS is not set: set SUDO_ASKPASS to a program that prints the password (ssh-askpass, a password manager's CLI), or allow this user NOPASSWD in sudoers")

// MaxPassword bounds a password: Ask refuses a longer line.
const MaxPassword = 4096

// Ask runs the askpass program with prompt as its argument, as sudo would,
// in env (nil: this process's), and returns the first line it prints,
// without the newline. The caller must Zero the result.
func Ask(ctx context.Context, program, prompt string, env []string) ([]byte, error) {
	if program == "" {
		return nil, ErrNoAskPass
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, prompt)
	cmd.Env = env
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, &AskError{program, err}
	}
	if err := cmd.Start(); err != nil {
		return nil, &AskError{program, err}
	}
	// The output goes from the pipe straight into one buffer that is
	// zeroed here (a bytes.Buffer would leave a copy behind each time it
	// grew), with room for the longest password and a CR LF.
	buf := make([]byte, MaxPassword+2)
	defer Zero(buf)
	n, _ := io.ReadFull(out, buf)
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	var pw []byte
	if len(line) <= MaxPassword {
		pw = make([]byte, len(line))
		copy(pw, line)
	}
	// Read the rest, through the same buffer, so that the program can end.
	for rerr := error(nil); rerr == nil; {
		_, rerr = out.Read(buf)
	}
	if err := cmd.Wait(); err != nil {
		Zero(pw)
		return nil, &AskError{program, err}
	}
	if pw == nil {
		return nil, &AskError{program, fmt.Errorf("it printed a line longer than %d bytes", MaxPassword)}
	}
	return pw, nil
}

// Line returns a new slice that holds pw and a newline, as sudo -S reads
// it. The caller must Zero it.
func Line(pw []byte) []byte {
	line := make([]byte, len(pw)+1)
	copy(line, pw)
	line[len(pw)] = '\n'
	return line
}

// Zero overwrites b.
func Zero(b []byte) {
	for i := range b {
		b[i] = 0
	}
}
