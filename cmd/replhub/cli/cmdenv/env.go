// Package cmdenv is what every replhub command runs with: its streams and
// environment, a client made on first use, the error text (decided here
// and nowhere else), and the printing of a cell's result with its display
// files, streamed output and Ctrl-C. It also finishes a plain exec that
// package early began (Env.Resume).
package cmdenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

// Version is the binary's version (lean.Version, which -ldflags -X
// sets).
var Version = lean.Version

// Exit codes: wire's.
const (
	ExitOK        = wire.ExitOK
	ExitCellError = wire.ExitCellError
	ExitFailure   = wire.ExitFailure
	ExitRunning   = wire.ExitRunning
	ExitDead      = wire.ExitDead
)

// IO is where a command reads and writes.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Env is what every command shares. Make it with New and end it with
// Finish.
type Env struct {
	IO     IO
	Getenv func(string) string
	// Client is the hub's client, made at the first call.
	Client func() (*client.Client, error)
	// Code is the exit code a command chose, when it did not fail.
	Code int
	// Exiting says the process exits as soon as the command returns, so
	// what would only tidy this process up (a signal handler's removal,
	// the client's close) is skipped.
	Exiting bool
	// scr is what a terminal shows before a reply (screen); nil until
	// then.
	scr    *lean.Screen
	client *client.Client
}

// New returns an Env on stdio and getenv.
func New(stdio IO, getenv func(string) string) *Env {
	e := &Env{IO: stdio, Getenv: getenv}
	e.Client = func() (*client.Client, error) {
		if e.client != nil {
			return e.client, nil
		}
		paths, err := config.FromEnv(getenv)
		if err != nil {
			return nil, err
		}
		e.client = client.New(paths)
		return e.client, nil
	}
	return e
}

// Finish closes the client and returns the process's exit status: on
// err, ExitFailure after one line on stderr that says what to do.
func (e *Env) Finish(err error) int {
	if e.client != nil && !e.Exiting {
		e.client.Close()
	}
	if err != nil {
		// What a host printed may be in it (a failed start's noise).
		fmt.Fprintln(e.IO.Err, "replhub: "+wire.Printable(ErrorText(err), true))
		return ExitFailure
	}
	return e.Code
}

// ErrorText turns an error into one line that says what to do next.
func ErrorText(err error) string {
	var we *wire.Error
	var fe *safesock.FolderError
	var pe *safesock.PeerError
	switch {
	case errors.As(err, &we):
		return we.Message
	case errors.As(err, &fe):
		return fe.Error()
	case errors.As(err, &pe):
		return pe.Error() + "; refusing to send your code, cwd and environment to another user's hub"
	case errors.Is(err, safesock.ErrNoHub):
		return "no hub is running (`replhub start` starts one)"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out waiting for the hub"
	}
	return strings.TrimPrefix(err.Error(), "replhub: ")
}

// PrintResult writes a result as text or JSON and sets the exit code. A
// group's JSON is one object per host, a line each.
func (e *Env) PrintResult(r *wire.Result, asJSON bool) error {
	e.Code = r.ExitCode()
	if err := e.SaveDisplay(r); err != nil {
		return err
	}
	if asJSON && r.Fan != nil {
		return writeJSONLines(e.IO.Out, r.Fan)
	}
	if asJSON {
		return r.WriteJSON(e.IO.Out)
	}
	_, err := io.WriteString(e.IO.Out, r.Text())
	return err
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}
