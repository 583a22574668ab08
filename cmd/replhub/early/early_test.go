package early

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

func TestPlainExec(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		ok      bool
		timeout float64
	}{
		{[]string{"exec", "s", "1+1"}, true, 30},
		{[]string{"exec", "lab@gw", "print('-t')"}, true, 30},
		{[]string{"exec", "s", "-"}, true, 30}, // stdin
		{[]string{"exec", "s", "x", "-t", "5"}, true, 5},
		{[]string{"exec", "-t5", "s", "x"}, true, 5},
		{[]string{"exec", "s", "-t=0.5", "x"}, true, 0.5},
		{[]string{"exec", "s", "x", "--timeout", "600"}, true, 600},
		{[]string{"exec", "--timeout=120", "s", "-"}, true, 120},
		{[]string{"exec", "s", "x", "-t", "5", "-t", "7"}, true, 7}, // the last counts
		{[]string{"exec", "s", "x", "-t", "1e2"}, true, 100},
		{[]string{"exec", "s", "x", "-t"}, false, 0},
		{[]string{"exec", "s", "x", "-t", "0"}, false, 0},
		{[]string{"exec", "s", "x", "-t", "601"}, false, 0},
		{[]string{"exec", "s", "x", "-t", "-5"}, false, 0},
		{[]string{"exec", "s", "x", "-t", "NaN"}, false, 0},
		{[]string{"exec", "s", "x", "-t="}, false, 0},
		{[]string{"exec", "s", "x", "--t", "5"}, false, 0},
		{[]string{"exec", "s", "x", "-t", "5", "extra"}, false, 0},
		{[]string{"exec", "s", "x", "--json"}, false, 0},
		{[]string{"exec", "s", "x", "-tq"}, false, 0},
		{[]string{"exec", "-", "x"}, false, 0},
		{[]string{"exec", "s", "-1"}, false, 0}, // cobra reads it as a flag
		{[]string{"exec", "--", "s", "x"}, false, 0},
		{[]string{"exec", "s", ""}, false, 0},
		{[]string{"exec", "", "x"}, false, 0},
		{[]string{"exec", "s"}, false, 0},
		{[]string{"exec", "-t", "5", "s"}, false, 0},
		{[]string{"wait", "s", "x"}, false, 0},
		{[]string{"--version"}, false, 0},
		{nil, false, 0},
	} {
		name, code, timeout, ok := PlainExec(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			assert.Equal(t, []string{"s", "lab@gw"}[min(1, strings.Count(tc.args[1]+tc.args[2], "@"))], name, "%q", tc.args)
			assert.Contains(t, []string{"1+1", "print('-t')", "-", "x"}, code, "%q", tc.args)
			assert.Equal(t, tc.timeout, timeout, "%q", tc.args)
		}
		wn, wc, wt, wok := cobraReads(tc.args)
		assert.Equal(t, []any{wn, wc, wt, wok}, []any{name, code, timeout, ok}, "%q: as cobra reads it", tc.args)
	}
}

func TestIsVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		assert.True(t, IsVersion(args), "%q", args)
	}
	for _, args := range [][]string{nil, {}, {"--version", "x"}, {"-v", "exec"}, {"--version=true"}, {"version"}, {"-V"}, {"exec", "--version"}} {
		assert.False(t, IsVersion(args), "%q", args)
	}
}

// cobraReads is how package cli's exec reads args (pflag, with -t as its
// only flag): NAME, CODE and the seconds, and whether it takes them as a
// plain exec: two words, neither empty, NAME not -, no `--`, and seconds
// that its check takes.
func cobraReads(args []string) (name, code string, timeout float64, ok bool) {
	if len(args) == 0 || args[0] != "exec" {
		return "", "", 0, false
	}
	fs := pflag.NewFlagSet("exec", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Float64P("timeout", "t", 30, "")
	if fs.Parse(args[1:]) != nil || fs.ArgsLenAtDash() >= 0 {
		return "", "", 0, false
	}
	timeout, _ = fs.GetFloat64("timeout")
	w := fs.Args()
	if len(w) != 2 || w[0] == "" || w[1] == "" || w[0] == "-" || !(timeout > 0 && timeout <= lean.MaxTimeout) {
		return "", "", 0, false
	}
	return w[0], w[1], timeout, true
}

// Whatever the arguments, PlainExec takes exactly what cobra would read
// as `exec NAME CODE` with at most -t, and reads the same NAME, CODE and
// seconds from them.
func FuzzPlainExec(f *testing.F) {
	f.Add("exec", "s", "1+1", "", "")
	f.Add("exec", "s", "-", "-t", "5")
	f.Add("exec", "-t5", "s", "x", "")
	f.Add("exec", "s", "x", "--timeout=1e2", "")
	f.Add("exec", "s", "x", "--json", "")
	f.Add("exec", "-", "", "-t=", "")
	f.Add("exec", "--", "s", "x", "-t")
	f.Fuzz(func(t *testing.T, a, b, c, d, e string) {
		for _, args := range [][]string{{a}, {a, b}, {a, b, c}, {a, b, c, d}, {a, b, c, d, e}} {
			name, code, timeout, ok := PlainExec(args)
			wn, wc, wt, wok := cobraReads(args)
			if ok != wok || name != wn || code != wc || timeout != wt {
				t.Fatalf("PlainExec(%q) = %q, %q, %v, %v; cobra reads %q, %q, %v, %v", args, name, code, timeout, ok, wn, wc, wt, wok)
			}
		}
	})
}

// The ops early sends are wire's.
func TestOps(t *testing.T) {
	assert.Equal(t, wire.OpExec, opExec)
	assert.Equal(t, wire.OpInterrupt, opInterrupt)
}
