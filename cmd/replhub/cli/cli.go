// Package cli holds replhub's cobra commands. Each command parses its flags
// into an options struct and calls a run function that talks to package
// client and writes to injected streams; exit codes and error text are
// decided in one place, package cmdenv, which a plain exec also runs with
// before this package is initialized (package early).
package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/cmd/replhub/early"
)

// env is what every command shares (cmdenv.Env); the commands' own
// helpers are its methods here.
type env struct{ *cmdenv.Env }

// IO is where a command reads and writes.
type IO = cmdenv.IO

// Main runs the CLI with os.Args and returns the process's exit status.
func Main() int {
	return Run(context.Background(), os.Args[1:], IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
}

// Resume finishes the plain exec that package early sent (cmdenv's
// Env.Resume), on stdio.
func Resume(s *early.Sent) int {
	e := cmdenv.New(cmdenv.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
	e.Exiting = true
	return e.Finish(e.Resume(context.Background(), s))
}

// Run runs the CLI with args; tests call it with buffers.
func Run(ctx context.Context, args []string, stdio IO, getenv func(string) string) int {
	e := &env{cmdenv.New(stdio, getenv)}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	completionCmd(root) // after SetOut: cobra's takes the writer as it is made
	withAdvice(root)
	return e.Finish(root.ExecuteContext(ctx))
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
		Version:       cmdenv.Version,
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

// completionCmd makes cobra's completion command now rather than at
// Execute, and refuses a shell it has no script for: `completion tcsh`
// printed its help and exited 0, and `source <(replhub completion tcsh)`
// sourced the help.
func completionCmd(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("no completion script for %q: bash, zsh, fish or powershell", args[0])
				}
				return nil
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() } // runnable: its Args are checked
		}
	}
}

// withAdvice makes the command line's own errors say what to do: a wrong
// count of arguments shows the usage, a bad flag points to --help, and
// an unknown one also to --, which a code or a value that starts with -
// needs before it.
func withAdvice(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		msg := err.Error()
		if strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand flag") {
			return fmt.Errorf("%s: `%s --help` lists the flags; an argument that starts with - goes after -- (%s -- ARG)", msg, c.CommandPath(), c.CommandPath())
		}
		return fmt.Errorf("%s: `%s --help` says more", msg, c.CommandPath())
	})
	for _, c := range root.Commands() {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return fmt.Errorf("%v; usage: %s", err, cmd.UseLine())
				}
				return nil
			}
		}
	}
}
