package cmdenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/early"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

// DefaultTimeout is how many seconds exec and wait wait when -t is not
// given.
const DefaultTimeout = lean.DefaultTimeout

// Exec runs code in session name and prints the result (as JSON with
// asJSON). A terminal sees the cell's output as it is written, but for
// JSON, a cell not waited for (NoWait, Queue) and a group's (Hosts).
// Ctrl-C before the cell is sent ends the command (nothing has reached
// the hub); after, a first one interrupts the cell and a second one stops
// waiting.
func (e *Env) Exec(ctx context.Context, name, code string, eo client.ExecOptions, asJSON bool) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	if err := c.Connect(ctx); err != nil {
		return err
	}
	parent := ctx
	ctx, armed, stop := e.armCtrlC(ctx, c, name)
	defer stop()
	if eo.Sudo {
		<-armed // SUDO_ASKPASS may run: it must not start with SIGINT ignored
	}
	eo.OnProgress = e.FanProgress()
	defer e.ClearFanProgress()
	streamed := e.StreamOn(&eo, !asJSON && !eo.NoWait && !eo.Queue && eo.Hosts == "")
	res, err := c.Exec(ctx, name, code, eo)
	if err != nil {
		streamed.EndLine(true) // the error has a line of its own
		if ctx.Err() != nil && parent.Err() == nil {
			return e.stoppedWaiting(name)
		}
		return err
	}
	streamed.EndLine(res.Text() != "")
	return e.PrintResult(res, asJSON)
}

// stoppedWaiting ends an exec or a wait of session name that a second
// Ctrl-C stopped: one line, and the exit code of a cell still running.
func (e *Env) stoppedWaiting(name string) error {
	fmt.Fprintln(e.IO.Err, "replhub: "+lean.StoppedWaiting(name))
	e.Code = ExitRunning
	return nil
}

// Run runs code once in a new session named name, that nobody else sees
// and that ends with the call (eo.Private; `replhub run`), and prints the
// result as Exec does, with the transcript's path first when one is kept
// (eo.Transcript). A first Ctrl-C interrupts the cell; a second ends the
// command, and with it the session.
func (e *Env) Run(ctx context.Context, name, code string, eo client.ExecOptions, asJSON bool) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	cmdCtx := ctx
	ctx, stop := InterruptOnSignal(ctx, c, name, lean.RunInterruptNote, e.Notes())
	defer stop()
	eo.Private = true
	streamed := e.StreamOn(&eo, !asJSON)
	res, err := c.Exec(ctx, name, code, eo)
	if err != nil {
		streamed.EndLine(true) // the error has a line of its own
	}
	if err != nil && ctx.Err() != nil && cmdCtx.Err() == nil {
		return errors.New(lean.RunStopped)
	}
	if err != nil {
		return err
	}
	streamed.EndLine(res.Text() != "")
	if eo.Transcript {
		fmt.Fprintf(e.IO.Err, "[transcript: %s]\n", c.Paths.Transcript(name))
	}
	return e.PrintResult(res, asJSON)
}

// Wait collects cell (0: whichever) of session name, waiting up to
// timeout, and prints it; Ctrl-C interrupts the cell.
func (e *Env) Wait(ctx context.Context, name string, cell int, timeout time.Duration, maxOutput int, asJSON bool) error {
	parent := ctx
	ctx, c, stop, err := e.Blocking(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	res, err := c.WaitCell(ctx, name, cell, timeout, maxOutput, e.FanProgress())
	e.ClearFanProgress()
	if err != nil {
		if ctx.Err() != nil && parent.Err() == nil {
			return e.stoppedWaiting(name)
		}
		return err
	}
	return e.printWait(res, asJSON)
}

// printWait prints a wait's result: as any result, but that a queued
// cell, which has not even started, exits as still running.
func (e *Env) printWait(res *wire.Result, asJSON bool) error {
	err := e.PrintResult(res, asJSON)
	e.Code = res.WaitExitCode()
	return err
}

// Sessions prints the list of sessions, or session name's alone (with
// its group's NAME@HOST sessions).
func (e *Env) Sessions(ctx context.Context, name string, asJSON bool) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	l, err := c.Sessions(ctx)
	if err != nil {
		return err
	}
	return e.printSessions(l, name, asJSON)
}

func (e *Env) printSessions(l *wire.SessionList, name string, asJSON bool) error {
	found, err := l.Print(e.IO.Out, name, asJSON)
	if !found {
		return fmt.Errorf("no session '%s'", name)
	}
	return err
}

// Message prints the message f gets from the hub (an interrupt's, a
// kill's), one line.
func (e *Env) Message(f func(*client.Client) (string, error)) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	msg, err := f(c)
	if err != nil {
		return err
	}
	return e.printMessage(msg)
}

// printMessage prints an interrupt's or a kill's message, one line.
func (e *Env) printMessage(msg string) error {
	_, err := fmt.Fprintln(e.IO.Out, msg)
	return err
}

