package cli

import (
	"context"
	"crypto/rand"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/internal/lean"
)

type runOptions struct {
	execOptions
	transcript bool
}

func newRunCmd(e *env) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run CODE|-",
		Short: "Run code once in a session of its own that ends with it",
		Long: `Run CODE (with -, read it from standard input) in a new session that nobody
else sees, print the reply as exec does, and end the session: nothing is left
behind (no name in sessions, no death note, no transcript unless --transcript).
Ctrl-C interrupts the cell and still ends the session. Past the timeout the
cell is stopped with its session.

Exit status: 0 ok, 1 the cell raised, 2 replhub failed, 3 the cell outlived
the timeout, 4 the session died.`,
		Example: `  replhub run 'import sys; sys.version'
  replhub run - < script.py
  replhub run 'import platform; platform.node()' --host lab-7
  replhub run 'import os; os.geteuid()' --sudo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.jumpSet = cmd.Flags().Changed("jump")
			if err := noEmptyPlace(cmd); err != nil {
				return err
			}
			var err error
			if o.code, err = e.ReadCode(args[0]); err != nil {
				return err
			}
			return runRun(cmd.Context(), e, o)
		},
	}
	o.execOptions.sessionFlags(cmd)
	cmd.Flags().BoolVar(&o.transcript, "transcript", false, "keep the run's transcript (its path goes to stderr)")
	return cmd
}

func runRun(ctx context.Context, e *env, o *runOptions) error {
	if err := checkMaxOutput(o.maxOutput); err != nil {
		return err
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	eo := o.execOptions.client()
	eo.Transcript = o.transcript
	name, err := lean.RunName(rand.Reader)
	if err != nil {
		return err
	}
	return e.Run(ctx, name, o.code, eo, o.json)
}
