// Command replhub is the CLI, the MCP stdio server and the hub daemon of
// replhub, chosen by subcommand.
package main

import (
	"os"

	"github.com/replhub/replhub/cmd/replhub/cli"
	// A plain `replhub exec NAME CODE` runs and exits from this package's
	// init, before the hub's, MCP's and ssh's inits (see its doc).
	"github.com/replhub/replhub/cmd/replhub/early"
)

func main() {
	if s := early.Pending; s != nil {
		os.Exit(cli.Resume(s))
	}
	os.Exit(cli.Main())
}
