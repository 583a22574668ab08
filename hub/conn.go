package hub

import (
	"context"
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/internal/rawio"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// bigRequest is the cell size past which the hub returns the memory it
// took to the system once the request is answered.
const bigRequest = 4 << 20

// readAheadAfter is how long a request that does not read the ones after
// it (see needsNext) is answered before another reader starts.
const readAheadAfter = 2 * time.Millisecond

// serveConn checks the peer and then answers its requests in order. A
// stranger gets one refusal line and nothing of it is read.
//
// A connection is read while a request is answered, so that the request
// sees its client go away (its context is cancelled) and can take the
// requests that follow it (next). The goroutine that reads a request
// answers it itself when none is being answered: a request is never
// handed from a reader to an answerer, a wake-up that cost every call the
// scheduler's latency. Another reads on while it answers; for an answer
// that may be quick (most), that one starts only after readAheadAfter,
// and a quick answer's reader simply reads on: a goroutine and another
// thread's wake-up fewer for each warm cell. The turn to answer passes
// between readers through conn.turn; the readers put off start from one
// timer (aheads).
func (h *Hub) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	if err := safesock.CheckPeer(c); err != nil {
		h.log.Warn("refused a connection", "err", err)
		wire.Write(c, wire.Reply{V: wire.Version, Err: &wire.Error{Code: "refused",
			Message: "hub: refused: " + err.Error() + "; a hub serves only its own user"}})
		return
	}
	var rw net.Conn = c
	if !h.plainStreams {
		rw = rawio.Unix(c) // raw calls where c refuses descriptors (safesock.Listen)
	}
	k := &conn{h: h, c: c, rw: rw, r: wire.NewReader(rw), reqs: make(chan incoming), gone: make(chan struct{}), turn: make(chan struct{}, 1)}
	k.cctx, k.ccancel = context.WithCancelCause(ctx)
	defer k.ccancel(nil)
	k.turn <- struct{}{}
	k.readers.Add(1)
	go k.read(ctx)
	select {
	case <-k.gone:
	case <-ctx.Done():
	}
	// Once no request is being answered, nothing more will be: the
	// close ends the reader.
	<-k.turn
	c.Close()
	k.readers.Wait()
}

// errClientGone is the cause of a request's context ending because its
// client closed the connection (rather than the hub stopping).
var errClientGone = errors.New("the client went away")

// clientGone reports whether ctx, a request's, ended because its client
// went away.
func clientGone(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errClientGone) }

// conn is one client connection being served.
type conn struct {
	h  *Hub
	c  *net.UnixConn
	rw net.Conn // c, or c read and written with raw calls
	r  *wire.Reader
	// reqs hands a request that came while another was answered to its
	// next; gone is closed, and cctx cancelled, when the client went away.
	reqs    chan incoming
	gone    chan struct{}
	cctx    context.Context
	ccancel context.CancelCauseFunc
	// turn holds a token while no request is being answered.
	turn chan struct{}
	// over is set when an answer could not be sent: nothing more is read.
	over    atomic.Bool
	readers sync.WaitGroup
	wmu     sync.Mutex // one reply line at a time
}

// incoming is a request read, or what was wrong with a bad one.
type incoming struct {
	req *wire.Request
	bad *wire.RequestError
}

// read reads requests until the connection ends; the first that comes
// while none is being answered, it answers itself, with another reader
// going on meanwhile (or, for a quick answer, this one after it).
func (k *conn) read(ctx context.Context) {
	defer k.readers.Done()
	k.h.readers.Add(1)
	for {
		req, err := k.r.ReadRequest()
		var bad *wire.RequestError
		if err != nil && !errors.As(err, &bad) {
			k.ccancel(errClientGone)
			close(k.gone)
			return
		}
		in := incoming{req, bad}
		select {
		case <-k.turn:
			if k.over.Load() {
				k.turn <- struct{}{}
				if req != nil {
					sudo.Zero(req.Password)
				}
				continue // read on, to the end the close brings
			}
			k.readers.Add(1)
			var ahead *ahead
			if in.req != nil && !needsNext(in.req) {
				after := k.h.readAhead
				if after == 0 {
					after = readAheadAfter
				}
				ahead = k.h.aheads.add(after, func() { k.read(ctx) })
			} else {
				go k.read(ctx)
			}
			ok := k.answer(in)
			alone := ahead != nil && k.h.aheads.stop(ahead)
			if alone {
				k.readers.Done() // for the reader that never started
			}
			if !ok {
				k.over.Store(true)
				k.c.Close()
			}
			k.turn <- struct{}{}
			if !alone {
				return
			}
		case k.reqs <- in:
		case <-ctx.Done():
			if req != nil {
				sudo.Zero(req.Password)
			}
			return
		}
	}
}

// needsNext says whether answering req reads the requests that follow it
// (attach's input, a transfer's chunks): those need a reader from the
// start.
func needsNext(req *wire.Request) bool {
	return req.Op == wire.OpAttach || req.Op == wire.OpPush || req.Op == wire.OpPull
}

// send writes one reply line.
func (k *conn) send(r wire.Reply) error {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	r.V = wire.Version
	return wire.Write(k.rw, r)
}

// answer answers one request; false means the connection is over.
func (k *conn) answer(in incoming) bool {
	h := k.h
	if in.bad != nil {
		return k.send(errReply(wire.CodeBadRequest, "hub: bad request: %s", in.bad.Reason)) == nil
	}
	rctx, cancel := context.WithCancel(k.cctx)
	next := func() (*wire.Request, bool) {
		select {
		case m := <-k.reqs:
			if m.bad != nil {
				return &wire.Request{}, true
			}
			// Only a request's first line may need a password.
			sudo.Zero(m.req.Password)
			m.req.Password = nil
			return m.req, true
		case <-k.gone:
			return nil, false
		case <-rctx.Done():
			return nil, false
		}
	}
	h.served.Add(1)
	reply := h.handle(rctx, *in.req, k.send, next)
	sudo.Zero(in.req.Password)
	cancel()
	big := len(in.req.Code) > bigRequest
	in.req = nil
	if reply.IsZero() {
		// A transfer whose client went away: nothing to answer.
		return false
	}
	if k.send(reply) != nil {
		return false
	}
	if big {
		// A big cell's copies (the line, its decoding, the frame) are
		// garbage now: give them back, or the hub would hold hundreds of
		// megabytes until its next collection.
		reply = wire.Reply{}
		debug.FreeOSMemory()
	}
	return true
}
