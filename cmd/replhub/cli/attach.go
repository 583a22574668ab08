package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/config"
)

func newAttachCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "attach NAME",
		Short: "Work in a session at an interactive console, beside the agent",
		Long: `Open an interactive Python console on session NAME, in its namespace. Lines
are edited and kept in a history of the session's own; Tab completes from the
session; a statement goes on over "..." lines as in Python's own REPL. Cells
typed here are cells like any other: numbered, in the transcript, busy for
the agent while they run, and the agent's next reply says someone worked here.
Cells the agent runs meanwhile show here, code and output; a line entered
while one runs waits in the session's queue.

Ctrl-C interrupts the running cell (at the prompt, it clears the line);
Ctrl-D or Ctrl-] detaches, and the session goes on.`,
		Example: `  replhub attach chirp`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAttach(cmd.Context(), e, args[0])
		},
	}
}

// ctrlBracket is Ctrl-], telnet's and docker's key to detach.
const ctrlBracket = 0x1d

func runAttach(ctx context.Context, e *env, name string) error {
	in, ok := e.IO.In.(*os.File)
	if !ok || !cmdenv.IsTerminal(in) || !cmdenv.IsTerminal(e.IO.Out) {
		return fmt.Errorf("attach needs a terminal: for a script, use `replhub exec %s -`", name)
	}
	c, err := e.Client()
	if err != nil {
		return err
	}
	a, err := c.Attach(ctx, name) // the hub checks the name first
	if err != nil {
		return err
	}
	defer a.Close()
	hist, err := historyFile(c.Paths, name)
	if err != nil {
		return err
	}
	con := &console{
		ctx: ctx, c: c, a: a, name: name, out: e.IO.Out, save: e.SaveDisplay,
		paint: painter(e.Getenv("NO_COLOR") == "" && e.Getenv("TERM") != "dumb"),
	}
	// The editor's Close waits for its reader, which only a cancelable
	// stdin lets go.
	stdin := readline.NewCancelableStdin(in)
	con.closeEditor = func() {
		stdin.Close()
		con.rl.Close()
	}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:              con.paint.prompt(">>> "),
		HistoryFile:         hist,
		HistoryLimit:        1000,
		AutoComplete:        &completer{ctx: ctx, c: c, name: name},
		InterruptPrompt:     "^C",
		EOFPrompt:           "\n",
		Stdin:               stdin,
		Stdout:              e.IO.Out,
		Stderr:              e.IO.Err,
		FuncFilterInputRune: con.filter,
	})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	con.rl = rl
	defer con.closeEditor()
	os.Chmod(hist, 0o600) // the library writes a trimmed history anew
	con.out = rl.Stdout()
	if err := con.run(); err != nil {
		return err
	}
	con.closeEditor()
	con.mu.Lock()
	died, leaving, broken := con.died, con.leaving, con.broken
	con.mu.Unlock()
	switch {
	case died:
		e.Code = cmdenv.ExitDead
	case broken:
		e.Code = cmdenv.ExitFailure
	}
	if leaving {
		a.Close()
		fmt.Fprintln(e.IO.Out, con.paint.note(fmt.Sprintf("[detached from '%s'; the session goes on]", name)))
	}
	return nil
}

// historyFile is session name's history: one file a session, 0600, in a
// folder of the state folder (0700).
func historyFile(paths config.Paths, name string) (string, error) {
	dir := filepath.Join(paths.State, "history")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("attach: %w", err)
	}
	p := filepath.Join(dir, filepath.Base(name))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("attach: %w", err)
	}
	f.Close()
	return p, os.Chmod(p, 0o600)
}

// completer asks the session for completions of the text before the
// cursor; at the start of a line, Tab indents.
type completer struct {
	ctx  context.Context
	c    *client.Client
	name string
}

func (p *completer) Do(line []rune, pos int) ([][]rune, int) {
	text := string(line[:pos])
	if strings.TrimSpace(text) == "" {
		return [][]rune{[]rune("    ")}, 0
	}
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Second)
	defer cancel()
	a, err := p.c.Complete(ctx, p.name, text, client.QueryOptions{Wait: -1})
	if err != nil || a == nil {
		return nil, 0
	}
	// The editor shows the candidates after the word being completed.
	word := len(text)
	for word > 0 && strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", rune(text[word-1])) {
		word--
	}
	var out [][]rune
	for _, c := range a.Completions {
		if strings.HasPrefix(c, text) {
			out = append(out, []rune(c[len(text):]))
		}
	}
	return out, len([]rune(text[word:]))
}

// painter colours the console's own words, when on.
type painter bool

func (p painter) wrap(code, s string) string {
	if !p {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p painter) prompt(s string) string { return p.wrap("32", s) }
func (p painter) note(s string) string   { return p.wrap("2", s) }
func (p painter) err(s string) string    { return p.wrap("31", s) }
func (p painter) value(s string) string  { return p.wrap("36", s) }
