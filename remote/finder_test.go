package remote

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/pyenvtest"
)

// runFinder runs the finder script for spec under shell, as a host would,
// in home, with env (PATH=…) besides HOME, and returns its marker line.
func runFinder(t *testing.T, shell string, spec StartSpec, home string, env ...string) string {
	t.Helper()
	script, err := Script(spec, "tok")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-s")
	cmd.Dir = home
	cmd.Env = append([]string{"HOME=" + home}, env...)
	cmd.Stdin = strings.NewReader(script)
	out, _ := cmd.Output()
	for _, l := range strings.Split(string(out), "\n") {
		if m, ok := strings.CutPrefix(l, "REPLHUB-tok "); ok {
			return m
		}
	}
	t.Fatalf("no marker in %q", out)
	return ""
}

// eachShell runs f under dash and under bash, the shells a host's sh
// usually is.
func eachShell(t *testing.T, f func(t *testing.T, shell string)) {
	for _, shell := range []string{"dash", "bash"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skip(err)
			}
			f(t, shell)
		})
	}
}

// twoMinors picks two minors this machine has real Pythons of, and those.
func twoMinors(t *testing.T) (a, b string, ps map[string]string) {
	ps = hubtest.Pythons()
	var vs []string
	for _, v := range []string{"3.11", "3.12", "3.13", "3.10", "3.9", "3.8"} {
		if _, ok := ps[v]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) < 2 {
		t.Skipf("needs two Pythons of different minors, found %v", ps)
	}
	return vs[0], vs[1], ps
}

// The finder reads pyenv's rules and folders instead of running its shims,
// and runs the shim of a manager it does not know only when nothing else
// is there.
func TestFinderOnAPyenvHost(t *testing.T) {
	global, other, ps := twoMinors(t)
	eachShell(t, func(t *testing.T, shell string) {
		home := t.TempDir()
		tr := pyenvtest.New(t, home, map[string]string{global + ".99": ps[global], other + ".99": ps[other]}, global+".99")
		bin := func(v string) string { return filepath.Join(tr.Root, "versions", v+".99", "bin") }
		path := "PATH=" + tr.Shims + ":/nonexistent"
		assert.Equal(t, "FOUND "+global+" "+filepath.Join(bin(global), "python"+global), runFinder(t, shell, StartSpec{Prefer: global}, home, path))
		assert.Equal(t, "FOUND "+other+" "+filepath.Join(bin(other), "python"+other), runFinder(t, shell, StartSpec{Prefer: other}, home, path),
			"the local minor from pyenv's versions/, though the global is another")
		require.NoError(t, os.WriteFile(filepath.Join(home, ".python-version"), []byte(other+".99\n"), 0o644))
		assert.True(t, strings.HasPrefix(runFinder(t, shell, StartSpec{}, home, path), "FOUND "+other+" "+bin(other)+"/python"),
			"no preference: the shims as pyenv resolves them, the project's version first")
		assert.Equal(t, "FOUND pinned "+filepath.Join(bin(other), "python3"), runFinder(t, shell, StartSpec{Python: "python3"}, home, path))
		assert.Empty(t, tr.Runs(), "no shim may run")

		// Another manager's shim, the only Python there is: run, once.
		home = t.TempDir()
		other2 := filepath.Join(home, ".other", "shims")
		require.NoError(t, os.MkdirAll(other2, 0o755))
		runs := filepath.Join(home, "other-runs")
		require.NoError(t, os.WriteFile(filepath.Join(other2, "python3"), []byte("#!/bin/sh\necho run >> "+runs+"\nexec "+ps[global]+" \"$@\"\n"), 0o755))
		assert.Equal(t, "FOUND "+global+" "+filepath.Join(other2, "python3"), runFinder(t, shell, StartSpec{Prefer: other}, home, "PATH="+other2))
		b, _ := os.ReadFile(runs)
		assert.Equal(t, "run\nrun\n", string(b), "asked its version once, then run for the session")
	})
}

