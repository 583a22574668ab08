package hub

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// heldFloor is the least the hub holds at once of the objects that
// sessions' requests bring (a put's or a call's pickle) on their way to
// their targets; the bound is twice the largest object a session may send
// where that is more. Past it a request is refused: each session may have
// maxRequests in flight, and a target that reads slowly (stopped, or in
// C code) holds each object until its serve frame is written. The
// sessions of remote hosts hold at most half the bound between them, the
// other half kept for this machine's: a host whose sessions send objects
// to sessions of its own that read nothing (or two such hosts) would
// otherwise take all of it, and every local session's put, call and get
// with it, for as long as those live.
var heldFloor int64 = 2 * proto.DefaultMaxBlob

// objectHold counts one request's object in the hub's held bytes until
// each holder has let it go (refs): the request, until its object is
// handed to its serve frame (a group's, until its request ends), and each
// serve frame of it until written or dropped.
type objectHold struct {
	h    *Hub
	n    int64
	host string     // the remote host whose session brought it; "" for local
	req  *proto.Req // the request whose object it is; nil for an answer
	refs atomic.Int32
	let  atomic.Bool // the request's ref is let go
}

// holdObject counts n bytes of an object of from's (kind: a put's, a
// call's, or an answer's to one) as held and returns their hold (one ref,
// the request's), or an error that says why they would pass the bound.
func (h *Hub) holdObject(from *Session, kind string, n int64) (*objectHold, error) {
	bound := max(heldFloor, 2*from.maxBlob())
	host := from.host()
	if host == config.Local {
		host = ""
	}
	if host != "" {
		// The host's count is taken first and given back if the hub's
		// bound refuses: under heldMu, so that two requests of one host
		// never both pass its share.
		h.heldMu.Lock()
		defer h.heldMu.Unlock()
		var hosts int64
		for _, b := range h.heldBy {
			hosts += b
		}
		if hosts+n > bound/2 {
			ours := "none"
			if b := h.heldBy[host]; b > 0 {
				ours = wire.MB(b)
			}
			return nil, fmt.Errorf("sessions on other hosts hold %s of objects on their way to sessions that have not taken them yet (slow, or stopped?), %s of them on %s, and this %s's %s would pass the %s the hosts may hold at once (the rest is kept for this machine's sessions): try again once they have gone",
				wire.MB(hosts), ours, host, kind, wire.MBUp(n), wire.MB(bound/2))
		}
	}
	// Counted only if it fits: a request refused here never makes one
	// beside it, which fits, see more held than there is.
	for {
		now := h.held.Load()
		if now+n > bound {
			return nil, fmt.Errorf("the hub holds %s of objects on their way to sessions that have not taken them yet (slow, or stopped?), and this %s's %s would pass the %s it holds at once: try again once they have gone",
				wire.MB(now), kind, wire.MBUp(n), wire.MB(bound))
		}
		if h.held.CompareAndSwap(now, now+n) {
			break
		}
	}
	if host != "" {
		if h.heldBy == nil {
			h.heldBy = map[string]int64{}
		}
		h.heldBy[host] += n
	}
	o := &objectHold{h: h, n: n, host: host}
	o.refs.Store(1)
	return o, nil
}

// holdAnswer counts data, an answer to from's get or call (kind) that
// waits in the hub until from reads it, toward the same bound as the
// objects going out; nil for no data. Its release lets it go once the
// answer is written.
func (h *Hub) holdAnswer(from *Session, kind string, data []byte) (*objectHold, error) {
	if len(data) == 0 {
		return nil, nil
	}
	return h.holdObject(from, kind, int64(len(data)))
}

// retain adds a holder.
func (o *objectHold) retain() {
	if o != nil {
		o.refs.Add(1)
	}
}

// letRequest lets the request's ref go, once: when its object is its
// serve frame's alone, and when the request ends.
func (o *objectHold) letRequest() {
	if o != nil && o.let.CompareAndSwap(false, true) {
		o.release()
	}
}

// release lets one holder go; the last gives the bytes back.
func (o *objectHold) release() {
	if o != nil && o.refs.Add(-1) == 0 {
		o.h.held.Add(-o.n)
		if o.host != "" {
			o.h.heldMu.Lock()
			if o.h.heldBy[o.host] -= o.n; o.h.heldBy[o.host] <= 0 {
				delete(o.h.heldBy, o.host)
			}
			o.h.heldMu.Unlock()
		}
	}
}

type holdKey struct{}

// withHold is ctx carrying a request's hold.
func withHold(ctx context.Context, o *objectHold) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, holdKey{}, o)
}

// holdOf is the hold ctx carries: nil for none.
func holdOf(ctx context.Context) *objectHold {
	o, _ := ctx.Value(holdKey{}).(*objectHold)
	return o
}
