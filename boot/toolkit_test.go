package boot

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The toolkit's own tests are Python unittest modules in
// replhub_toolkit/tests; this runs all of them under every Python found.

var (
	ranTests = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)
	verdict  = regexp.MustCompile(`(?m)^OK.*$`)
)

func TestToolkit(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		env := append(os.Environ(),
			"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the tree
			"TMPDIR="+t.TempDir(),       // whatever a test leaves goes with it
		)
		// From the repository's top, so that boot/ is the top: import replhub_toolkit.files
		runUnittest(t, py, "..", env, "boot/replhub_toolkit/tests", "boot")
	})
}

// runUnittest runs `py -m unittest discover -s start -t top` in dir and
// fails t unless it ran some tests and all passed.
func runUnittest(t *testing.T, py, dir string, env []string, start, top string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", start, "-t", top, "-v")
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", py, err, out)
	}
	m := ranTests.FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no test summary in the output:\n%s", py, out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n == 0 {
		t.Fatalf("%s: no tests found:\n%s", py, out)
	}
	t.Logf("%s: %s tests, %s", py, m[1], verdict.Find(out))
}
