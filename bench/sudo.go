package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/replhub/replhub/client"
)

// sudoRows measures root session starts: with `sudo -n` against a user
// session's start, and through the askpass relay (the fake sudo of the
// tests, which wants a password) less the askpass program's own time.
func sudoRows(w *world, n int, userStart time.Duration) ([]row, error) {
	var rows []row
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env, Sudo: true}
	if err := exec.Command("sudo", "-n", "true").Run(); err == nil {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("root-%d", i)
			t0 := time.Now()
			if _, err := w.c.Exec(ctx, name, "pass", o); err != nil {
				return nil, err
			}
			ds = append(ds, time.Since(t0))
			w.c.Kill(ctx, name)
		}
		d := median(ds)
		rows = append(rows, row{"root session start with `sudo -n`", ms(d), "user session start " + ms(userStart),
			fmt.Sprintf("%.2fx", float64(d)/float64(userStart)), "the ratio"})
	}

	_, file, _, _ := runtime.Caller(0)
	td := filepath.Join(filepath.Dir(file), "..", "tests", "testdata")
	src, err := os.ReadFile(filepath.Join(td, "fakesudo.py"))
	if err != nil {
		return rows, err
	}
	dir := filepath.Join(w.root, "sudo")
	os.MkdirAll(dir, 0o700)
	fake := filepath.Join(dir, "sudo")
	os.WriteFile(fake, append([]byte("#!"+w.py+"\n"), src...), 0o755)
	os.WriteFile(filepath.Join(dir, "pw"), []byte("benchmark password\n"), 0o600)
	askpass := filepath.Join(td, "fakeaskpass.sh")
	env := append(append([]string(nil), w.env...), "REPLHUB_SUDO="+fake, "FAKE_SUDO_MODE=password",
		"FAKE_SUDO_EXPECT_FILE="+filepath.Join(dir, "pw"), "SUDO_ASKPASS="+askpass, "FAKE_ASKPASS_FILE="+filepath.Join(dir, "pw"))
	o.Env = env
	var ds []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("relay-%d", i)
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, name, "pass", o); err != nil {
			return rows, err
		}
		ds = append(ds, time.Since(t0))
		w.c.Kill(ctx, name)
	}
	relay := median(ds)
	own := time.Duration(0)
	ds = ds[:0]
	for i := 0; i < n; i++ {
		cmd := exec.Command(askpass, "prompt")
		cmd.Env = env
		t0 := time.Now()
		cmd.Run()
		ds = append(ds, time.Since(t0))
	}
	own = median(ds)
	rows = append(rows, row{"root session start through the askpass relay (fake sudo)", ms(relay - own), "askpass itself " + ms(own) + " (subtracted)",
		fmt.Sprintf("%.2fx user start", float64(relay-own)/float64(userStart)), "open to ready"})
	return rows, nil
}
