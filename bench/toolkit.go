package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
)

// toolkitRows measures the toolkit where users feel it: grep over a
// 200 MB tree against rg run as a subprocess, and an edit of a 10 MB file,
// each inside a session (the in-process time the helper itself reports).
func toolkitRows(w *world, n int) ([]row, error) {
	ctx := context.Background()
	tree := filepath.Join(w.root, "tree")
	if err := makeTree(tree, 200<<20); err != nil {
		return nil, err
	}
	var rows []row
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	timed := func(codeFor func(i int) string) (time.Duration, error) {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			code := codeFor(i)
			res, err := w.c.Exec(ctx, "tk", fmt.Sprintf("import time; _t = time.perf_counter(); %s; time.perf_counter() - _t", code), o)
			if err != nil {
				return 0, err
			}
			if res.Error != nil {
				return 0, fmt.Errorf("%s: %s", code, res.Text())
			}
			var sec float64
			if res.Value == nil {
				return 0, fmt.Errorf("%s: no value", code)
			}
			fmt.Sscanf(*res.Value, "%g", &sec)
			ds = append(ds, time.Duration(sec*float64(time.Second)))
		}
		return median(ds), nil
	}
	if _, err := exec.LookPath("rg"); err == nil {
		for _, c := range []struct{ what, pattern string }{
			{"a few hundred hits", `def func_42\(`},
			{"every def, ~80,000 hits", `def \w+_\d+\(`},
		} {
			g, err := timed(func(int) string { return fmt.Sprintf("grep(r'%s', %q)", c.pattern, tree) })
			if err != nil {
				return nil, err
			}
			rg, err := timed(func(int) string {
				return fmt.Sprintf("import subprocess; subprocess.run(['rg', '-n', '--no-ignore', r'%s', %q], stdout=subprocess.PIPE)", c.pattern, tree)
			})
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{"`grep()` over a 200 MB tree, " + c.what, ms(g), "rg in a subprocess " + ms(rg),
				fmt.Sprintf("%.2fx", float64(g)/float64(rg)), "at most 1.2x"})
		}
	}
	big := filepath.Join(w.root, "big.txt")
	var b strings.Builder
	for i := 0; b.Len() < 10<<20; i++ {
		fmt.Fprintf(&b, "line %d of a ten megabyte file, with some text to fill it\n", i)
	}
	if err := os.WriteFile(big, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	e, err := timed(func(i int) string {
		old, new := "line 50000 of", "LINE 50000 of"
		if i%2 == 1 {
			old, new = new, old
		}
		return fmt.Sprintf("edit(%q, %q, %q)", big, old, new)
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"`edit()` of a 10 MB file (in the session)", ms(e), "", "", "at most 50 ms"})
	return rows, nil
}

// makeTree writes about size bytes of source-like text files under dir.
func makeTree(dir string, size int) error {
	r := rand.New(rand.NewSource(1))
	words := []string{"return", "value", "self", "data", "import", "for", "in", "range", "if", "else", "print", "x", "y"}
	total := 0
	for f := 0; total < size; f++ {
		d := filepath.Join(dir, fmt.Sprintf("pkg%03d", f%200))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		var b strings.Builder
		for b.Len() < 16<<10 {
			if r.Intn(40) == 0 {
				fmt.Fprintf(&b, "def func_%d(a, b):\n", r.Intn(1000))
			}
			for k := 0; k < 8; k++ {
				b.WriteString(words[r.Intn(len(words))] + " ")
			}
			b.WriteString("\n")
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("m%05d.py", f)), []byte(b.String()), 0o644); err != nil {
			return err
		}
		total += b.Len()
	}
	return nil
}
