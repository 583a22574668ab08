// Package hubtest starts isolated replhub hubs for end-to-end tests: the
// real binary, built once per test process, with its own XDG folders, so a
// test never touches the user's hub. Every hub a test starts is stopped, and
// killed by its pid if it does not stop, in t.Cleanup.
//
// When the tests run with -race, the hub's binary is built with -race too,
// and every race-built process of a world writes its race reports to files
// in the world's folder (GORACE log_path). The CLI's binary is a plain
// build: a race-built process starts with thousands of page faults, and
// the tests make some 1,500 CLI calls; the CLI starts the race-built hub
// ($REPLHUB_HUB_EXE), and MCP servers run the race-built binary too. A
// report there, or in the hub's log, fails the test that made the world at cleanup, with
// the report printed: a race-built hub otherwise only says so by exiting 66
// when it stops, which nobody checks.
package hubtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/procstat"
)

var (
	buildOnce  sync.Once
	binPath    string // the CLI's
	hubBinPath string // the hub's: race-built under -race, else binPath
	buildErr   error
)

// Binary builds replhub once per test process into a folder that every user
// may read (tests run it as another user too) and returns the path of the
// CLI's build (see the package doc).
func Binary(t testing.TB) string {
	t.Helper()
	return built(t, &binPath)
}

// HubBinary is Binary's hub build: race-built when the tests run with
// -race, else the same binary.
func HubBinary(t testing.TB) string {
	t.Helper()
	return built(t, &hubBinPath)
}

func built(t testing.TB, path *string) string {
	t.Helper()
	build()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return *path
}

func build() {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "replhub-bin-")
		if err != nil {
			buildErr = err
			return
		}
		os.Chmod(dir, 0o755)
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		binPath = filepath.Join(dir, "replhub")
		hubBinPath = binPath
		builds := [][]string{{"build", "-o", binPath, "./cmd/replhub"}}
		if Race {
			hubBinPath = filepath.Join(dir, "race", "replhub")
			builds = append(builds, []string{"build", "-race", "-o", hubBinPath, "./cmd/replhub"})
		}
		errs := make([]error, len(builds))
		var wg sync.WaitGroup
		for i, args := range builds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command("go", args...)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}()
		}
		wg.Wait()
		if buildErr = errors.Join(errs...); buildErr == nil {
			os.Chmod(filepath.Dir(hubBinPath), 0o755)
		}
	})
}

// Env is one isolated replhub world: its own runtime, state and config
// folders, and the environment the binary runs with.
type Env struct {
	t   testing.TB
	Bin string // the CLI's binary
	// HubBin is the binary the world's hub runs, and its MCP servers
	// should: race-built when the tests run with -race, else Bin.
	HubBin  string
	Dir     string // the root of the world's folders
	Runtime string // $XDG_RUNTIME_DIR
	State   string // $XDG_STATE_HOME
	Config  string // $XDG_CONFIG_HOME
	Vars    []string
	Cwd     string
	Paths   config.Paths
	// As, when set, runs the binary as this user (through setpriv); the
	// world's folders then belong to that user.
	As string
}

// Start makes an isolated world; its hub starts on first use, as a user's
// would, and is stopped at cleanup.
func Start(t testing.TB) *Env {
	t.Helper()
	bin := Binary(t)
	dir, err := os.MkdirTemp("", "replhub-test-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{t: t, Bin: bin, HubBin: HubBinary(t), Dir: dir,
		Runtime: filepath.Join(dir, "run"), State: filepath.Join(dir, "state"), Config: filepath.Join(dir, "config"),
		Cwd: filepath.Join(dir, "work")}
	for _, d := range []string{e.Runtime, e.Cwd} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e.Vars = append(filteredEnviron(), "XDG_RUNTIME_DIR="+e.Runtime, "XDG_STATE_HOME="+e.State, "XDG_CONFIG_HOME="+e.Config)
	e.Vars = e.raceVars(e.Vars)
	e.Paths, err = config.FromEnv(e.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.StopHub()
		e.checkRaces()
		if t.Failed() {
			e.logHubLog()
		}
		os.RemoveAll(dir)
	})
	return e
}

