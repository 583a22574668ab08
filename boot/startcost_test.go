package boot

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heavy are modules a trivial session must not import at its start or in
// its first cell: each costs a start a millisecond or more, and the
// worker needs none of them until a cell does.
var heavy = []string{"json", "re", "socket", "selectors", "signal", "enum", "linecache", "tokenize",
	"ast", "asyncio", "pickle", "inspect", "traceback", "importlib.util", "contextlib"}

// A session that runs `pass` has imported none of heavy but those the
// interpreter imports by itself (site, .pth files); the sources of its
// cells still reach linecache when something imports it later.
func TestTrivialSessionImportsLittle(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		// The worker's threads need threading, which imports traceback
		// on Python 3.6 and 3.7.
		out, err := exec.Command(py, "-c", "import sys, threading; print(sorted(sys.modules))").Output()
		require.NoError(t, err)
		already := map[string]bool{}
		for _, m := range pyListValue(t, strings.TrimSpace(string(out))) {
			already[m] = true
		}
		w := startWorker(t, py)
		d := w.run("x = 1  # the first cell", 20*time.Second)
		require.Equal(t, "ok", d.str("status"))
		d = w.run("import sys; [m for m in "+pyList(heavy)+" if m in sys.modules]", 20*time.Second)
		var got []string
		for _, m := range pyListValue(t, d.str("value")) {
			if !already[m] {
				got = append(got, m)
			}
		}
		assert.Empty(t, got, "imported by a trivial session")
		d = w.run("import linecache; linecache.getline('<cell-1>', 1)", 20*time.Second)
		assert.Equal(t, `'x = 1  # the first cell'`, d.str("value"), "a cell's source, registered before linecache was imported")
	})
}

func pyList(ms []string) string {
	b, _ := json.Marshal(ms)
	return string(b)
}

// pyListValue reads the repr of a list of plain strings.
func pyListValue(t *testing.T, repr string) []string {
	var out []string
	b := []byte(repr)
	for i := range b {
		if b[i] == '\'' {
			b[i] = '"'
		}
	}
	require.NoError(t, json.Unmarshal(b, &out), repr)
	return out
}
