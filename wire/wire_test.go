package wire

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/lean"
)

func TestResultText(t *testing.T) {
	v := "8081"
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"value", Result{Session: "chirp", Cell: 2, Status: StatusOK, Value: &v}, "Out[2]: 8081\n"},
		{"created", Result{Session: "chirp", Cell: 1, Status: StatusOK, Created: &SessionInfo{Name: "chirp", Python: "3.11.7", Cwd: "/w"}},
			"[created session 'chirp' (python 3.11.7, cwd /w)]\n"},
		{"error", Result{Session: "s", Cell: 1, Status: StatusError, Output: "hi\n", Error: &CellError{Type: "E", Traceback: "Traceback\nE: x\n"}},
			"hi\nTraceback\nE: x\n"},
		{"running", Result{Session: "s", Cell: 4, Status: StatusRunning, DurationMS: 30000},
			"[cell 4 still running after 30s; it goes on: `replhub wait s` collects its output and result, `replhub interrupt s` stops it]\n"},
		{"previous and others", Result{Session: "s", Cell: 1, Status: StatusOK, Previous: "session 's' died", Others: "other sessions: a running"},
			"[session 's' died]\n[other sessions: a running]\n"},
		{"dead", Result{Session: "s", Cell: 2, Status: StatusDead, Output: "bye", Death: "session 's' died while running cell 2"},
			"bye\n[session 's' died while running cell 2]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.r.Text())
		})
	}
}

func TestSessionLine(t *testing.T) {
	s := SessionInfo{Name: "chirp", State: "idle", Pid: 81234, Python: "3.11.7", UpS: 125, IdleS: 40, Cells: 2, RSS: 21 << 20, Cwd: "/home/me/work", Names: []string{"cfg", "json"}}
	l := SessionList{Sessions: []SessionInfo{s}}
	assert.Equal(t, "chirp  pid 81234  python 3.11.7  up 2m  idle 40s  2 cells  21 MB  cwd /home/me/work\n    names: cfg, json\n", l.Text(false))
	s.State, s.RunningCell, s.RunningS = "running", 3, 12
	assert.Contains(t, s.Line(), "running for 12s (cell 3)")
	assert.Equal(t, "no sessions\n", (&SessionList{}).Text(false))
}

func TestDuration(t *testing.T) {
	for sec, want := range map[float64]string{0.42: "0.4s", 40: "40s", 125: "2m", 3780: "1h3m"} {
		assert.Equal(t, want, Duration(sec))
	}
}

func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("short\n"+strings.Repeat("x", 100)+"\nlast"), 16)
	l, err := ReadLine(r, 50)
	require.NoError(t, err)
	assert.Equal(t, "short\n", string(l))
	_, err = ReadLine(r, 50)
	assert.ErrorIs(t, err, ErrLineTooLong)
}

func TestMB(t *testing.T) {
	for _, c := range []struct {
		n        int64
		mb, mbUp string
	}{
		{0, "0 MB", "0 MB"},
		{100, "0 MB", "1 MB"},
		{1 << 19, "1 MB", "1 MB"},
		{1 << 20, "1 MB", "1 MB"},
		{1<<20 + 1, "1 MB", "2 MB"},
		{5<<20 - 1, "5 MB", "5 MB"},
	} {
		assert.Equal(t, c.mb, MB(c.n), "MB(%d)", c.n)
		assert.Equal(t, c.mbUp, MBUp(c.n), "MBUp(%d)", c.n)
	}
}

