package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
)

// Reattaching a lingering worker after its link dropped, and telling one
// whose session was killed meanwhile to exit (linger.go has the rest of
// linkProc).

// relink reconnects until the worker's linger is over; it returns the
// worker's ready frame, the new link in place.
func (p *linkProc) relink(downAt time.Time) (*proto.Ready, error) {
	deadline := downAt.Add(p.linger + lingerGrace)
	var last error
	var tries reattachTries
	for {
		d := tries.wait()
		if wait := time.Until(deadline); d > wait {
			d = wait
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.kick:
			t.Stop()
		case <-p.ctx.Done():
			t.Stop()
		}
		p.mu.Lock()
		killed := p.killed
		p.mu.Unlock()
		if killed {
			go p.endWhenBack(deadline)
			return nil, fmt.Errorf("killed while the link to %s was down (since %s): the worker there is told to end once the link is back, or ends when its linger of %s is over",
				p.host, downAt.Format("15:04:05"), p.linger)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the link to %s dropped at %s and did not come back within the linger of %s, after which the worker there ends (last try: %v)",
				p.host, downAt.Format("15:04:05"), p.linger, last)
		}
		ready, err := p.tryRelink()
		if err == nil {
			return ready, nil
		}
		last = err
		p.logf("reattach failed", "host", p.host, "try", tries.n+1, "err", err)
		if !tries.final(err) {
			continue
		}
		switch {
		case errors.Is(err, errHubStopping):
			return nil, err
		case errors.Is(err, remote.ErrNoSocket):
			return nil, fmt.Errorf("the link to %s dropped at %s and, when it came back, the worker there was gone (its socket is)", p.host, downAt.Format("15:04:05"))
		default:
			return nil, fmt.Errorf("the link to %s dropped at %s and the session cannot be reattached: %w", p.host, downAt.Format("15:04:05"), err)
		}
	}
}

// reattachTries paces the tries of a reattach, and of telling a killed
// session's worker to end (endWhenBack), and says which error ends them.
type reattachTries struct {
	n    int // tries made
	gone int // tries in a row that found the socket served by nobody
}

// wait is the pause before the next try: relinkDelays, or 500 ms after
// a try that found no socket (it may be moving: its folder went).
func (t *reattachTries) wait() time.Duration {
	if t.gone > 0 {
		return 500 * time.Millisecond
	}
	return relinkDelays[min(t.n, len(relinkDelays)-1)]
}

// final counts a failed try and says whether err ends the tries: the hub
// stopping, the host's key or the server's forwarding refused, or the
// third try in a row that found no socket (the worker is gone).
func (t *reattachTries) final(err error) bool {
	t.n++
	var hk *remote.HostKeyError
	switch {
	case errors.Is(err, errHubStopping), errors.As(err, &hk), errors.Is(err, remote.ErrForwardingRefused):
		return true
	case errors.Is(err, remote.ErrNoSocket):
		t.gone++
		return t.gone >= 3
	}
	t.gone = 0
	return false
}

// endWhenBack tells the worker of a session killed while its link was
// down to exit once the link is back, trying as a reattach does until the
// worker's linger is over (deadline) or the hub stops: a kill must not
// leave the session's state running on its host for the linger.
func (p *linkProc) endWhenBack(deadline time.Time) {
	var tries reattachTries
	for {
		d := tries.wait()
		if time.Now().Add(d).After(deadline) {
			p.logf("killed session's worker not reached; it ends with its linger", "host", p.host)
			return
		}
		time.Sleep(d)
		err := p.tellExit()
		if err == nil {
			p.logf("killed session's worker told to end", "host", p.host)
			return
		}
		if tries.final(err) {
			p.logf("killed session's worker not told to end", "host", p.host, "err", err)
			return
		}
	}
}

// tellExit makes one try at telling the worker to exit: reach, exit.
func (p *linkProc) tellExit() error {
	conn, sc, _, err := p.reach(context.Background(), false)
	if err != nil {
		return err
	}
	defer conn.Release()
	defer sc.Close()
	return proto.NewWriter(sc).Write(&proto.Exit{})
}

// reach connects to the worker's socket as a new hub, in one try: a
// connection on the route (within 30 s of ctx), the socket (at its
// fallback folder where the first is gone, which is then the socket),
// adopt (offering a cell link with cells) and its ready frame. The caller
// releases conn and closes sc.
func (p *linkProc) reach(ctx context.Context, cells bool) (conn *remote.Conn, sc net.Conn, ready *proto.Ready, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if conn, err = p.redial(ctx); err != nil {
		return nil, nil, nil, err
	}
	p.mu.Lock()
	sock, alt := p.sock, p.sockAlt
	p.mu.Unlock()
	sc, err = conn.DialSocket(sock)
	if errors.Is(err, remote.ErrNoSocket) && alt != "" {
		if sc, err = conn.DialSocket(alt); err == nil {
			p.mu.Lock()
			p.sock, p.sockAlt = alt, ""
			p.mu.Unlock()
		}
	}
	if err != nil {
		conn.Release()
		return nil, nil, nil, err
	}
	if ready, err = handshake(sc, cells); err != nil {
		sc.Close()
		conn.Release()
		return nil, nil, nil, err
	}
	return conn, sc, ready, nil
}

// tryRelink makes one try (reach), and makes what it reached the link.
func (p *linkProc) tryRelink() (*proto.Ready, error) {
	conn, sc, ready, err := p.reach(p.ctx, true)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	old := p.conn
	p.conn, p.sc, p.w, p.r = conn, sc, sc, sc
	p.linkEnd, p.endOnce = make(chan struct{}), new(sync.Once)
	p.mu.Unlock()
	if old != nil {
		old.Release()
	}
	return ready, nil
}

// handshake sends adopt on a worker's socket and reads its ready frame,
// byte by byte so that nothing after it is taken (the frames that waited
// for a hub follow at once), within adoptWait.
func handshake(sc net.Conn, cells bool) (ready *proto.Ready, err error) {
	err = withinAdoptWait(sc, "ready frame", func() error {
		if err := proto.NewWriter(sc).Write(&proto.Adopt{Cells: cells}); err != nil {
			return err
		}
		m, err := readFirstFrame(sc)
		if err != nil {
			return fmt.Errorf("no ready frame: %w", err)
		}
		var ok bool
		if ready, ok = m.(*proto.Ready); !ok || !ready.Adopted || ready.Proto != proto.Version {
			return fmt.Errorf("the worker answered %s, not ready (protocol %d)", m.Op(), proto.Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ready, nil
}

// withinAdoptWait runs a handshake f on c, closing c once adoptWait is
// over (a channel through ssh has no deadlines); an answer that came as
// the time ran out is a timeout too, for c is closed, or about to be.
func withinAdoptWait(c net.Conn, what string, f func() error) error {
	timer := time.AfterFunc(adoptWait, func() { c.Close() })
	err := f()
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("no %s within %s", what, adoptWait)
	}
	return err
}

// readFirstFrame reads a worker's first frame on a connection to its
// socket a byte at a time, so that nothing after it is taken from the
// connection.
func readFirstFrame(sc net.Conn) (proto.Msg, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 1<<16 && (len(line) == 0 || line[len(line)-1] != '\n') {
		if _, err := io.ReadFull(sc, b); err != nil {
			return nil, err
		}
		line = append(line, b[0])
	}
	return proto.NewReader(bytes.NewReader(line)).Read()
}
