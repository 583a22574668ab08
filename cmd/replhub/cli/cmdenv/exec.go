package cmdenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/replhub/replhub/client"
)

// DefaultTimeout is how many seconds exec and wait wait when -t is not
// given.
const DefaultTimeout = 30

// Exec runs code in session name and prints the result (as JSON with
// asJSON). With stream, a terminal sees the cell's output as it is
// written. Ctrl-C interrupts the cell; a second one stops waiting.
func (e *Env) Exec(ctx context.Context, name, code string, eo client.ExecOptions, asJSON, stream bool) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	// Ctrl-C's handler takes a new thread to set up: it is made while the
	// client dials, and is in place before the cell is sent. A second
	// Ctrl-C stops the dial too (a hub being started can take seconds).
	type blocking struct {
		ctx  context.Context
		stop func()
	}
	dial, stopDial := context.WithCancel(ctx)
	defer stopDial()
	ready := make(chan blocking, 1)
	go func() {
		ctx, stop := e.interruptOnCtrlC(ctx, c, name)
		context.AfterFunc(ctx, stopDial)
		ready <- blocking{ctx, stop}
	}()
	err = c.Connect(dial)
	b := <-ready
	defer b.stop()
	if err != nil {
		return err
	}
	ctx = b.ctx
	eo.OnProgress = e.FanProgress()
	defer e.ClearFanProgress()
	streamed := e.StreamOn(&eo, stream)
	res, err := c.Exec(ctx, name, code, eo)
	if err != nil {
		return err
	}
	streamed.EndLine(res.Text() != "")
	return e.PrintResult(res, asJSON)
}

// ReadCode is code, or standard input for "-".
func (e *Env) ReadCode(code string) (string, error) {
	if code != "-" {
		return code, nil
	}
	b, err := io.ReadAll(e.IO.In)
	if err != nil {
		return "", fmt.Errorf("reading code from stdin: %w", err)
	}
	return string(b), nil
}

// Blocking prepares a call that waits on session name's cell: a first
// Ctrl-C interrupts the cell, a second stops waiting. Call stop when done.
func (e *Env) Blocking(ctx context.Context, name string) (context.Context, *client.Client, func(), error) {
	c, err := e.Client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := e.interruptOnCtrlC(ctx, c, name)
	return ctx, c, stop, nil
}

func (e *Env) interruptOnCtrlC(ctx context.Context, c *client.Client, name string) (context.Context, func()) {
	return InterruptOnSignal(ctx, c, name, fmt.Sprintf("[interrupting session '%s'; Ctrl-C again stops waiting]", name), e.IO.Err)
}

// InterruptOnSignal makes a first Ctrl-C interrupt the session's running
// cell (the reply then shows the KeyboardInterrupt), saying so with msg,
// and a second one stop waiting.
func InterruptOnSignal(ctx context.Context, c *client.Client, name, msg string, errw io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-sig:
				n++
				if n > 1 {
					cancel()
					return
				}
				fmt.Fprintln(errw, msg)
				go c.Interrupt(context.Background(), name)
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel()
	}
}
