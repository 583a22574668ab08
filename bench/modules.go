package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("modules", "measure only imports of replhub.NAME against a plain import of the same file",
		func(w *world, n int) ([]row, error) { return modulesRows(w, n) })
}

// modulesRows measures what the import hook costs: a module of replhub,
// its source asked of the hub at every import, against the same file
// imported from the session's cwd through sys.path; both reloaded in one
// warm session, and imported first in new sessions, interleaved.
func modulesRows(w *world, n int) ([]row, error) {
	ctx := context.Background()
	src := boot.Shipped()["systemd"]
	if err := os.WriteFile(filepath.Join(w.cwd, "plain_systemd.py"), src, 0o600); err != nil {
		return nil, err
	}
	// What it imports, imported from the cwd too outside replhub.
	for _, name := range []string{"_libsystemd", "_programs"} {
		if err := os.WriteFile(filepath.Join(w.cwd, name+".py"), boot.Shipped()[name], 0o600); err != nil {
			return nil, err
		}
	}
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	cell := func(name, code string) (time.Duration, error) {
		t0 := time.Now()
		r, err := w.c.Exec(ctx, name, code, o)
		if err == nil && r.Status != "ok" {
			err = fmt.Errorf("%s: %s", code, r.Output)
		}
		return time.Since(t0), err
	}
	if _, err := cell("mods", "import importlib, plain_systemd\nfrom replhub import systemd"); err != nil {
		return nil, err
	}
	var hook, plain, firstHook, firstPlain []time.Duration
	for i := 0; i < max(n, 50); i++ {
		d, err := cell("mods", "importlib.reload(systemd)")
		if err != nil {
			return nil, err
		}
		hook = append(hook, d)
		if d, err = cell("mods", "importlib.reload(plain_systemd)"); err != nil {
			return nil, err
		}
		plain = append(plain, d)
	}
	for i := 0; i < min(n, 10); i++ {
		for j, code := range []string{"from replhub import systemd", "import plain_systemd"} {
			name := fmt.Sprintf("first-%d-%d", i, j)
			if _, err := cell(name, "pass"); err != nil {
				return nil, err
			}
			d, err := cell(name, code)
			if err != nil {
				return nil, err
			}
			if j == 0 {
				firstHook = append(firstHook, d)
			} else {
				firstPlain = append(firstPlain, d)
			}
			w.c.Kill(ctx, name)
		}
	}
	size := fmt.Sprintf("%.0f KB", float64(len(src))/1000)
	h, p := median(hook), median(plain)
	fh, fp := median(firstHook), median(firstPlain)
	return []row{
		{"cell `importlib.reload(systemd)` of replhub, " + size + " (client package)", ms(h), "the same file from the cwd " + ms(p),
			fmt.Sprintf("%.2fx", float64(h)/float64(p)), "about 1x: the hub's read is small beside compiling"},
		{"first `from replhub import systemd` in a new session", ms(fh), "`import plain_systemd` " + ms(fp),
			fmt.Sprintf("%.2fx", float64(fh)/float64(fp)), "a few ms more: the relay loads at the first request"},
	}, nil
}