// logHubLog puts the end of the hub's log in a failed test's output: a
// failure in CI is read from that alone.
func (e *Env) logHubLog() {
	b, err := os.ReadFile(e.Paths.Log())
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	e.t.Logf("the end of the hub's log (%s):\n%s", e.Paths.Log(), strings.Join(lines, "\n"))
}

// raceLogPrefix is where a race-built process of the world writes its race
// reports: the runtime adds ".PID".
func (e *Env) raceLogPrefix() string { return filepath.Join(e.Dir, "race") }

// raceVars sets, when the hub's binary is race-built, the variable that
// has the CLI start it, and GORACE: reports go to files under
// raceLogPrefix, and a process sleeps 50 ms at exit instead of the default
// second. The caller's own GORACE options are kept, but not its log_path.
func (e *Env) raceVars(vars []string) []string {
	if !Race {
		return vars
	}
	vars = append(vars, client.HubExeVar+"="+e.HubBin)
	opts := "atexit_sleep_ms=50"
	out := make([]string, 0, len(vars)+1)
	for _, kv := range vars {
		if v, ok := strings.CutPrefix(kv, "GORACE="); ok {
			opts += " " + v
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GORACE="+opts+" log_path="+e.raceLogPrefix())
}

// checkRaces fails the test when a replhub process of the world reported a
// data race: in a report file of GORACE's log_path, or in the hub's log
// (the hub's stderr, for a hub started without that variable).
func (e *Env) checkRaces() {
	files, _ := filepath.Glob(e.raceLogPrefix() + ".*")
	files = append(files, e.Paths.Log())
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("DATA RACE")) {
			continue
		}
		e.t.Errorf("a replhub process reported a data race (%s):\n%s", f, raceReports(string(b)))
	}
}

// raceReports cuts the race detector's reports out of a log: each starts
// with "WARNING: DATA RACE" after a line of "=" and ends at the next such
// line. At most 64 KiB is kept.
func raceReports(log string) string {
	const sep = "=================="
	var b strings.Builder
	for {
		i := strings.Index(log, "WARNING: DATA RACE")
		if i < 0 || b.Len() > 64<<10 {
			break
		}
		rest := log[i:]
		end := strings.Index(rest, "\n"+sep)
		if end < 0 {
			end = len(rest)
		}
		b.WriteString(sep + "\n" + rest[:end] + "\n" + sep + "\n")
		log = rest[end:]
	}
	return b.String()
}

