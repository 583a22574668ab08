package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"

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
