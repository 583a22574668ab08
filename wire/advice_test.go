package wire

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
)

func TestAdvice(t *testing.T) {
	for _, c := range []struct {
		surface                       string
		wait, exec, on, without, with string
	}{
		{SurfaceCLI, "`replhub wait m`", "`replhub exec m CODE`", "`replhub exec m CODE --host h`", "without --host", "with --sudo"},
		{SurfaceMCP, "call wait with name 'm'", "call exec with name 'm'", "call exec with name 'm' and host 'h'", "omit host", "with sudo true"},
	} {
		a := AdviceFor(c.surface)
		assert.Equal(t, c.surface, a.Surface())
		assert.Equal(t, c.wait, a.Wait("m"))
		assert.Equal(t, c.exec, a.Exec("m"))
		assert.Equal(t, c.on, a.ExecOn("m", "h"))
		assert.Equal(t, c.without, a.Without("host"))
		assert.Equal(t, c.with, a.With("sudo"))
	}
}

func TestFit(t *testing.T) {
	assert.Equal(t, "short", Fit("short", 10))
	for _, s := range []string{
		strings.Repeat("x", 50000),
		strings.Repeat("\U0001F600", 30000), // two UTF-16 units each
		"head\n" + strings.Repeat("é", 45000) + "\nOut[3]: 42\n",
	} {
		got := Fit(s, 40000)
		assert.LessOrEqual(t, len(utf16.Encode([]rune(got))), 40000)
		assert.Contains(t, got, "characters of this reply left out")
		assert.Equal(t, s[len(s)-4:], got[len(got)-4:], "the tail is kept")
		assert.Equal(t, s[:4], got[:4], "the head is kept")
	}
}

func TestTextForMCP(t *testing.T) {
	r := &Result{Session: "m", Cell: 3, Status: StatusOK}
	assert.Equal(t, "", r.Text())
	assert.Equal(t, "[cell 3 ran: no output, no value]\n", r.TextFor(SurfaceMCP))
	r = &Result{Session: "m", Cell: 4, Status: StatusRunning, DurationMS: 1000}
	assert.Contains(t, r.Text(), "`replhub wait m` collects")
	assert.Contains(t, r.TextFor(SurfaceMCP), "call wait with name 'm' collects")
	assert.NotContains(t, r.TextFor(SurfaceMCP), "replhub")
}
