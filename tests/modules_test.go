package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// writeModule writes the user's module NAME.py in the world's modules
// folder.
func writeModule(t *testing.T, e *hubtest.Env, name, src string) string {
	t.Helper()
	dir := e.Paths.Modules()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	p := filepath.Join(dir, name+".py")
	require.NoError(t, os.WriteFile(p, []byte(src), 0o600))
	return p
}

// replhub.NAME is served by the hub's hook: nothing in the cwd stands in
// for it, a module written after the session started is found, an edit
// reaches reload, the user's file shadows a shipped one.
func TestModulesImportHook(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.11"))
	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, "replhub.py"), []byte("raise SystemExit('the cwd shadowed replhub')\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(e.Cwd, "replhub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, "replhub", "__init__.py"), []byte("raise SystemExit('the cwd shadowed replhub/')\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, "later.py"), []byte("WHO = 'cwd'\n"), 0o600))
	// The session starts before the modules folder exists.
	ok(t, e.Run("exec", "s", "1"))

	writeModule(t, e, "later", "'''Made later.'''\nWHO = 'modules'\ndef f():\n    return 1\n")
	out := ok(t, e.Run("exec", "s", "from replhub import later\nimport later as plain\n(later.WHO, plain.WHO, later.__name__)"))
	assert.Contains(t, out, "('modules', 'cwd', 'replhub.later')", "replhub.later is the module; a plain import still sees the cwd")

	writeModule(t, e, "later", "WHO = 'edited'\ndef f():\n    return 1 / 0\n")
	out = ok(t, e.Run("exec", "s", "import importlib; importlib.reload(later).WHO"))
	assert.Contains(t, out, "'edited'")
	r := e.Run("exec", "s", "later.f()")
	assert.Contains(t, r.Stdout+r.Stderr, "return 1 / 0", "tracebacks show the module's lines")

	// A user's module shadows a shipped one of the same name.
	out = ok(t, e.Run("exec", "s", "from replhub import systemd; (systemd.__file__, callable(systemd.status))"))
	assert.Contains(t, out, "('<replhub>/modules/systemd.py', True)")
	writeModule(t, e, "systemd", "MINE = True\n")
	out = ok(t, e.Run("exec", "s", "import replhub.systemd as sd2, importlib; importlib.reload(sd2); sd2.MINE"))
	assert.Contains(t, out, "Out[")
	assert.Contains(t, out, "True")

	// Refusals: a clean ImportError with one line of reason.
	writeModule(t, e, "latin", "s = '\xe9t\xe9'\n")
	big := writeModule(t, e, "big", "")
	require.NoError(t, os.Truncate(big, 4<<20+1))
	for code, want := range map[string]string{
		"import replhub.latin":  "ImportError: replhub.latin: " + filepath.Join(e.Paths.Modules(), "latin.py") + " is not UTF-8 (byte 5): save it as UTF-8",
		"import replhub.big":    "is 4.0 MiB, over the 4 MiB a module may be",
		"import replhub.nosuch": "ModuleNotFoundError: No module named 'replhub.nosuch': modules() lists them; write " + filepath.Join(e.Paths.Modules(), "nosuch.py"),
		"import importlib; importlib.import_module('replhub.../../etc/passwd')": "not a module name",
		"__import__('replhub.x-y')": "not a module name",
	} {
		r := e.Run("exec", "s", code)
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Contains(t, r.Stdout+r.Stderr, want, code)
	}
	out = ok(t, e.Run("exec", "s", "import os; os.getpid() > 0"))
	assert.Contains(t, out, "True", "the session and the hub live on")

	// Without the folder, the replhub.py in the cwd cannot stand in either.
	require.NoError(t, os.RemoveAll(filepath.Join(e.Cwd, "replhub")))
	out = ok(t, e.Run("exec", "fresh", "import replhub, replhub.later; (replhub.__spec__.origin, replhub.later.WHO)"))
	assert.Contains(t, out, "('<replhub>', 'edited')")
}