// On a conda host the finder reads each prefix's version from conda-meta
// instead of running its python, takes the preferred minor from an env
// (the activated one first, then the installs', then those that
// environments.txt lists), and runs an interpreter without that record
// once to ask.
func TestFinderOnACondaHost(t *testing.T) {
	a, b, ps := twoMinors(t)
	eachShell(t, func(t *testing.T, shell string) {
		home := t.TempDir()
		ran := filepath.Join(home, "runs")
		pre := func(p string) string { return filepath.Join(home, p) }
		py := func(p string) string { return filepath.Join(home, p, "bin", "python3") }
		pyenvtest.Conda(t, pre("miniconda3"), a+".1", ps[a], ran)
		pyenvtest.Conda(t, pre("miniconda3/envs/b"), b+".2", ps[b], ran)
		pyenvtest.Conda(t, pre("miniconda3/envs/bare"), "", ps[b], ran)
		pyenvtest.Conda(t, pre("micromamba/envs/a2"), a+".3", ps[a], ran)
		pyenvtest.Conda(t, pre("work/proj"), b+".4", ps[b], ran)
		require.NoError(t, os.MkdirAll(pre(".conda"), 0o755))
		require.NoError(t, os.WriteFile(pre(".conda/environments.txt"), []byte(pre("miniconda3")+"\n"+pre("work/proj")), 0o644))
		runs := func() string { return takeRuns(ran) }
		base := "PATH=" + pre("miniconda3/bin") + ":/nonexistent"
		for _, c := range []struct {
			name   string
			prefer string
			env    []string
			want   string // the marker line's version and path
			runs   string
		}{
			{"the preferred minor in an env", b, []string{base}, b + " " + py("miniconda3/envs/b"), py("miniconda3/envs/b")},
			{"the base's minor", a, []string{base}, a + " " + py("miniconda3"), py("miniconda3")},
			{"the activated env first", a, []string{base, "CONDA_PREFIX=" + pre("micromamba/envs/a2")}, a + " " + py("micromamba/envs/a2"), py("micromamba/envs/a2")},
			{"no preference: PATH's, read", "", []string{base}, a + " " + py("miniconda3"), py("miniconda3")},
			{"no conda-meta: asked once", "3.99", []string{"PATH=" + pre("miniconda3/envs/bare/bin")}, b + " " + py("miniconda3/envs/bare"),
				py("miniconda3/envs/bare") + "\n" + py("miniconda3/envs/bare")},
		} {
			assert.Equal(t, "FOUND "+c.want, runFinder(t, shell, StartSpec{Prefer: c.prefer}, home, c.env...), c.name)
			assert.Equal(t, c.runs+"\n", runs(), "%s: only the chosen one runs, for the session", c.name)
		}
		require.NoError(t, os.RemoveAll(pre("miniconda3/envs/b")))
		assert.Equal(t, "FOUND "+b+" "+py("work/proj"), runFinder(t, shell, StartSpec{Prefer: b}, home, base), "an env environments.txt lists")
		assert.Equal(t, py("work/proj")+"\n", runs())
	})
}

// takeRuns returns what the interpreters' runs noted in the file ran, one
// a line, and empties it.
func takeRuns(ran string) string {
	out, _ := os.ReadFile(ran)
	os.Remove(ran)
	return string(out)
}

// fakePython writes at path a script that notes each run in the file ran
// and execs real: an interpreter as a version manager installs it, whose
// runs a test can count.
func fakePython(t *testing.T, path, real, ran string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\necho \"$0\" >> "+ran+"\nexec "+real+" \"$@\"\n"), 0o755))
}

// On a host whose Pythons asdf, uv or rye installed, in their own folders
// and with none on PATH, the finder takes the preferred minor from those
// folders, in the order pyenv, asdf, uv, rye, and runs none of them but
// the one chosen, for the session. uv's folder moves with
// UV_PYTHON_INSTALL_DIR; rye's interpreters are in bin/ or, in its older
// layout, install/bin/.
func TestFinderOnAsdfUvRyeHosts(t *testing.T) {
	a, b, ps := twoMinors(t)
	eachShell(t, func(t *testing.T, shell string) {
		home := t.TempDir()
		ran := filepath.Join(home, "runs")
		at := func(p string) string { return filepath.Join(home, p) }
		runs := func() string { return takeRuns(ran) }
		asdfA := at(".asdf/installs/python/" + a + ".5/bin/python" + a)
		uvA := at(".local/share/uv/python/cpython-" + a + ".7-linux-x86_64-gnu/bin/python" + a)
		uvB := at(".local/share/uv/python/cpython-" + b + ".3-linux-x86_64-gnu/bin/python" + b)
		ryeB := at(".rye/py/cpython@" + b + ".2/bin/python" + b)
		ryeOldA := at(".rye/py/cpython@" + a + ".1/install/bin/python" + a)
		movedB := at("elsewhere/cpython-" + b + ".9-linux-x86_64-gnu/bin/python" + b)
		for _, p := range []string{asdfA, uvA, uvB, ryeB, ryeOldA, movedB} {
			v := a
			if strings.HasSuffix(p, "python"+b) {
				v = b
			}
			fakePython(t, p, ps[v], ran)
		}
		path := "PATH=/nonexistent"
		for _, c := range []struct {
			name   string
			prefer string
			env    []string
			want   string
		}{
			{"asdf's before uv's and rye's", a, nil, asdfA},
			{"uv's before rye's", b, nil, uvB},
			{"uv's folder where UV_PYTHON_INSTALL_DIR says", b, []string{"UV_PYTHON_INSTALL_DIR=" + at("elsewhere")}, movedB},
		} {
			assert.Equal(t, "FOUND "+c.prefer+" "+c.want, runFinder(t, shell, StartSpec{Prefer: c.prefer}, home, append(c.env, path)...), c.name)
			assert.Equal(t, c.want+"\n", runs(), "%s: only the chosen one runs, for the session", c.name)
		}
		require.NoError(t, os.RemoveAll(at(".asdf")))
		assert.Equal(t, "FOUND "+a+" "+uvA, runFinder(t, shell, StartSpec{Prefer: a}, home, path), "uv's, asdf's gone")
		assert.Equal(t, uvA+"\n", runs())
		require.NoError(t, os.RemoveAll(at(".local/share/uv")))
		assert.Equal(t, "FOUND "+b+" "+ryeB, runFinder(t, shell, StartSpec{Prefer: b}, home, path), "rye's, uv's gone")
		assert.Equal(t, ryeB+"\n", runs())
		assert.Equal(t, "FOUND "+a+" "+ryeOldA, runFinder(t, shell, StartSpec{Prefer: a}, home, path), "rye's older layout")
		assert.Equal(t, ryeOldA+"\n", runs())
	})
}