// StartAs makes an isolated world for another user (the test must run as
// root): its folders, a home among them, belong to that user, and its
// environment is a login's: HOME, USER, a plain PATH.
func StartAs(t testing.TB, username string) *Env {
	t.Helper()
	e := Start(t)
	home := filepath.Join(e.Dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("chown", "-R", username+":", e.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	os.Chmod(e.Dir, 0o755)
	e.As = username
	e.Vars = []string{"HOME=" + home, "USER=" + username, "LOGNAME=" + username, "PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8", "XDG_RUNTIME_DIR=" + e.Runtime, "XDG_STATE_HOME=" + e.State, "XDG_CONFIG_HOME=" + e.Config}
	e.Vars = e.raceVars(e.Vars)
	return e
}

// filteredEnviron is the test's environment without replhub's own variables.
func filteredEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "REPLHUB_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Getenv looks a variable up in the world's environment.
func (e *Env) Getenv(k string) string {
	for i := len(e.Vars) - 1; i >= 0; i-- {
		if kk, v, ok := strings.Cut(e.Vars[i], "="); ok && kk == k {
			return v
		}
	}
	return ""
}

// WriteConfig writes the world's config.json; the hub reads it at the next
// session start.
func (e *Env) WriteConfig(json string) {
	e.t.Helper()
	if err := os.MkdirAll(e.Paths.Config, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.Paths.ConfigFile(), []byte(json), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// Setenv sets a variable for later runs.
func (e *Env) Setenv(k, v string) { e.Vars = append(e.Vars, k+"="+v) }

// Result is one run of the binary.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// Run runs the binary with args in the world's cwd, bounded by 2 minutes.
func (e *Env) Run(args ...string) Result {
	return e.RunInput("", args...)
}

// RunInput runs the binary with stdin.
func (e *Env) RunInput(stdin string, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, args...)
	if e.As != "" {
		cmd = exec.CommandContext(ctx, "setpriv", append([]string{"--reuid=" + e.As, "--regid=" + e.As, "--init-groups", e.Bin}, args...)...)
	}
	cmd.Dir = e.Cwd
	cmd.Env = e.Vars
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			e.t.Fatalf("running replhub %v: %v", args, err)
		}
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// Client is an in-process client of this world's hub.
func (e *Env) Client() *client.Client {
	c := client.New(e.Paths)
	c.Exe = e.HubBin
	c.Env = e.Vars
	e.t.Cleanup(c.Close)
	return c
}

// HubPid is the running hub's pid, or 0.
func (e *Env) HubPid() int {
	b, err := os.ReadFile(e.Paths.PidFile())
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// StopHub stops the hub and, if it is still alive after 10 s, kills it by pid.
func (e *Env) StopHub() {
	pid := e.HubPid()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, "stop")
	if e.As != "" {
		cmd = exec.CommandContext(ctx, "setpriv", "--reuid="+e.As, "--regid="+e.As, "--init-groups", e.Bin, "stop")
	}
	cmd.Env = e.Vars
	cmd.Run()
	// The socket goes first; the hub then ends its sessions and exits.
	if pid > 0 && !WaitGone(pid, 5*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	e.KillWorkers()
}

// KillWorkers ends, by pid, every durable worker of this world that is
// still running (one whose hub was killed, and no hub adopted): local
// workers outlive their hub. Root workers are asked through sudo's
// process, which the test may signal.
func (e *Env) KillWorkers() {
	dir := e.Paths.WorkerDir()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// RemoveBinary removes the binary Binary built; TestMain calls it.
func RemoveBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}

// Alive reports whether pid runs (a process that is exiting does not).
func Alive(pid int) bool { return procstat.Running(pid, "") }

// WaitGone waits up to d for pid to end.
func WaitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if procstat.Exited(pid, "") {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Pythons finds CPython interpreters on this machine, by minor version
// ("3.6" → path): pyenv's versions, then python3.N on PATH.
func Pythons() map[string]string {
	found := map[string]string{}
	var roots []string
	if out, err := exec.Command("pyenv", "root").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	if h, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(h, ".pyenv"))
	}
	for _, root := range roots {
		dirs, _ := filepath.Glob(filepath.Join(root, "versions", "3.*", "bin"))
		sort.Strings(dirs)
		for _, d := range dirs {
			for minor := 6; minor <= 14; minor++ {
				v := fmt.Sprintf("3.%d", minor)
				p := filepath.Join(d, "python"+v)
				if _, ok := found[v]; !ok && isExec(p) {
					found[v] = p
				}
			}
		}
	}
	for minor := 6; minor <= 14; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		if _, ok := found[v]; ok {
			continue
		}
		if p, err := exec.LookPath("python" + v); err == nil && !strings.Contains(p, "/shims/") {
			found[v] = p
		}
	}
	return found
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// PickPythons returns one interpreter of a recent minor (3.13 or 3.12,
// else the newest) and one of an old one (3.6 to 3.8), skipping the test
// when the machine has none.
func PickPythons(t testing.TB) (newer, older string) {
	t.Helper()
	ps := Pythons()
	for _, v := range []string{"3.13", "3.12", "3.11", "3.10"} {
		if p, ok := ps[v]; ok {
			newer = p
			break
		}
	}
	for _, v := range []string{"3.6", "3.7", "3.8"} {
		if p, ok := ps[v]; ok {
			older = p
			break
		}
	}
	if newer == "" || older == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs a Python 3.12/3.13 and a 3.6–3.8; found %v", ps)
		}
		t.Skipf("needs a Python 3.12/3.13 and a 3.6–3.8; found %v", ps)
	}
	return newer, older
}
