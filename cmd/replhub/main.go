// Command replhub is the CLI, the MCP stdio server and the hub daemon of
// replhub, chosen by subcommand.
package main

import (
	"os"

	"github.com/replhub/replhub/cmd/replhub/cli"
)

func main() { os.Exit(cli.Main()) }
