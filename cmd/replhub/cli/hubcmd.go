package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/fds"
	"github.com/replhub/replhub/hub"
	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/hublog"
	"github.com/replhub/replhub/safesock"
)

func newHubCmd(e *env) *cobra.Command {
	var supervisor string
	cmd := &cobra.Command{
		Use:    "hub",
		Short:  "Run the hub daemon in the foreground (clients start it for you)",
		Args:   cobra.NoArgs,
		Hidden: false,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHub(cmd.Context(), e, supervisor)
		},
	}
	cmd.Flags().StringVar(&supervisor, "supervisor", "detached", "how the hub was started: systemd or detached")
	return cmd
}

// runHub serves until SIGTERM, SIGINT or a client's stop.
func runHub(ctx context.Context, e *env, supervisor string) error {
	// Whatever fds the hub was handed beyond 0-2 (a caller's pipe that its
	// client inherited) must not reach a worker, nor stay open here.
	inherited := fds.CloseInherited()
	// One P, unless GOMAXPROCS says otherwise. The hub waits on pipes and
	// sockets, and forwards frames between them: with an idle P beside
	// the one running, every goroutine it woke (a reply read, a request)
	// also woke a thread to look for more work, which then found none:
	// a quarter of the hub's CPU for a warm cell (README.md, "A cell's
	// round trip").
	if e.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	paths, err := config.FromEnv(e.Getenv)
	if err != nil {
		return err
	}
	if err := safesock.PrepareDir(paths.Runtime); err != nil {
		return err
	}
	logf, err := atomicfile.OpenAppend(paths.Log())
	if err != nil {
		return fmt.Errorf("hub log: %w", err)
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(hublog.New(logf, paths.Log()), nil))
	if len(inherited) > 0 {
		log.Info("closed inherited fds", "fds", inherited)
	}
	lock, err := lockHub(paths.Runtime)
	if err != nil {
		log.Error("cannot start", "err", err)
		return err
	}
	defer lock.Close()
	ln, err := safesock.Listen(paths.Socket())
	if err != nil {
		log.Error("cannot listen", "err", err)
		return err
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	h, err := hub.New(hub.Options{Paths: paths, Version: cmdenv.Version, Supervisor: supervisor, Log: log})
	if err != nil {
		ln.Close()
		return err
	}
	os.WriteFile(paths.PidFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	defer os.Remove(paths.PidFile())
	// REPLHUB_CPUPROFILE names a file for a CPU profile of the hub's whole
	// life, for finding where time goes.
	if p := e.Getenv("REPLHUB_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	return h.Run(ctx, ln)
}

// hubLockWait bounds how long a hub that starts waits for one that ends.
const hubLockWait = 20 * time.Second

// lockHub takes the runtime folder's hub lock, which a hub holds for its
// whole life: one hub at a time. A hub that ends (a stop, a restart)
// closes its socket first and then hands its sessions over or swaps
// them; a hub that a client starts meanwhile waits here until it is gone,
// rather than find their live records held by a hub still running and
// start new, empty sessions under their names. The kernel lets the lock
// go with the process, however it ends; the file is close-on-exec, so no
// worker holds it.
func lockHub(runtime string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(runtime, "hub.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("hub lock: %w", err)
	}
	deadline := time.Now().Add(hubLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("another hub of this runtime folder did not end within %s", hubLockWait)
			}
			return nil, fmt.Errorf("hub lock: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
