package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
)

func newPushCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "push NAME SRC DEST",
		Short: "Copy a local file into a session's machine (DEST as the session sees it)",
		Long: `Copy the local file SRC to DEST as session NAME sees it (~ is its home), in
8 MiB chunks through the hub, with no scp. The file appears whole or not at
all; overwriting keeps DEST's mode, a new file takes SRC's. One regular file
at a time: tar a folder first; a FIFO or a device is refused.`,
		Example: `  replhub push lab ./data.csv ~/data.csv`,
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := nonEmpty("push", args); err != nil {
				return err
			}
			return runTransfer(cmd.Context(), e, func(c *client.Client, p client.Progress) (string, error) {
				return c.Push(cmd.Context(), args[0], args[1], args[2], p)
			})
		},
	}
}

func newPullCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "pull NAME SRC DEST",
		Short: "Copy a file from a session's machine to a local file",
		Long: `Copy SRC, as session NAME sees it, to the local file DEST, in 8 MiB chunks
through the hub. DEST appears whole or not at all; overwriting keeps its
mode, a new file takes SRC's. One regular file at a time: a FIFO or a device
is refused.`,
		Example: `  replhub pull lab /var/log/app.log ./app.log`,
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := nonEmpty("pull", args); err != nil {
				return err
			}
			return runTransfer(cmd.Context(), e, func(c *client.Client, p client.Progress) (string, error) {
				return c.Pull(cmd.Context(), args[0], args[1], args[2], p)
			})
		},
	}
}

// nonEmpty refuses a push's or pull's empty SRC or DEST: taken as the
// current folder, or sent as no path at all, it would say nothing clear.
func nonEmpty(op string, args []string) error {
	for i, what := range []string{"SRC", "DEST"} {
		if args[i+1] == "" {
			return fmt.Errorf("%s: %s is empty: give a file's path", op, what)
		}
	}
	return nil
}

func runTransfer(ctx context.Context, e *env, do func(*client.Client, client.Progress) (string, error)) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	var bar *progressBar
	if cmdenv.IsTerminal(e.IO.Err) {
		bar = &progressBar{w: e.IO.Err, start: time.Now()}
	}
	var p client.Progress
	if bar != nil {
		p = bar.update
	}
	msg, err := do(c, p)
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.IO.Out, msg)
	return nil
}

// progressBar draws one line on a terminal, at most ten times a second.
type progressBar struct {
	w     io.Writer
	start time.Time
	last  time.Time
}

func (b *progressBar) update(done, total int64) {
	now := time.Now()
	if now.Sub(b.last) < 100*time.Millisecond && done < total {
		return
	}
	b.last = now
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	const width = 30
	n := int(frac * width)
	rate := float64(done) / 1e6 / max(now.Sub(b.start).Seconds(), 1e-3)
	fmt.Fprintf(b.w, "\r%3d%% [%s%s] %.0f/%.0f MB  %.1f MB/s ", int(frac*100), strings.Repeat("=", n), strings.Repeat(" ", width-n),
		float64(done)/1e6, float64(total)/1e6, rate)
}

func (b *progressBar) clear() {
	fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", 79))
}
