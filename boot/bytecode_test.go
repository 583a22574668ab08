package boot

import (
	"os/exec"
	"strings"
	"testing"
)

// boot.py's bytecode cache reader takes back exactly what it wrote, and
// refuses a file that is truncated, extended or changed anywhere, one of
// another key, payload or Python (testdata/bc_fuzz.py, a fuzz with a
// fixed seed); on every Python.
func TestBytecodeCacheReaderFuzz(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		out, err := exec.Command(py, "testdata/bc_fuzz.py", "boot.py", t.TempDir(), "400").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
	})
}
