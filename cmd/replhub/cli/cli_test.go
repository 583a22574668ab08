package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
)

// run runs the CLI with an environment whose hub folder does not exist, so
// nothing here can reach or start a hub.
func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	env := map[string]string{"HOME": t.TempDir(), "XDG_RUNTIME_DIR": "/nonexistent/replhub-test"}
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, IO{In: strings.NewReader(stdin), Out: &out, Err: &errb}, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"exec", "onlyname"}, "accepts 2 arg(s), received 1; usage: replhub exec NAME CODE|- [flags]\n"},
		{[]string{"kill"}, "; usage: replhub kill NAME [flags]\n"},
		{[]string{"exec", "s", "-1"}, "unknown shorthand flag: '1' in -1: `replhub exec --help` lists the flags; an argument that starts with - goes after -- (replhub exec -- ARG)\n"},
		{[]string{"exec", "s", "1", "-t", "x"}, "`replhub exec --help` says more\n"},
		{[]string{"push", "s", "/nonexistent/file", "dst"}, "replhub: /nonexistent/file: no such file here\n"},
		{[]string{"pull", "s", "src", "/nonexistent/dir/file"}, "replhub: /nonexistent/dir/file: its folder /nonexistent/dir is not there: make it first (mkdir -p), or give another path\n"},
		{[]string{"exec", "s", "1", "--host", "a", "--hosts", "b"}, "replhub: --host and --hosts do not go together: --host runs one session on a host, --hosts one on each of many (NAME@HOST)\n"},
		{[]string{"exec", "s", "1", "-t", "0"}, "-t must be more than 0 and at most 600 seconds"},
		{[]string{"exec", "s", "1", "-t", "601"}, "-t must be more than 0 and at most 600 seconds"},
		{[]string{"wait", "s", "-t", "-1"}, "-t must be more than 0"},
		{[]string{"sessions", "a", "b"}, "accepts at most 1 arg(s)"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, errs, code := run(t, "", tt.args...)
			assert.Equal(t, cmdenv.ExitFailure, code)
			assert.Contains(t, errs, tt.want)
			assert.True(t, strings.HasPrefix(errs, "replhub: "))
		})
	}
}

func TestHelpAndCompletion(t *testing.T) {
	out, _, code := run(t, "", "--help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"exec", "wait", "interrupt", "kill", "sessions", "start", "stop", "restart", "mcp", "self-test", "hub", "completion"} {
		assert.Contains(t, out, "  "+c)
	}
	assert.Contains(t, out, "not a sandbox")
	out, _, code = run(t, "", "completion", "bash")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "bash completion")
	// A shell it has no script for: no help on stdout for a shell to source.
	out, errs, code := run(t, "", "completion", "tcsh")
	assert.Equal(t, cmdenv.ExitFailure, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, `replhub: no completion script for "tcsh": bash, zsh, fish or powershell; usage: replhub completion [flags]`)
}
