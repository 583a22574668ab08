// Package pyenvtest builds a fake pyenv tree for tests of how replhub finds
// interpreters: versions/V/bin holds links to real interpreters, and
// shims/ holds shims that are slow on purpose (like pyenv's own, which
// cost about 0.3 s a run) and record each run, so that a test can assert
// that none ran. Conda makes a fake conda prefix likewise.
package pyenvtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TB is the part of testing.TB the tree needs (the benchmarks have their
// own).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// Tree is a fake pyenv root.
type Tree struct {
	Root  string // PYENV_ROOT: versions/, shims/, version
	Shims string // Root/shims
	ran   string // the file each shim run appends a line to
}

// New makes a tree under dir: for each version ("3.11.9") a bin folder
// whose python3 and python3.N link to the real interpreter given, shims
// for python3 and for every python3.N, and global as the pyenv global
// version.
func New(t TB, dir string, versions map[string]string, global string) *Tree {
	t.Helper()
	tr := &Tree{Root: filepath.Join(dir, ".pyenv")}
	tr.Shims = filepath.Join(tr.Root, "shims")
	tr.ran = filepath.Join(dir, "shim-runs")
	must(t, os.MkdirAll(tr.Shims, 0o755))
	progs := map[string]bool{"python3": true}
	for v, real := range versions {
		bin := filepath.Join(tr.Root, "versions", v, "bin")
		must(t, os.MkdirAll(bin, 0o755))
		minor := v[:strings.LastIndex(v, ".")]
		must(t, os.Symlink(real, filepath.Join(bin, "python"+minor)))
		must(t, os.Symlink("python"+minor, filepath.Join(bin, "python3")))
		progs["python"+minor] = true
	}
	// A shim as pyenv writes it, but that runs no pyenv: it sleeps, notes
	// that it ran, and execs the global version's program.
	for p := range progs {
		shim := fmt.Sprintf("#!/bin/sh\nexport PYENV_ROOT=\"%s\"\necho \"$0\" >> %s\nsleep 0.3\nexec \"%s/versions/$(cat %s/version)/bin/%s\" \"$@\"\n",
			tr.Root, tr.ran, tr.Root, tr.Root, p)
		must(t, os.WriteFile(filepath.Join(tr.Shims, p), []byte(shim), 0o755))
	}
	tr.SetGlobal(t, global)
	return tr
}

// SetGlobal writes the pyenv global version.
func (tr *Tree) SetGlobal(t TB, v string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(tr.Root, "version"), []byte(v+"\n"), 0o644))
}

// Reset forgets the shims that ran so far.
func (tr *Tree) Reset() { os.Remove(tr.ran) }

// Runs lists the shims that ran, one a line.
func (tr *Tree) Runs() string {
	b, _ := os.ReadFile(tr.ran)
	return string(b)
}

func must(t TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
