package tests

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// completions runs `replhub __complete ARGS...`, cobra's entry for every
// shell, and returns the candidates and the directive line.
func completions(t *testing.T, e *hubtest.Env, args ...string) ([]string, string) {
	t.Helper()
	r := e.Run(append([]string{"__complete"}, args...)...)
	require.Equal(t, 0, r.Code, "%s", r)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func TestShellCompletionSessions(t *testing.T) {
	t.Parallel()
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	// A loaded machine under -race may take longer than a shell's 100 ms.
	e.Setenv("REPLHUB_COMPLETION_WAIT", "10s")

	// No hub: nothing offered, and none started.
	got, dir := completions(t, e, "exec", "")
	assert.Empty(t, got)
	assert.Equal(t, ":4", dir)
	assert.Zero(t, e.HubPid(), "a completion never starts the hub")
	_, err := os.Stat(e.Paths.Socket())
	assert.True(t, os.IsNotExist(err))

	for _, n := range []string{"alpha", "beta", "bravo"} {
		require.Equal(t, 0, e.Run("exec", n, "1").Code)
	}
	for _, cmd := range []string{"exec", "wait", "interrupt", "kill", "push", "pull", "sessions", "vars", "inspect", "complete", "reset", "swap"} {
		got, dir = completions(t, e, cmd, "")
		assert.Equal(t, []string{"alpha", "beta", "bravo"}, got, cmd)
		assert.Equal(t, ":4", dir, cmd)
	}
	got, _ = completions(t, e, "kill", "b")
	assert.Equal(t, []string{"beta", "bravo"}, got)
	got, _ = completions(t, e, "exec", "alpha", "")
	assert.Empty(t, got, "the code is not completed")
	_, dir = completions(t, e, "push", "alpha", "")
	assert.Equal(t, ":0", dir, "push's source is a local file")
	got, _ = completions(t, e, "run", "")
	assert.Empty(t, got, "run takes no name")

	// Through bash itself: the generated script, bash-completion, and the
	// function it registers for replhub.
	script := filepath.Join(e.Dir, "replhub.bash")
	r := e.Run("completion", "bash")
	require.Equal(t, 0, r.Code)
	require.NoError(t, os.WriteFile(script, []byte(r.Stdout), 0o600))
	reply := bashComplete(t, e, script, "replhub kill b")
	assert.Equal(t, "beta\nbravo\n", reply)
	reply = bashComplete(t, e, script, "replhub wait al")
	assert.Equal(t, "alpha\n", reply)
}

// bashComplete asks bash to complete line (the cursor at its end) with
// the completion script, as a shell does at TAB, and returns COMPREPLY one
// a line.
func bashComplete(t *testing.T, e *hubtest.Env, script, line string) string {
	t.Helper()
	const bc = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bc); err != nil {
		t.Skip("needs the bash-completion package")
	}
	drive := `source ` + bc + ` && source "$1" || exit 9
fn=$(complete -p replhub | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
[ -n "$fn" ] || exit 8
COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
"$fn" replhub "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-c", drive, "drive", script, line)
	cmd.Env = append(append([]string(nil), e.Vars...), "PATH="+filepath.Dir(e.Bin)+":"+os.Getenv("PATH"))
	cmd.Dir = e.Cwd
	// compopt, which the script calls, says on stderr that no completion
	// is under way: bash is driven here, not at a TAB.
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	require.NoError(t, err, "%s%s", out, errb.String())
	return string(out)
}

func TestShellCompletionHostsAndPythons(t *testing.T) {
	e := hubtest.Start(t)
	home := filepath.Join(e.Dir, "home")
	ssh := filepath.Join(home, ".ssh")
	require.NoError(t, os.MkdirAll(filepath.Join(ssh, "more"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ssh, "config"), []byte("Include more/*.conf\nHost lab-7 *.corp !gw9\n  HostName 10.0.0.7\nHost gw1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ssh, "more", "x.conf"), []byte("Host lab-inc\n"), 0o600))
	e.Setenv("HOME", home)
	e.Setenv("REPLHUB_COMPLETION_WAIT", "10s")

	got, dir := completions(t, e, "exec", "x", "1", "--host", "lab")
	assert.Equal(t, []string{"lab-7", "lab-inc"}, got)
	assert.Equal(t, ":4", dir)
	got, _ = completions(t, e, "run", "1", "--jump", "")
	assert.Contains(t, got, "gw1")
	assert.NotContains(t, got, "gw9")
	assert.Zero(t, e.HubPid())

	// Interpreters on PATH by name, none of them run.
	bin := filepath.Join(e.Dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	ran := filepath.Join(e.Dir, "ran")
	for _, n := range []string{"python3.42", "python3-config", "pythonista"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755))
	}
	e.Setenv("PATH", bin+":/usr/bin:/bin")
	got, _ = completions(t, e, "exec", "x", "1", "--python", "python3.4")
	assert.Equal(t, []string{"python3.42"}, got)
	_, err := os.Stat(ran)
	assert.True(t, os.IsNotExist(err), "no interpreter ran")

	// An Include of a FIFO nobody writes is passed over, not read for ever.
	require.NoError(t, syscall.Mkfifo(filepath.Join(ssh, "more", "stuck.conf"), 0o600))
	t0 := time.Now()
	got, _ = completions(t, e, "exec", "x", "1", "--host", "")
	assert.Equal(t, []string{"gw1", "lab-7", "lab-inc"}, got)
	assert.Less(t, time.Since(t0), 5*time.Second)

	// A completion that cannot answer in time offers nothing, once its
	// deadline has passed: a hub that takes the call and never answers.
	require.NoError(t, os.MkdirAll(e.Paths.Runtime, 0o700))
	ln, err := net.Listen("unix", e.Paths.Socket())
	require.NoError(t, err)
	defer ln.Close()
	asked := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close() // open, unanswered, until the test ends
		line, _ := bufio.NewReader(c).ReadString('\n')
		asked <- line
		<-t.Context().Done()
	}()
	e.Setenv("REPLHUB_COMPLETION_WAIT", "1s")
	t0 = time.Now()
	got, _ = completions(t, e, "kill", "")
	took := time.Since(t0)
	assert.Empty(t, got)
	select {
	case line := <-asked:
		assert.Contains(t, line, `"sessions"`, "the call reached the hub that never answers")
	default:
		t.Fatal("the completion never asked the hub")
	}
	assert.GreaterOrEqual(t, took, time.Second, "the answer waited for the deadline")
	assert.Less(t, took, 5*time.Second)
}

// TestShellCompletionAtATab types a command line into a real interactive
// bash in tmux and presses TAB: the line is completed on the screen.
func TestShellCompletionAtATab(t *testing.T) {
	t.Parallel()
	const bc = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bc); err != nil {
		t.Skip("needs the bash-completion package")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux")
	}
	e := hubtest.Start(t)
	newer, _ := hubtest.PickPythons(t)
	e.Setenv("REPLHUB_PYTHON", newer)
	e.Setenv("REPLHUB_COMPLETION_WAIT", "10s")
	require.Equal(t, 0, e.Run("exec", "unique-name", "1").Code)
	r := e.Run("completion", "bash")
	require.Equal(t, 0, r.Code)
	rc := filepath.Join(e.Dir, "rc")
	require.NoError(t, os.WriteFile(rc, []byte("PS1='$ '\nsource "+bc+"\n"+r.Stdout), 0o600))

	sock := filepath.Join(e.Dir, "tmux.sock")
	tmux := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	env := []string{"env", "-i"}
	for _, kv := range e.Vars {
		if strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "REPLHUB_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Dir(e.Bin)+":/usr/bin:/bin", "TERM=xterm")
	tmux(append([]string{"new-session", "-d", "-x", "200", "-y", "20"}, append(env, "bash", "--rcfile", rc, "-i")...)...)
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	screen := func(want string) string {
		var s string
		for i := 0; i < 200; i++ {
			if s = tmux("capture-pane", "-p"); strings.Contains(s, want) {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		return s
	}
	require.Contains(t, screen("$"), "$", "bash started") // tmux trims the prompt's space
	tmux("send-keys", "replhub wait uni", "Tab")
	assert.Contains(t, screen("replhub wait unique-name"), "$ replhub wait unique-name")
}
