package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/fds"
	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/safesock"
)

// HubExeVar names the variable that says which binary a started hub runs,
// when Client.Exe does not: another build of the same version (the tests
// run a race-built hub beside a plain CLI). Empty or unset, it is the
// client's own executable.
const HubExeVar = "REPLHUB_HUB_EXE"

// hubStartWait bounds how long a client waits for a hub it started.
const hubStartWait = 10 * time.Second

// startHub starts a hub and waits for its socket. Concurrent clients
// serialise on a lock file, so only one of them starts it.
//
// Where a systemd user manager runs, the hub is a transient
// `systemd-run --user` unit with MemoryHigh=2G and MemoryMax=3G over the
// hub and all its sessions; otherwise it is a detached process (setsid)
// with no limit. REPLHUB_SUPERVISOR=detached forces the latter.
func (c *Client) startHub(ctx context.Context) error {
	if err := safesock.PrepareDir(c.Paths.Runtime); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(c.Paths.Runtime, "start.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("client: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	// Somebody else may have started it while we waited for the lock.
	if uc, err := safesock.Dial(ctx, c.Paths.Socket()); err == nil {
		uc.Close()
		return nil
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	exe := c.Exe
	if exe == "" && config.Getenv(env, HubExeVar) != "" {
		// The hub starts in /: a relative path is this process's.
		if exe, err = filepath.Abs(config.Getenv(env, HubExeVar)); err != nil {
			return fmt.Errorf("client: %s: %w", HubExeVar, err)
		}
	}
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("client: cannot find the replhub binary: %w", err)
		}
	}
	exited := make(chan error, 1)
	// The hub gets stdin, stdout and stderr and nothing else: an fd this
	// process inherited without close-on-exec (a caller's `3>pipe`) would
	// otherwise pass into the hub and on into its workers, and that pipe
	// would never see EOF. os/exec leaves such fds open in a child.
	undo := fds.MarkCloseOnExec()
	err = nil
	if !c.startSystemd(exe, env) {
		err = c.startDetached(exe, env, exited)
	}
	undo()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(hubStartWait)
	for time.Now().Before(deadline) {
		if uc, err := safesock.Dial(ctx, c.Paths.Socket()); err == nil {
			uc.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("client: the hub exited at start (%v): %s", err, c.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("client: the hub did not answer within %s: %s", hubStartWait, c.logTail())
}

// startSystemd tries a transient user unit; false means use a detached process.
func (c *Client) startSystemd(exe string, env []string) bool {
	if config.Getenv(env, "REPLHUB_SUPERVISOR") == "detached" {
		return false
	}
	rt := config.Getenv(env, "XDG_RUNTIME_DIR")
	if rt == "" {
		return false
	}
	if _, err := os.Stat(filepath.Join(rt, "systemd", "private")); err != nil {
		return false
	}
	sr, err := exec.LookPath("systemd-run")
	if err != nil {
		return false
	}
	args := []string{"--user", "--quiet", "--collect",
		fmt.Sprintf("--unit=replhub-hub-%d-%d", os.Getuid(), time.Now().UnixNano()%1e6),
		"-p", "MemoryHigh=2G", "-p", "MemoryMax=3G",
		// The hub's end is not its sessions': local workers outlive it, in
		// this unit's cgroup and under its ceiling, until a new hub adopts them.
		"-p", "KillMode=process"}
	for _, k := range []string{"HOME", "PATH", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "LANG", "SSH_AUTH_SOCK", "SUDO_ASKPASS"} {
		if v := config.Getenv(env, k); v != "" {
			args = append(args, "--setenv="+k+"="+v)
		}
	}
	args = append(args, exe, "hub", "--supervisor", "systemd")
	cmd := exec.Command(sr, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		appendLog(c.Paths.Log(), fmt.Sprintf("systemd-run failed (%v): %s; starting a detached hub with no memory limit\n", err, strings.TrimSpace(string(out))))
		return false
	}
	return true
}

func (c *Client) startDetached(exe string, env []string, exited chan<- error) error {
	logf, err := atomicfile.OpenAppend(c.Paths.Log())
	if err != nil {
		return fmt.Errorf("client: hub log: %w", err)
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer null.Close()
	cmd := exec.Command(exe, "hub", "--supervisor", "detached")
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("client: cannot start the hub: %w", err)
	}
	// Reap it if it exits while this process lives (a long-lived MCP server).
	go func() { exited <- cmd.Wait() }()
	return nil
}

func (c *Client) logTail() string {
	// Only the end of a log that grows as long as the hub runs.
	b, err := atomicfile.ReadTail(c.Paths.Log(), 16<<10)
	if errors.Is(err, os.ErrNotExist) {
		return "no hub log at " + c.Paths.Log()
	}
	if err != nil {
		return "the hub log cannot be read: " + err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "the end of " + c.Paths.Log() + ":\n" + strings.Join(lines, "\n")
}

func appendLog(path, line string) {
	f, err := atomicfile.OpenAppend(path)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(time.Now().Format(time.RFC3339) + " " + line)
}

// IsNoHub reports whether err means that no hub is running.
func IsNoHub(err error) bool { return errors.Is(err, safesock.ErrNoHub) }
