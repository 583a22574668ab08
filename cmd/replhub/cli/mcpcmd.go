package cli

import (
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/mcp"
)

func newMCPCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP on stdin/stdout, for AI agents",
		Long: `Serve MCP over stdio with the tools exec, wait, interrupt, kill and sessions.
Register it with, for example:

  claude mcp add -s user replhub -- replhub mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tuneMCP(e.Getenv)
			c, err := e.Client()
			if err != nil {
				return err
			}
			return mcp.Serve(cmd.Context(), c, cmdenv.Version, io.NopCloser(e.IO.In), nopWriteCloser{e.IO.Out})
		},
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// tuneMCP runs the collector a quarter as often, unless GOGC says
// otherwise. The MCP SDK decodes a tool call seven times, each with a
// 32 KiB buffer of its own: on the server's small heap that ran the
// collector every few calls. (One P, as the hub has, would cost the
// server more than it saves: its SDK reads standard input, a blocking
// descriptor, and a goroutine made runnable meanwhile waits until the
// runtime takes the P back from that read.)
func tuneMCP(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
