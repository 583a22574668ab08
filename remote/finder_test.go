package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/pyenvtest"
)

// runFinder runs the finder script for spec under sh, as a host would, with
// home and path as the login's, and returns its marker line.
func runFinder(t *testing.T, spec StartSpec, home, path string) string {
	t.Helper()
	script, err := Script(spec, "tok")
	require.NoError(t, err)
	cmd := exec.Command("sh", "-s")
	cmd.Dir = home
	cmd.Env = []string{"HOME=" + home, "PATH=" + path}
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

// The finder reads pyenv's rules and folders instead of running its shims,
// and runs the shim of a manager it does not know only when nothing else
// is there.
func TestFinderOnAPyenvHost(t *testing.T) {
	ps := hubtest.Pythons()
	var vs []string
	for _, v := range []string{"3.11", "3.12", "3.13", "3.10", "3.9", "3.8"} {
		if _, ok := ps[v]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) < 2 {
		t.Skipf("needs two Pythons of different minors, found %v", ps)
	}
	global, other := vs[0], vs[1]
	home := t.TempDir()
	tr := pyenvtest.New(t, home, map[string]string{global + ".99": ps[global], other + ".99": ps[other]}, global+".99")
	bin := func(v string) string { return filepath.Join(tr.Root, "versions", v+".99", "bin") }
	path := tr.Shims + ":/nonexistent"
	assert.Equal(t, "FOUND "+global+" "+filepath.Join(bin(global), "python"+global), runFinder(t, StartSpec{Prefer: global}, home, path))
	assert.Equal(t, "FOUND "+other+" "+filepath.Join(bin(other), "python"+other), runFinder(t, StartSpec{Prefer: other}, home, path),
		"the local minor from pyenv's versions/, though the global is another")
	require.NoError(t, os.WriteFile(filepath.Join(home, ".python-version"), []byte(other+".99\n"), 0o644))
	assert.True(t, strings.HasPrefix(runFinder(t, StartSpec{}, home, path), "FOUND "+other+" "+bin(other)+"/python"),
		"no preference: the shims as pyenv resolves them, the project's version first")
	assert.Equal(t, "FOUND pinned "+filepath.Join(bin(other), "python3"), runFinder(t, StartSpec{Python: "python3"}, home, path))
	assert.Empty(t, tr.Runs(), "no shim may run")

	// Another manager's shim, the only Python there is: run, once.
	home = t.TempDir()
	other2 := filepath.Join(home, ".other", "shims")
	require.NoError(t, os.MkdirAll(other2, 0o755))
	runs := filepath.Join(home, "other-runs")
	require.NoError(t, os.WriteFile(filepath.Join(other2, "python3"), []byte("#!/bin/sh\necho run >> "+runs+"\nexec "+ps[global]+" \"$@\"\n"), 0o755))
	assert.Equal(t, "FOUND "+global+" "+filepath.Join(other2, "python3"), runFinder(t, StartSpec{Prefer: other}, home, other2))
	b, _ := os.ReadFile(runs)
	assert.Equal(t, "run\nrun\n", string(b), "asked its version once, then run for the session")
}
