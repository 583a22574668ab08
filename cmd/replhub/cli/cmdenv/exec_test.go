package cmdenv

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/tests/hubtest"
)

// A second Ctrl-C stops an exec that still waits for the hub it started,
// as it stops one that waits for its cell.
func TestSecondCtrlCStopsWaitingForTheHub(t *testing.T) {
	dir := t.TempDir()
	// A hub that never answers: its first run notes its pid and sleeps.
	// The first Ctrl-C's interrupt starts it again once the exec's start
	// has given up: that run ends at once.
	runs := filepath.Join(dir, "runs")
	exe := filepath.Join(dir, "hub.sh")
	script := "#!/bin/sh\necho $$ >> " + runs + "\n[ $(wc -l < " + runs + ") -gt 1 ] && exit 0\nexec sleep 30\n"
	require.NoError(t, os.WriteFile(exe, []byte(script), 0o700))
	started := func() []string {
		b, _ := os.ReadFile(runs)
		return strings.Fields(string(b))
	}
	t.Cleanup(func() {
		if pids := started(); len(pids) > 0 {
			pid, _ := strconv.Atoi(pids[0])
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	env := map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": filepath.Join(dir, "run")}
	require.NoError(t, os.Mkdir(env["XDG_RUNTIME_DIR"], 0o700))
	getenv := func(k string) string { return env[k] }
	paths, err := config.FromEnv(getenv)
	require.NoError(t, err)

	errw := &hubtest.LockedBuffer{}
	e := New(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: errw}, getenv)
	e.Client = func() (*client.Client, error) {
		return &client.Client{Paths: paths, AutoStart: true, Exe: exe,
			Env: []string{"REPLHUB_SUPERVISOR=detached", "PATH=" + os.Getenv("PATH")}}, nil
	}
	// Whenever a SIGINT comes, it does not end the test's process.
	keep := make(chan os.Signal, 16)
	signal.Notify(keep, os.Interrupt)
	defer signal.Stop(keep)

	done := make(chan error, 1)
	go func() {
		done <- e.Exec(context.Background(), "s", "1", client.ExecOptions{}, false, false)
	}()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(errw.String(), "interrupting"); {
		require.True(t, time.Now().Before(deadline), "a first Ctrl-C was never heard")
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("a second Ctrl-C did not stop the wait for the hub")
	}
	// The interrupt's own start is over before the folder goes.
	for deadline := time.Now().Add(10 * time.Second); len(started()) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
}
