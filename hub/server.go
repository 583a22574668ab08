package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/replhub/replhub/wire"
)

// Run serves ln until ctx ends or a client sends stop, then ends every
// session (recording a death note for each: the hub stopped under it),
// waits a bounded time for open requests, and returns nil.
func (h *Hub) Run(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.stop:
		}
		cancel()
		ln.Close()
	}()
	go h.watchFrames(ctx)
	go h.swapLoop(ctx)
	go h.trimLoop(ctx)
	h.log.Info("hub serving", "socket", h.paths.Socket(), "pid", os.Getpid(), "supervisor", h.supervisor, "version", h.version)
	var err error
	for {
		c, aerr := ln.AcceptUnix()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("hub: accept: %w", aerr)
			}
			break
		}
		h.conns.Add(1)
		go func() {
			defer h.conns.Done()
			h.serveConn(ctx, c)
		}()
	}
	h.shutdown()
	done := make(chan struct{})
	go func() { h.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		h.log.Warn("requests still open at shutdown")
	}
	h.log.Info("hub stopped")
	return err
}

// shutdown ends every session; each gets a death note saying the hub
// stopped. A hub restarting on request (restart) ends only the sessions
// that are not durable, and leaves the others to the next hub.
func (h *Hub) shutdown() {
	h.flushBehind()
	defer h.flushBehind() // cells that began as it went on
	var all []*Session
	why := "the hub stopped"
	if h.restarting.Load() {
		all = h.handOver()
		why = "the hub restarted, and sessions on other hosts do not outlive it yet"
		h.swapAtStop(all, "the hub restarted") // those that cannot outlive it
	} else {
		h.swapAllAtStop()
		h.mu.Lock()
		h.closing = true
		for _, s := range h.sessions {
			all = append(all, s)
		}
		h.mu.Unlock()
	}
	for _, s := range all {
		<-s.ready
		s.mu.Lock()
		if s.death == "" {
			s.death = why
		}
		s.mu.Unlock()
		if s.proc != nil {
			s.proc.Kill()
		}
	}
	for _, s := range all {
		select {
		case <-s.exited:
		case <-time.After(3 * time.Second):
		}
	}
	h.pool.Close()
}

// resultReply answers req with res: as the text the command line prints
// (Plain, or the JSON it prints for JSON) and exit, for package early's
// call, when printing res takes nothing more; else res whole.
func resultReply(req wire.Request, res *wire.Result, exit int) wire.Reply {
	var p *wire.Plain
	if req.Plain {
		p = res.Plain()
	} else if req.JSON {
		p = res.PlainJSON()
	}
	if p == nil {
		return wire.Reply{Result: res}
	}
	p.Exit = exit
	return wire.Reply{Plain: p}
}

// messageReply answers with msg: as the line the command line prints when
// the request asks for plain text (package early's call), else as a
// message.
func messageReply(req wire.Request, msg string) wire.Reply {
	if req.Plain {
		return wire.Reply{Plain: &wire.Plain{Text: msg + "\n"}}
	}
	return wire.Reply{Message: msg}
}

// handle answers one request.
func (h *Hub) handle(ctx context.Context, req wire.Request, send func(wire.Reply) error, next func() (*wire.Request, bool)) wire.Reply {
	if req.V != wire.Version {
		return errReply(wire.CodeVersion, "hub: this hub speaks protocol %d, the client %d: run `replhub stop` and try again (sessions end)", wire.Version, req.V)
	}
	var progress func(*wire.Progress)
	if req.Progress {
		progress = func(p *wire.Progress) { send(wire.Reply{Progress: p}) }
	}
	switch req.Op {
	case wire.OpPing:
		return wire.Reply{Message: "pong"}
	case wire.OpAttach:
		return h.attach(ctx, req, send, next)
	case wire.OpExec:
		if req.Stream {
			return h.execStreaming(ctx, req, progress, send)
		}
		res, err := h.Exec(ctx, req, progress)
		if err != nil {
			return replyErr(err)
		}
		return resultReply(req, res, res.ExitCode())
	case wire.OpWait:
		wait := h.Wait
		if hosts := h.groupOf(req.Name); hosts != nil {
			wait = func(ctx context.Context, req wire.Request, progress func(*wire.Progress)) (*wire.Result, error) {
				return h.fanWait(ctx, req, hosts, progress)
			}
		}
		res, err := wait(ctx, req, progress)
		if err != nil {
			return replyErr(err)
		}
		return resultReply(req, res, res.WaitExitCode())
	case wire.OpInterrupt:
		interrupt := h.Interrupt
		if hosts := h.groupOf(req.Name); hosts != nil {
			interrupt = func(req wire.Request) (string, error) { return h.fanInterrupt(req, hosts) }
		}
		msg, err := interrupt(req)
		if err != nil {
			return replyErr(err)
		}
		return messageReply(req, msg)
	case wire.OpKill:
		kill := h.Kill
		if hosts := h.groupOf(req.Name); hosts != nil {
			kill = func(name string) (string, error) { return h.fanKill(name, hosts) }
		}
		msg, err := kill(req.Name)
		if err != nil {
			return replyErr(err)
		}
		return messageReply(req, msg)
	case wire.OpSessions:
		if req.Brief {
			return wire.Reply{Sessions: h.list(true)}
		}
		l := h.List()
		if req.Plain || req.JSON {
			// Package early's call: the text, or the JSON, it prints.
			if p := l.Plain(req.Name, req.JSON); p != nil {
				return wire.Reply{Plain: p}
			}
		}
		return wire.Reply{Sessions: l}
	case wire.OpPush, wire.OpPull:
		return h.clientTransfer(req, next, send)
	case wire.OpSwap:
		return h.handleSwap(ctx, req)
	case wire.OpVars, wire.OpInspect, wire.OpComplete, wire.OpReset, wire.OpCheck:
		return h.handleQuery(ctx, req)
	case wire.OpStop:
		h.once.Do(func() { close(h.stop) })
		return wire.Reply{Message: h.stopMessage()}
	case wire.OpRestart:
		h.restarting.Store(true)
		h.once.Do(func() { close(h.stop) })
		return wire.Reply{Message: "hub restarting; its local sessions go on"}
	}
	return errReply(wire.CodeBadRequest, "hub: unknown op %q", req.Op)
}

func errReply(code, format string, args ...any) wire.Reply {
	return wire.Reply{Err: &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func replyErr(err error) wire.Reply {
	var we *wire.Error
	if errors.As(err, &we) {
		return wire.Reply{Err: we}
	}
	return errReply(wire.CodeInternal, "%v", err)
}

// timeoutOf is a request's timeout: the default for none (0, less, NaN),
// at most MaxTimeout.
func timeoutOf(sec float64) time.Duration {
	if !(sec > 0) {
		return DefaultTimeout
	}
	// Bounded in seconds, before the conversion: past what a Duration
	// holds, its result is the platform's (on amd64 the most negative).
	if sec >= MaxTimeout.Seconds() {
		return MaxTimeout
	}
	return time.Duration(sec * float64(time.Second))
}

// checkMaxOutput refuses a per-call output cap out of range.
func checkMaxOutput(n int) error {
	if n < 0 || n > MaxReplyCap {
		return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("max output must be between 1 and %d characters (0: the default, %d)", MaxReplyCap, ReplyCap)}
	}
	return nil
}
