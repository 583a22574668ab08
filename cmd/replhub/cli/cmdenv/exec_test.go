package cmdenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	"github.com/replhub/replhub/wire"
)

// helperEnv names the part of this test binary a child runs (TestMain).
const helperEnv = "CMDENV_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "exec":
		os.Exit(childExec())
	case "arm":
		os.Exit(childArm())
	}
	os.Exit(99)
}

// child runs this test binary as a child that does the part named, its
// output in out and errb.
func child(t *testing.T, part string, env ...string) (*exec.Cmd, *bytes.Buffer, *hubtest.LockedBuffer) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), helperEnv+"="+part), env...)
	out, errb := &bytes.Buffer{}, &hubtest.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	require.NoError(t, cmd.Start())
	return cmd, out, errb
}

// childExec runs an exec whose hub, a script, never answers.
func childExec() int {
	dir := os.Getenv("CHILD_DIR")
	env := map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": filepath.Join(dir, "run")}
	getenv := func(k string) string { return env[k] }
	paths, err := config.FromEnv(getenv)
	if err != nil {
		return 98
	}
	e := New(IO{In: strings.NewReader(""), Out: os.Stdout, Err: os.Stderr}, getenv)
	e.Client = func() (*client.Client, error) {
		return &client.Client{Paths: paths, AutoStart: true, Exe: filepath.Join(dir, "hub.sh"),
			Env: []string{"REPLHUB_SUPERVISOR=detached", "PATH=" + os.Getenv("PATH")}}, nil
	}
	return e.Finish(e.Exec(context.Background(), "s", "1", client.ExecOptions{}, false))
}

// Before the cell is sent, Ctrl-C ends an exec at once, even while the
// hub it started is still coming up: nothing has reached a hub.
func TestCtrlCBeforeTheCellIsSentEndsTheExec(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "run"), 0o700))
	runs := filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho $$ >> " + runs + "\nexec sleep 30\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hub.sh"), []byte(script), 0o700))
	t.Cleanup(func() {
		b, _ := os.ReadFile(runs)
		for _, p := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	cmd, _, errb := child(t, "exec", "CHILD_DIR="+dir)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(runs); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("the hub was never started: %s", errb.String())
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: %s", err, errb.String())
		ws := ee.Sys().(syscall.WaitStatus)
		assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGINT, "ended by %v", ws)
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("one Ctrl-C did not end an exec waiting for its hub: %s", errb.String())
	}
	assert.NotContains(t, errb.String(), "interrupting")
}

// childArm prints "survived" if SIGINTs right after armCtrlC, before its
// handler is in place, neither end the process nor stay unheard once it is;
// then one SIGINT interrupts and a second ends the wait.
func childArm() int {
	e := New(IO{In: strings.NewReader(""), Out: os.Stdout, Err: os.Stderr}, os.Getenv)
	dir, _ := os.MkdirTemp("", "arm")
	defer os.RemoveAll(dir)
	c := &client.Client{Paths: config.Paths{Runtime: dir, State: dir}}
	for i := 0; i < 20; i++ {
		_, armed, stop := e.armCtrlC(context.Background(), c, "s")
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		<-armed
		stop()
	}
	ctx, armed, stop := e.armCtrlC(context.Background(), c, "s")
	defer stop()
	<-armed
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	time.Sleep(50 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		return 97
	}
	// A process about to exit leaves its handler in place, disarmed: a
	// Ctrl-C after the reply interrupts nothing.
	e.Exiting = true
	_, armed, stop = e.armCtrlC(context.Background(), c, "s")
	<-armed
	stop()
	fmt.Fprintln(os.Stderr, "--disarmed--")
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	time.Sleep(50 * time.Millisecond)
	fmt.Println("survived")
	return 0
}

func TestArmCtrlCLosesNoProcess(t *testing.T) {
	cmd, out, errb := child(t, "arm")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "stderr: %s", errb.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the child did not end")
	}
	assert.Equal(t, "survived\n", out.String())
	armed, disarmed, _ := strings.Cut(errb.String(), "--disarmed--")
	assert.Contains(t, armed, "[interrupting session 's'; Ctrl-C again stops waiting]")
	assert.NotContains(t, disarmed, "interrupting", "a Ctrl-C after stop")
}

// Code from stdin is read up to what one request carries; past it, it is
// refused with what to do, without reading the rest.
func TestReadCodeBound(t *testing.T) {
	e := New(IO{In: strings.NewReader("print(1)\n")}, func(string) string { return "" })
	code, err := e.ReadCode("-")
	require.NoError(t, err)
	assert.Equal(t, "print(1)\n", code)
	code, err = e.ReadCode("x = 1")
	require.NoError(t, err)
	assert.Equal(t, "x = 1", code)

	endless := io.MultiReader(io.LimitReader(zeros{}, wire.MaxLine+1), strings.NewReader("never read"))
	e = New(IO{In: endless}, func(string) string { return "" })
	_, err = e.ReadCode("-")
	assert.EqualError(t, err, "the code on stdin is over 64 MiB: put it in a file and run it there (exec(open(PATH).read())), pushing it first if the session is remote")
	rest, _ := io.ReadAll(endless)
	assert.Equal(t, "never read", string(rest))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
