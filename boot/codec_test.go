package boot

import (
	"os/exec"
	"strings"
	"testing"
)

// The worker reads and writes frame headers with _json's C scanner and
// encoder straight, not through the package json: on every Python, it
// must say what json says, to frames and to random and mangled text
// (testdata/codec_diff.py, a differential fuzz with a fixed seed).
func TestFrameCodecMatchesJSON(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		out, err := exec.Command(py, "testdata/codec_diff.py", "worker.py", "2000").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("%s: %v\n%s", py, err, out)
		}
	})
}
