package early

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/wire"
)

func TestPlainExec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"exec", "s", "1+1"}, true},
		{[]string{"exec", "lab@gw", "print('-t')"}, true},
		{[]string{"exec", "s", "-"}, true}, // stdin
		{[]string{"exec", "-", "x"}, false},
		{[]string{"exec", "s", "-1"}, false}, // cobra reads it as a flag
		{[]string{"exec", "--", "s", "x"}, false},
		{[]string{"exec", "s", "x", "-t", "5"}, false},
		{[]string{"exec", "-t5", "s", "x"}, false},
		{[]string{"exec", "s", ""}, false},
		{[]string{"exec", "", "x"}, false},
		{[]string{"exec", "s"}, false},
		{[]string{"wait", "s", "x"}, false},
		{[]string{"--version"}, false},
		{nil, false},
	} {
		name, code, ok := PlainExec(tc.args)
		assert.Equal(t, tc.ok, ok, "%q", tc.args)
		if ok {
			assert.Equal(t, tc.args[1], name)
			assert.Equal(t, tc.args[2], code)
		}
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

// Whatever the arguments, PlainExec takes only `exec NAME CODE` with
// neither a flag (CODE may be -) nor an empty word, and gives back NAME
// and CODE as they were.
func FuzzPlainExec(f *testing.F) {
	f.Add("exec", "s", "1+1", "")
	f.Add("exec", "s", "-", "")
	f.Add("exec", "s", "x", "--json")
	f.Add("exec", "-", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		for _, args := range [][]string{{a}, {a, b}, {a, b, c}, {a, b, c, d}} {
			name, code, ok := PlainExec(args)
			plain := len(args) == 3 && args[0] == "exec" && args[1] != "" && args[2] != "" &&
				!strings.HasPrefix(args[1], "-") && (args[2] == "-" || !strings.HasPrefix(args[2], "-"))
			if ok != plain {
				t.Fatalf("PlainExec(%q) = %v", args, ok)
			}
			if ok && (name != args[1] || code != args[2]) {
				t.Fatalf("PlainExec(%q) = %q, %q", args, name, code)
			}
		}
	})
}

// The ops early sends are wire's.
func TestOps(t *testing.T) {
	assert.Equal(t, wire.OpExec, opExec)
	assert.Equal(t, wire.OpInterrupt, opInterrupt)
}
