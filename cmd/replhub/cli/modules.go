package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/modules"
	"github.com/replhub/replhub/wire"
)

func newModulesCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "modules",
		Short: "List the modules sessions import as replhub.NAME, shipped and yours",
		Long: `Lists the modules that code in any session imports with
'from replhub import NAME': the shipped ones and yours (each NAME.py in the
modules folder, which shadows a shipped one), with the first line of each
one's docstring. It reads this machine's folder; no hub is needed.`,
		Example: `  replhub modules
  replhub modules --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, err := config.FromEnv(e.Getenv)
			if err != nil {
				return err
			}
			list := modules.List(paths.Modules())
			if asJSON {
				return wire.WriteJSON(e.IO.Out, list)
			}
			_, err = fmt.Fprintln(e.IO.Out, modules.Text(list, paths.Modules()))
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON: name, doc, user, shadows, error")
	return cmd
}
