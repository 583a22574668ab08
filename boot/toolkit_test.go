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
	unittests(t, "boot/replhub_toolkit/tests", "boot")
}

// The shipped modules' tests (modules/tests) import them as top-level
// modules: import systemd.
func TestShippedModules(t *testing.T) {
	// The git module's tests read repositories that some 500 runs of the
	// git binary build: built once here, they serve every Python.
	var env []string
	if _, err := exec.LookPath("git"); err == nil {
		fx := t.TempDir()
		cmd := exec.Command(newestPython(t), "boot/modules/tests/fixtures.py", fx)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("building the git fixtures: %v\n%s", err, out)
		}
		env = append(env, "GITMOD_FIXTURES="+fx)
	}
	unittests(t, "boot/modules/tests", "boot/modules", env...)
}

// unittests runs the Python unittest modules of folder dir, with top on
// sys.path, under every Python found, with env added to the environment.
func unittests(t *testing.T, dir, top string, env ...string) {
	eachPython(t, func(t *testing.T, py string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover",
			"-s", dir, "-t", top, "-v")
		cmd.Dir = ".." // the repository's root: dir and top are below it
		cmd.Env = append(os.Environ(),
			"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the tree
			"TMPDIR="+t.TempDir(),       // whatever a test leaves goes with it
		)
		cmd.Env = append(cmd.Env, env...)
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
	})
}
