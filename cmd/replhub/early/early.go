// Package early runs the commonest call, a plain `replhub exec NAME CODE`,
// and `replhub --version`, from its init function, so that it does not wait for the inits of the
// packages only the hub, the MCP server and ssh need: Go runs every
// package's init before main, and those of the MCP SDK (net/http, JSON
// schemas), x/crypto/ssh and x509 are most of a CLI call's start-up.
//
// Go initializes packages in the order of their import paths among those
// whose imports are done (the spec's "Package initialization"). This
// package imports only cmdenv and what it imports (client, config, wire),
// none of which pulls in the hub, MCP or ssh packages, so its init runs
// before theirs; tests/startup_test.go checks that with GODEBUG=inittrace.
// Any other command line, a flag included, returns from init and
// goes through package cli as before, with the same cmdenv doing the work.
package early

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
)

func init() {
	if IsVersion(os.Args[1:]) {
		// As cobra prints it.
		os.Stdout.WriteString("replhub version " + cmdenv.Version + "\n")
		os.Exit(cmdenv.ExitOK)
	}
	name, code, ok := PlainExec(os.Args[1:])
	if !ok {
		return
	}
	e := cmdenv.New(cmdenv.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
	e.Exiting = true
	code, err := e.ReadCode(code)
	if err == nil {
		err = e.Exec(context.Background(), name, code, client.ExecOptions{Timeout: cmdenv.DefaultTimeout * time.Second}, false, true)
	}
	os.Exit(e.Finish(err))
}

// IsVersion reports whether args ask for the version alone, as cobra's
// version flag takes it: `--version` or `-v`.
func IsVersion(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-v")
}

// PlainExec reports whether args are `exec NAME CODE` and nothing else,
// CODE being `-` for standard input: no flag (an argument that starts
// with -, which also leaves `--` to cobra) and no empty argument, which
// package cli refuses with its own message.
func PlainExec(args []string) (name, code string, ok bool) {
	if len(args) != 3 || args[0] != "exec" {
		return "", "", false
	}
	name, code = args[1], args[2]
	if name == "" || code == "" || strings.HasPrefix(name, "-") || strings.HasPrefix(code, "-") && code != "-" {
		return "", "", false
	}
	return name, code, true
}
