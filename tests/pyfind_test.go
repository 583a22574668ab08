package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/pyenvtest"
	"github.com/replhub/replhub/tests/sshtest"
)

// twoPythons picks two real interpreters of different minors, with a
// version name for each as pyenv would have it (minor + ".99").
func twoPythons(t *testing.T) (a, b, va, vb string) {
	newer, older := hubtest.PickPythons(t)
	for v, p := range hubtest.Pythons() {
		switch p {
		case newer:
			va = v
		case older:
			vb = v
		}
	}
	return newer, older, va, vb
}

// A local session started with the default python3, a pyenv shim, runs the
// interpreter pyenv would choose (the global, or a project's
// .python-version), without running the shim.
func TestLocalShimIsResolved(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, older, vn, vo := twoPythons(t)
	home := filepath.Join(e.Dir, "home")
	tr := pyenvtest.New(t, home, map[string]string{vn + ".99": newer, vo + ".99": older}, vo+".99")
	e.Setenv("HOME", home)
	e.Setenv("PATH", tr.Shims+":"+os.Getenv("PATH"))
	e.Setenv("PYENV_VERSION", "")
	e.Setenv("REPLHUB_PYTHON", "")

	r := e.Run("exec", "g", "import sys, os; print(sys.executable); os.environ['PATH'].split(':')[0]")
	require.Equal(t, 0, r.Code, "%s", r)
	bin := filepath.Join(tr.Root, "versions", vo+".99", "bin")
	assert.Contains(t, r.Stdout, filepath.Join(bin, "python3")+"\n")
	assert.Contains(t, r.Stdout, "Out[1]: '"+bin+"'", "pyenv puts the version's bin first on PATH")

	require.NoError(t, os.WriteFile(filepath.Join(e.Cwd, ".python-version"), []byte(vn+"\n"), 0o644))
	r = e.Run("exec", "p", "import sys; sys.version_info[:2]")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: ("+strings.Replace(vn, ".", ", ", 1)+")", "the project's version wins")
	assert.Empty(t, tr.Runs(), "no shim may run")
}

