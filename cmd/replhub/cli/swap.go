package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/wire"
)

type swapOptions struct {
	name  string
	force bool
	json  bool
}

func newSwapCmd(e *env) *cobra.Command {
	o := &swapOptions{}
	cmd := &cobra.Command{
		Use:   "swap [NAME]",
		Short: "Swap a session to disk now, or run the sweep of idle sessions",
		Long: `With NAME, pickle that session's namespace to disk now and end it; the next
exec or session() under its name starts it again where it was and loads it.
Without NAME, run the sweep the hub runs every 10 minutes: swap every session
nobody has used for swap_after_hours (config.json).

Root sessions, sessions running a cell and (without --force) sessions with a
background job (a thread that is not a daemon, a child process) are kept.`,
		Example: `  replhub swap chirp
  replhub swap
  replhub swap build --force --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.name = args[0]
			}
			return runSwap(cmd.Context(), e, o)
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "swap NAME even while a background job runs (the job ends)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print what became of each session as JSON")
	return cmd
}

func runSwap(ctx context.Context, e *env, o *swapOptions) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	rep, err := c.Swap(ctx, o.name, o.force)
	if err != nil {
		return err
	}
	if o.name != "" && (len(rep.Swaps) != 1 || rep.Swaps[0].Status != wire.SwapDone && rep.Swaps[0].Status != wire.SwapOnDisk) {
		e.Code = cmdenv.ExitFailure
	}
	if o.json {
		return wire.WriteJSON(e.IO.Out, rep.Swaps)
	}
	if len(rep.Swaps) == 0 {
		fmt.Fprintln(e.IO.Out, "no sessions")
	}
	for _, s := range rep.Swaps {
		fmt.Fprintln(e.IO.Out, s.Line())
	}
	return nil
}