// An answer's findings read and write as keys of the answer itself, in
// the order they always had.
func TestAnswerJSON(t *testing.T) {
	const text = `{"session":"s","kind":"vars","waited_ms":5,"waited_for":2,"error":"e",` +
		`"vars":[{"name":"x","type":"int","repr":"1"}],"total":3,"hidden":1,"left":2,` +
		`"inspect":{"expr":"x","type":"int","kind":"object","repr":"1"},"completions":["xy"],` +
		`"removed":4,"kept":["json"],"restored":["r"],"names":["n"],"check":"complete","notes":["n1"]}`
	var a Answer
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&a))
	assert.Equal(t, 3, a.Total)
	assert.Equal(t, []string{"xy"}, a.Completions)
	assert.Equal(t, "x", a.Inspect.Expr)
	b, err := json.Marshal(&a)
	require.NoError(t, err)
	assert.Equal(t, text, string(b))
}

// Package early exits with lean's copies of the exit codes.
func TestLeanExitCodesAreWires(t *testing.T) {
	assert.Equal(t, ExitFailure, lean.ExitFailure)
	assert.Equal(t, ExitRunning, lean.ExitRunning)
}

// An answer's advice names the reader's own options: the CLI's flags, an
// MCP client's arguments.
func TestAnswerTextFor(t *testing.T) {
	vars := &Answer{Session: "s", Kind: OpVars, Findings: Findings{Vars: []Var{{Name: "x", Type: "int", Repr: "1"}}, Total: 3, Hidden: 2, Left: 2}}
	assert.Contains(t, vars.Text(), "[2 of 3 names not shown: pass --limit, or inspect one by name]")
	assert.Contains(t, vars.Text(), "[2 names starting with _ not shown: --all shows them]")
	mcp := vars.TextFor(SurfaceMCP)
	assert.Contains(t, mcp, "[2 of 3 names not shown: pass limit, or inspect one by name]")
	assert.Contains(t, mcp, "[2 names starting with _ not shown: all true shows them]")
	assert.NotContains(t, mcp, "--")
	comp := &Answer{Session: "s", Kind: OpComplete, Findings: Findings{Completions: []string{"xy"}, Left: 4}}
	assert.Contains(t, comp.Text(), "or pass --limit]")
	assert.Contains(t, comp.TextFor(SurfaceMCP), "or pass limit]")
}

func TestPrintable(t *testing.T) {
	for _, c := range []struct {
		in          string
		lines, want string
	}{
		{"plain é \ufffd", "plain é \ufffd", "plain é \ufffd"},
		{"a\x1b]0;t\x07b", `a\x1b]0;t\x07b`, `a\x1b]0;t\x07b`},
		{"one\ntwo\tx\r", "one\ntwo\tx\\x0d", `one\x0atwo\x09x\x0d`},
		{"c1 \u009b2J del \x7f", `c1 \u009b2J del \x7f`, `c1 \u009b2J del \x7f`},
		{"raw \x9b\xff", `raw \x9b\xff`, `raw \x9b\xff`},
		{"cwd/\u202egpj.exe", `cwd/\u202egpj.exe`, `cwd/\u202egpj.exe`},
		{"a\u2066b\u2069c\u2028", `a\u2066b\u2069c\u2028`, `a\u2066b\u2069c\u2028`},
	} {
		assert.Equal(t, c.lines, Printable(c.in, true), "%q", c.in)
		assert.Equal(t, c.want, Printable(c.in, false), "%q", c.in)
	}
}

// FuzzPrintable: whatever a host sends, Printable's text is UTF-8 with no
// rune a terminal acts on or reorders by (line feeds and tabs aside, where
// lines is true), and it is its own Printable (what has no such rune
// stays as it is).
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"plain", "a\x1b]0;t\x07b", "one\ntwo\tx\r", "\u009b2J\x7f", "\x9b\xff", "\u202e", "\xed\xa0\x80"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, lines bool) {
		p := Printable(s, lines)
		require.True(t, utf8.ValidString(p), "%q → %q", s, p)
		for _, r := range p {
			if lines && (r == '\n' || r == '\t') {
				continue
			}
			require.False(t, r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || reorders(r), "%q → %q has %U", s, p, r)
		}
		require.Equal(t, p, Printable(p, lines), "%q", s)
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || reorders(r) }) {
			require.Equal(t, s, p)
		}
	})
}