// Resume finishes a plain exec, run, wait, sessions, interrupt, kill or
// query that package early took in its init: s Unsent, the hub did not
// get it (its Code is what standard input held, for `-`); else s.Line is
// the hub's reply, nil when the hub closed the connection before it. A
// reply that says nothing ran (the session is to be made with the
// caller's folder and environment, or a password) has the call sent again
// the whole way.
func (e *Env) Resume(ctx context.Context, s *early.Sent) error {
	timeout := seconds(s.Timeout)
	again := func() error {
		switch s.Op {
		case wire.OpWait:
			return e.Wait(ctx, s.Name, s.Cell, timeout, s.MaxOutput, s.JSON)
		case wire.OpSessions:
			return e.Sessions(ctx, s.Name, s.JSON)
		case wire.OpInterrupt:
			return e.Message(func(c *client.Client) (string, error) { return c.InterruptCell(ctx, s.Name, s.Cell) })
		case wire.OpKill:
			return e.Message(func(c *client.Client) (string, error) { return c.Kill(ctx, s.Name) })
		case wire.OpVars, wire.OpInspect, wire.OpComplete, wire.OpReset:
			return e.Query(func(c *client.Client) (*wire.Answer, error) { return ask(ctx, c, s.Call) }, s.JSON)
		}
		eo := client.ExecOptions{Timeout: timeout, MaxOutput: s.MaxOutput, NoWait: s.NoWait, Queue: s.Queue,
			Python: s.Python, Host: s.Host, Sudo: s.Sudo}
		if s.Private {
			return e.Run(ctx, s.Name, s.Code, eo, s.JSON)
		}
		return e.Exec(ctx, s.Name, s.Code, eo, s.JSON)
	}
	if s.Unsent {
		return again()
	}
	if s.Line == nil {
		s.Screen.EndLine(true) // the error has a line of its own
		return client.ErrHubGone
	}
	rep, err := client.ParseReply(s.Line)
	if err == nil && rep.Err != nil {
		err = rep.Err
	}
	if wire.IsCode(err, wire.CodeNeedEnv) || wire.IsCode(err, wire.CodeNeedPassword) {
		return again()
	}
	// Output shown as it came (on a terminal) may have left its last line
	// open.
	scr := s.Screen
	if err != nil {
		scr.EndLine(true) // the error has a line of its own
		return err
	}
	if p := rep.Plain; p != nil {
		e.Code = p.Exit
		scr.EndLine(p.Text != "")
		_, err := io.WriteString(e.IO.Out, p.Text)
		return err
	}
	if (s.Op == wire.OpInterrupt || s.Op == wire.OpKill) && rep.Message != "" {
		// From a hub that does not answer them plainly.
		return e.printMessage(rep.Message)
	}
	if isQuery(s.Op) && rep.Answer != nil {
		// From a hub that does not answer a query plainly.
		return e.PrintAnswer(rep.Answer, s.JSON)
	}
	if s.Op == wire.OpSessions && rep.Sessions != nil {
		// From a hub that does not answer a list plainly, or for a name
		// it does not have (printSessions says so).
		return e.printSessions(rep.Sessions, s.Name, s.JSON)
	}
	if rep.Result == nil {
		return errors.New("client: malformed reply from hub: no result, list nor message")
	}
	if s.Op == wire.OpWait {
		return e.printWait(rep.Result, s.JSON)
	}
	scr.EndLine(rep.Result.Text() != "")
	return e.PrintResult(rep.Result, s.JSON)
}

// seconds is the time.Duration that early's seconds came from: it sent
// them as the client does, through one (Duration.Seconds), and rounding
// gets the same back where truncating may lose a nanosecond.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// armCtrlC makes Ctrl-C interrupt the cell about to be sent. A Go signal
// handler takes two new threads and a few hundred microseconds to set up,
// as long as a warm cell's whole round trip, so it is set up beside the
// call instead of before it: until it is in place (armed is closed),
// SIGINT is ignored, one system call, so a Ctrl-C in that first fraction
// of a millisecond is lost rather than fatal; it never leaves the cell
// running with nobody waiting for it. The hub is running by now: no child
// of this process inherits the ignored SIGINT, but SUDO_ASKPASS, which
// waits for armed. stop disarms the handler, so that a Ctrl-C after the
// reply interrupts nothing, and, unless the process is about to exit
// (Env.Exiting), waits for it and removes it. SIGINT then stays ignored
// in this process (os/signal cannot give back the default action once it
// was ignored), and so in any child it starts: call stop only as the
// command ends.
func (e *Env) armCtrlC(parent context.Context, c *client.Client, name string) (context.Context, <-chan struct{}, func()) {
	signal.Ignore(os.Interrupt)
	ctx, cancel := context.WithCancel(parent)
	armed := make(chan struct{})
	var istop func()
	notes := e.Notes() // made here: the screen is this goroutine's to make
	go func() {
		ictx, stop := InterruptOnSignal(ctx, c, name, lean.InterruptNote(name), notes)
		istop = stop
		close(armed)
		<-ictx.Done() // the second Ctrl-C, or the end
		cancel()
	}()
	return ctx, armed, func() {
		cancel()
		if e.Exiting {
			return
		}
		<-armed
		istop()
	}
}

// ReadCode is code, or standard input for "-", up to what one request
// carries (wire.MaxLine): more is refused, not read to the end.
func (e *Env) ReadCode(code string) (string, error) {
	if code != "-" {
		return code, nil
	}
	return lean.ReadCode(e.IO.In)
}

// Blocking prepares a call that waits on session name's cell: a first
// Ctrl-C interrupts the cell, a second stops waiting. Call stop when done.
func (e *Env) Blocking(ctx context.Context, name string) (context.Context, *client.Client, func(), error) {
	c, err := e.Client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := InterruptOnSignal(ctx, c, name, lean.InterruptNote(name), e.Notes())
	return ctx, c, stop, nil
}

// InterruptOnSignal makes a first Ctrl-C interrupt the session's running
// cell (the reply then shows the KeyboardInterrupt), saying so with msg,
// and a second one stop waiting.
func InterruptOnSignal(ctx context.Context, c *client.Client, name, msg string, errw io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := lean.CtrlC(msg, errw, func() { c.Interrupt(context.Background(), name) }, cancel, ctx.Done())
	return ctx, func() {
		stop()
		cancel()
	}
}
