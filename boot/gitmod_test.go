package boot

import (
	"os"
	"os/exec"
	"testing"
)

// The shipped module modules/git.py has its tests in modules/tests, Python
// unittest files that compare every read with the git binary's. The
// repositories they read are built once, here, and shared by every Python.

func TestGitModule(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	home, fixtures := t.TempDir(), t.TempDir()
	env := append(os.Environ(),
		"PYTHONDONTWRITEBYTECODE=1",
		"HOME="+home, "GITMOD_HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GITMOD_FIXTURES="+fixtures,
	)
	build := exec.Command("python3", "modules/tests/fixtures.py", fixtures)
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the fixture repositories: %v\n%s", err, out)
	}
	eachPython(t, func(t *testing.T, py string) {
		// A copy per Python: the subtests run in parallel.
		own := append(env[:len(env):len(env)], "TMPDIR="+t.TempDir())
		runUnittest(t, py, ".", own, "modules/tests", "modules")
	})
}
