package cli

import (
	"io"

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