// On a host whose python3 is a pyenv shim, the finder resolves shims by
// pyenv's rules and reads versions from pyenv's folders: it picks the local
// minor whether or not it is the host's pyenv global, and runs no shim.
func TestRemoteFinderReadsPyenv(t *testing.T) {
	t.Parallel()
	newer, older, vn, vo := twoPythons(t)
	home, err := os.MkdirTemp("", "replhub-pyenv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	tr := pyenvtest.New(t, home, map[string]string{vn + ".99": newer, vo + ".99": older}, vo+".99")
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{SetEnv: map[string]string{
		"HOME": home, "PATH": tr.Shims + ":/usr/local/bin:/usr/bin:/bin"}})
	for _, c := range []struct{ local, want string }{
		{older, vo}, // the local minor is the host's global
		{newer, vn}, // it is not: pyenv's versions/ has it all the same
	} {
		w.Setenv("REPLHUB_PYTHON", c.local)
		name := "s" + strings.ReplaceAll(c.want, ".", "")
		r := w.Run("exec", name, "import sys; sys.executable", "--host", "lab")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "Out[1]: '"+filepath.Join(tr.Root, "versions", c.want+".99", "bin", "python"), "%s", r)
		assert.Contains(t, r.Stdout, "python "+c.want+".", "%s", r)
	}
	assert.Empty(t, tr.Runs(), "no shim may run")

	// A local minor the host has nowhere: another is taken, and the reply
	// says so.
	for v, p := range hubtest.Pythons() {
		if v == vn || v == vo || exists("/usr/bin/python"+v) || exists("/usr/local/bin/python"+v) {
			continue
		}
		w.Setenv("REPLHUB_PYTHON", p)
		r := w.Run("exec", "other", "1", "--host", "lab")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "lab has no python "+v+" (this machine's)", "%s", r)
		break
	}
	assert.Empty(t, tr.Runs(), "no shim may run")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A local session started in an activated conda env (its bin first on
// PATH, CONDA_PREFIX set) runs that env's Python, whose version is read
// from conda-meta.
func TestLocalCondaEnvIsChosen(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, older, vn, _ := twoPythons(t)
	env := filepath.Join(e.Dir, "env")
	ran := filepath.Join(e.Dir, "runs")
	pyenvtest.Conda(t, env, vn+".99", newer, ran)
	other := filepath.Join(e.Dir, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	require.NoError(t, os.Symlink(older, filepath.Join(other, "python3")))
	e.Setenv("PATH", filepath.Join(env, "bin")+":"+other+":"+os.Getenv("PATH")) // as activation sets it
	e.Setenv("CONDA_PREFIX", env)
	e.Setenv("REPLHUB_PYTHON", "")

	r := e.Run("exec", "c", "import sys; sys.version_info[:2]")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "Out[1]: ("+strings.Replace(vn, ".", ", ", 1)+")")
	// The hub asks PATH's python3 once, at its start, where cloudpickle
	// is (pyfind.Cache.CloudpickleDir); the finder itself runs nothing.
	b, _ := os.ReadFile(ran)
	runs := strings.Split(strings.TrimSpace(string(b)), "\n")
	assert.LessOrEqual(t, len(runs), 2, "run for the session and at most once for cloudpickle's folder: %q", runs)
	for _, r := range runs {
		assert.Equal(t, filepath.Join(env, "bin", "python3"), r)
	}
}

// On a conda host the finder reads each env's version from conda-meta and
// picks the env of the local minor, running no other; the local minor is
// that of the activated env here.
func TestRemoteFinderReadsConda(t *testing.T) {
	t.Parallel()
	newer, older, vn, vo := twoPythons(t)
	if exists("/usr/bin/python"+vn) || exists("/usr/local/bin/python"+vn) {
		t.Skipf("the host's PATH has a python%s of its own", vn)
	}
	home, err := os.MkdirTemp("", "replhub-conda-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	ran := filepath.Join(home, "runs")
	base, env := filepath.Join(home, "miniconda3"), filepath.Join(home, "miniconda3", "envs", "new")
	pyenvtest.Conda(t, base, vo+".99", older, ran)
	pyenvtest.Conda(t, env, vn+".99", newer, ran)
	localRan := filepath.Join(home, "local-runs")
	local := filepath.Join(home, "local-env")
	pyenvtest.Conda(t, local, vn+".98", newer, localRan)
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{SetEnv: map[string]string{
		"HOME": home, "PATH": filepath.Join(base, "bin") + ":/usr/local/bin:/usr/bin:/bin"}})
	for _, c := range []struct {
		name, local, want, prefix string
	}{
		{"the activated env's minor, in an env", "", vn, env},
		{"the base's minor", older, vo, base},
	} {
		w.Setenv("REPLHUB_PYTHON", c.local)
		w.Setenv("CONDA_PREFIX", local)
		w.Setenv("PATH", filepath.Join(local, "bin")+":"+os.Getenv("PATH")) // as activation sets it
		r := w.Run("exec", "s"+strings.ReplaceAll(c.want, ".", ""), "1", "--host", "lab")
		require.Equal(t, 0, r.Code, "%s", r)
		assert.Contains(t, r.Stdout, "python "+c.want+".", "%s: %s", c.name, r)
		b, _ := os.ReadFile(ran)
		os.Remove(ran)
		assert.Equal(t, filepath.Join(c.prefix, "bin", "python3")+"\n", string(b), "%s: only the chosen one runs, for the session", c.name)
	}
	// The local env's minor is read from conda-meta (pyfind's
	// TestCondaMinorIsRead); the hub runs it once at most, at its start,
	// to find cloudpickle.
	b, _ := os.ReadFile(localRan)
	assert.LessOrEqual(t, strings.Count(string(b), "\n"), 1, "%s", b)
}