// modules() lists shipped and user modules with their docstrings.
func TestModulesList(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.6"))
	writeModule(t, e, "cad", "# helpers\n\"\"\"Drawings for the lab.\n\nMore.\"\"\"\n")
	writeModule(t, e, "systemd", "'''My own systemd.'''\n")
	writeModule(t, e, "broken", "\xff\n")
	out := ok(t, e.Run("exec", "s", "modules()"))
	assert.Contains(t, out, "from replhub import NAME  (yours: "+e.Paths.Modules()+"/NAME.py)")
	assert.Regexp(t, `(?m)^  cad +yours +Drawings for the lab\.$`, out)
	assert.Regexp(t, `(?m)^  systemd +yours +My own systemd\. \(shadows the shipped one\)$`, out)
	assert.Regexp(t, `(?m)^  broken +yours +cannot be imported: .*not UTF-8`, out)
	// The command says the same without a session, and --json for programs.
	cli := ok(t, e.Run("modules"))
	assert.Contains(t, out, strings.TrimSpace(cli))
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(t, e.Run("modules", "--json"))), &list))
	assert.Contains(t, list, map[string]any{"name": "cad", "doc": "Drawings for the lab.", "user": true})
	out = ok(t, e.Run("exec", "s", "[(m.name, m.user) for m in modules() if m.name == 'cad']"))
	assert.Contains(t, out, "[('cad', True)]", "a value, not only text")
	out = ok(t, e.Run("complete", "s", "from replhub import ca"))
	assert.Contains(t, out, "from replhub import cad")
	out = ok(t, e.Run("complete", "s", "import replhub.sys"))
	assert.Contains(t, out, "import replhub.systemd")
	out = ok(t, e.Run("exec", "s", "print(tkhelp())"))
	assert.Contains(t, out, "modules()")
	assert.False(t, strings.Contains(out, "not available"), out)
}

// On a host (Python 3.6 there) and as root, a module comes from this
// machine's folder at import time: nothing is installed there, and a
// module written after the session started is found.
func TestModulesRemoteAndRoot(t *testing.T) {
	t.Parallel()
	t.Run("remote", func(t *testing.T) {
		w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
		ok(t, w.Run("exec", "far", "1", "--host", "lab", "--python", py(t, "3.6")))
		writeModule(t, w.Env, "lab", "'''Lab tools.'''\nimport sys\ndef where():\n    return sys.version_info[:2]\n")
		out := ok(t, w.Run("exec", "far", "from replhub import lab; lab.where()"))
		assert.Contains(t, out, "(3, 6)")
		writeModule(t, w.Env, "lab", "def where():\n    return 'edited'\n")
		out = ok(t, w.Run("exec", "far", "import importlib; importlib.reload(lab).where()"))
		assert.Contains(t, out, "'edited'")
		out = ok(t, w.Run("exec", "far", "import replhub.systemd as s; s.__file__"))
		assert.Contains(t, out, "<replhub>/modules/systemd.py")
		out = ok(t, w.Run("exec", "far", "modules()"))
		assert.Regexp(t, `(?m)^  lab +yours`, out)

		// The shipped git module reads a repository natively on the host.
		repo := t.TempDir()
		for _, argv := range [][]string{{"init", "-q"}, {"-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "first"}} {
			b, err := exec.Command("git", append([]string{"-C", repo}, argv...)...).CombinedOutput()
			require.NoError(t, err, "%s", b)
		}
		head, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
		require.NoError(t, err)
		out = ok(t, w.Run("exec", "far", "from replhub import git; c = git.repo("+strconv.Quote(repo)+").log(1)[0]; (c.id, c.message.strip())"))
		assert.Contains(t, out, "('"+strings.TrimSpace(string(head))+"', 'first')")
	})
	t.Run("root", func(t *testing.T) {
		sudoUser(t, "rhnp", true)
		e := hubtest.StartAs(t, "rhnp")
		e.Setenv("REPLHUB_PYTHON", "/usr/bin/python3")
		ok(t, e.Run("exec", "ops", "1", "--sudo"))
		writeModule(t, e, "mine", "import os\ndef uid():\n    return os.geteuid()\n")
		b, err := exec.Command("chown", "-R", "rhnp:", e.Dir).CombinedOutput()
		require.NoError(t, err, "%s", b)
		out := ok(t, e.Run("exec", "ops", "from replhub import mine; mine.uid()"))
		assert.Contains(t, out, "Out[2]: 0")
	})
}

// systemd in sessions: a user's session may not change a system unit and
// is told to use a root session; a root session gets past that and is told
// that no manager runs here (this machine, like CI, runs none).
func TestModulesSystemd(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("a systemd manager runs here: the test would change a unit")
	}
	sudoUser(t, "rhnp", true)
	e := hubtest.StartAs(t, "rhnp")
	e.Setenv("REPLHUB_PYTHON", "/usr/bin/python3")
	r := e.Run("exec", "me", "from replhub import systemd\nsystemd.restart('nginx')")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "SystemdError: systemd: restart nginx.service changes a system unit, which needs root: use a root session (session(name, sudo=True), or exec --sudo)")
	r = e.Run("exec", "me", "systemd.run('rm -rf /tmp/x')")
	assert.Contains(t, r.Stdout, "TypeError: systemd: run takes a list of arguments, no shell")
	r = e.Run("exec", "ops", "from replhub import systemd\nsystemd.restart('nginx')", "--sudo")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "SystemdError: systemd: no systemd manager runs here: PID 1 is")
	out := ok(t, e.Run("exec", "ops", "systemd.Status(id='x.service', load='loaded', active='failed', sub='failed')"))
	assert.Contains(t, out, "x x.service - \n     Loaded: loaded\n     Active: failed (failed)", "results print as text")
}
