// Package cli holds replhub's cobra commands. Each command parses its flags
// into an options struct and calls a run function that talks to package
// client and writes to injected streams; exit codes and error text are
// decided in one place, exitCode and errorText.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

// Version is the binary's version; set at build time with -ldflags.
var Version = "0.1.0-dev"

// Exit codes, decided here and nowhere else.
const (
	ExitOK        = 0
	ExitCellError = 1 // the cell raised
	ExitFailure   = 2 // replhub could not do what was asked
	ExitRunning   = 3 // the cell still runs after the timeout
	ExitDead      = 4 // the session died
)

// IO is where a command reads and writes.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// env is what every command shares.
type env struct {
	io     IO
	getenv func(string) string
	client func() (*client.Client, error)
	code   int // the exit code a command chose, when it did not fail
	// shown is set while a group's progress line is on the terminal.
	shown bool
}

// Main runs the CLI with os.Args and returns the process's exit status.
func Main() int {
	return Run(context.Background(), os.Args[1:], IO{os.Stdin, os.Stdout, os.Stderr}, os.Getenv)
}

// Run runs the CLI with args; tests call it with buffers.
func Run(ctx context.Context, args []string, stdio IO, getenv func(string) string) int {
	e := &env{io: stdio, getenv: getenv}
	var cached *client.Client
	e.client = func() (*client.Client, error) {
		if cached != nil {
			return cached, nil
		}
		paths, err := config.FromEnv(getenv)
		if err != nil {
			return nil, err
		}
		cached = client.New(paths)
		return cached, nil
	}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	err := root.ExecuteContext(ctx)
	if cached != nil {
		cached.Close()
	}
	if err != nil {
		fmt.Fprintln(stdio.Err, "replhub: "+errorText(err))
		return ExitFailure
	}
	return e.code
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "replhub",
		Short: "Named Python sessions that keep their state between calls",
		Long: `replhub keeps named Python sessions alive between calls, so that imports,
loaded data and open connections persist. A hub daemon owns the sessions; it
starts on first use. This is not a sandbox: code runs with your privileges.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.AddCommand(
		newExecCmd(e), newWaitCmd(e), newInterruptCmd(e), newKillCmd(e),
		newSessionsCmd(e), newStartCmd(e), newStopCmd(e), newRestartCmd(e), newHubCmd(e),
		newMCPCmd(e), newSelfTestCmd(e), newPushCmd(e), newPullCmd(e),
		newSwapCmd(e), newRunCmd(e),
		newVarsCmd(e), newInspectCmd(e), newCompleteCmd(e), newResetCmd(e),
		newModulesCmd(e), newAttachCmd(e),
	)
	addCompletions(e, root)
	return root
}

// errorText turns an error into one line that says what to do next.
func errorText(err error) string {
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

// resultCode is the exit code for a cell's result.
func resultCode(r *wire.Result) int {
	switch r.Status {
	case wire.StatusError:
		return ExitCellError
	case wire.StatusRunning, wire.StatusTimeout:
		return ExitRunning
	case wire.StatusDead:
		return ExitDead
	case wire.StatusFailed:
		return ExitFailure
	}
	return ExitOK
}

// printResult writes a result as text or JSON and sets the exit code. A
// group's JSON is one object per host, a line each.
func (e *env) printResult(r *wire.Result, asJSON bool) error {
	e.code = resultCode(r)
	if err := e.saveDisplay(r); err != nil {
		return err
	}
	if asJSON && r.Fan != nil {
		return writeJSONLines(e.io.Out, r.Fan)
	}
	if asJSON {
		return writeJSON(e.io.Out, r)
	}
	_, err := io.WriteString(e.io.Out, r.Text())
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
