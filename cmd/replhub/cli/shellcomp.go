package cli

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/remote"
)

// completionDeadline bounds every shell completion: past it, the shell is
// offered nothing rather than kept waiting. REPLHUB_COMPLETION_WAIT (a Go
// duration) sets another, for tests on a loaded machine.
const completionDeadline = 100 * time.Millisecond

// deadline is completionDeadline, or REPLHUB_COMPLETION_WAIT's.
func (e *env) deadline() time.Duration {
	if d, err := time.ParseDuration(e.Getenv("REPLHUB_COMPLETION_WAIT")); err == nil && d > 0 && d <= time.Minute {
		return d
	}
	return completionDeadline
}

// sessionArgs are the commands whose first argument is a session name.
var sessionArgs = map[string]bool{
	"exec": true, "wait": true, "interrupt": true, "kill": true, "sessions": true,
	"push": true, "pull": true, "swap": true,
	"vars": true, "inspect": true, "complete": true, "reset": true, "attach": true,
}

// addCompletions teaches root's commands to complete session names, hosts
// and interpreters.
func addCompletions(e *env, root *cobra.Command) {
	for _, cmd := range root.Commands() {
		if sessionArgs[cmd.Name()] {
			cmd.ValidArgsFunction = e.completeSession
		}
		for flag, f := range map[string]cobra.CompletionFunc{
			"host": e.completeHost, "jump": e.completeHost, "python": e.completePython,
		} {
			if cmd.Flags().Lookup(flag) != nil {
				cmd.RegisterFlagCompletionFunc(flag, f)
			}
		}
	}
}

// withDeadline runs find, and offers nothing when it takes longer than
// the deadline.
func (e *env) withDeadline(ctx context.Context, find func(context.Context) []string) []string {
	ctx, cancel := context.WithTimeout(ctx, e.deadline())
	defer cancel()
	ch := make(chan []string, 1)
	go func() { ch <- find(ctx) }()
	select {
	case found := <-ch:
		return found
	case <-ctx.Done():
		return nil
	}
}

// matching keeps the candidates that start with prefix.
func matching(all []string, prefix string) []string {
	var out []string
	for _, s := range all {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// completeSession offers the names of live and swapped sessions as a
// command's first argument, asked of the hub only if one is running: a
// completion never starts it. push's and pull's later arguments are files.
func (e *env) completeSession(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		if cmd.Name() == "push" || cmd.Name() == "pull" {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := e.withDeadline(cmd.Context(), func(ctx context.Context) []string {
		paths, err := config.FromEnv(e.Getenv)
		if err != nil {
			return nil
		}
		c := client.New(paths)
		c.AutoStart = false
		defer c.Close()
		l, err := c.SessionNames(ctx)
		if err != nil {
			return nil
		}
		var out []string
		for _, s := range l.Sessions {
			if s.State != "dead" {
				out = append(out, s.Name)
			}
		}
		for _, s := range l.Swapped {
			out = append(out, s.Name)
		}
		return out
	})
	return matching(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeHost offers the Host aliases of the user's ssh configuration.
func (e *env) completeHost(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	home := e.Getenv("HOME")
	if home == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	hosts := e.withDeadline(cmd.Context(), func(context.Context) []string { return remote.Aliases(home) })
	return matching(hosts, toComplete), cobra.ShellCompDirectiveNoFileComp
}

var pythonName = lazyre.New(`^python(3(\.\d{1,2})?)?$`)

// completePython offers the interpreters on PATH by name, and pyenv's by
// path, without running any of them. A value with a slash completes as a
// file.
func (e *env) completePython(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if strings.Contains(toComplete, "/") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	found := e.withDeadline(cmd.Context(), func(context.Context) []string { return localPythons(e.Getenv) })
	return matching(found, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// localPythons lists python, python3 and python3.N on PATH, then the
// python3.N of each pyenv version.
func localPythons(getenv func(string) string) []string {
	seen := map[string]bool{}
	var onPath []string
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		ents, err := os.ReadDir(dir)
		if err != nil || dir == "" {
			continue
		}
		for _, ent := range ents {
			if n := ent.Name(); pythonName.MatchString(n) && !seen[n] && isExecutable(filepath.Join(dir, n)) {
				seen[n] = true
				onPath = append(onPath, n)
			}
		}
	}
	sort.Strings(onPath)
	root := getenv("PYENV_ROOT")
	if root == "" && getenv("HOME") != "" {
		root = filepath.Join(getenv("HOME"), ".pyenv")
	}
	var versions []string
	if root != "" {
		versions, _ = filepath.Glob(filepath.Join(root, "versions", "*", "bin", "python3.*"))
	}
	for _, p := range versions {
		if pythonName.MatchString(filepath.Base(p)) && isExecutable(p) {
			onPath = append(onPath, p)
		}
	}
	return onPath
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
