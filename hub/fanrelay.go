package hub

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// A group from code in a session: sessions_on(hosts, name) opens the
// session NAME@HOST on each host (a req "open" with Hosts), and the
// group's put, get and call go to all of them in one request (Targets).
// The hub runs each session's part concurrently, checks reach for each
// as for a request of its own, and answers with one FanItem per session;
// the blobs of their values follow one another in the reply's Data.

// fanLinkID is the link under which a fan request's i-th part waits
// (Session.link): negative, so that it never meets a request's own id,
// and derived from the request's id, so that a cancel finds every part.
func fanLinkID(id int64, i int) int64 { return -(id<<12 | int64(i)) - 1 }

// fanLinkOf reports the request id whose part a link id is.
func fanLinkOf(link int64) (id int64, ok bool) {
	if link >= 0 {
		return 0, false
	}
	return (-link - 1) >> 12, true
}

// serveFan answers a req frame with Targets or Hosts.
func (h *Hub) serveFan(cancelled context.Context, from *Session, f *proto.Req) {
	reply := &proto.Reply{ID: f.ID}
	switch {
	case f.Kind == "open" && len(f.Hosts) > 0 && len(f.Targets) == 0:
		h.fanOpen(from, f, reply)
	case (f.Kind == "put" || f.Kind == "get" || f.Kind == "call") && len(f.Targets) > 0 && len(f.Hosts) == 0:
		h.fanServe(cancelled, from, f, reply)
		// The members' answers together, as a single get's answer.
		hold, err := h.holdAnswer(from, f.Kind, reply.Data)
		if err != nil {
			*reply = proto.Reply{ID: f.ID, Error: err.Error()}
			break
		}
		defer hold.release()
	default:
		reply.Error = fmt.Sprintf("a %s request takes no list of hosts or targets", f.Kind)
	}
	if err := from.send(reply); err != nil {
		h.log.Warn("reply not delivered", "session", from.name, "err", err)
	}
}

// fanOpen opens (or attaches to) session f.Name@HOST on every host of
// f.Hosts that from may reach, at most config.json's "fanout" starting at
// once, and remembers the group when from may define it (see
// groupRecord). Reach is checked for every host before anything opens.
func (h *Hub) fanOpen(from *Session, f *proto.Req, reply *proto.Reply) {
	if err := checkName(f.Name); err != nil || strings.Contains(f.Name, "@") {
		reply.Error = fmt.Sprintf("bad group name %q: use letters, digits and ._- (at most 64)", f.Name)
		return
	}
	cfg, err := config.Load(h.paths.ConfigFile())
	if err != nil {
		reply.Error = err.Error()
		return
	}
	hosts, err := expandHosts(strings.Join(f.Hosts, ","), cfg)
	if err != nil {
		reply.Error = errorMessage(err)
		return
	}
	member := func(i int) proto.Req {
		sub := *f
		sub.Name, sub.Host, sub.Hosts = memberName(f.Name, hosts[i]), hosts[i], nil
		return sub
	}
	refused := make([]error, len(hosts))
	parallel(len(hosts), func(i int) {
		sub := member(i)
		refused[i] = h.checkReach(from, &sub)
	})
	reachedAll := true
	for _, err := range refused {
		reachedAll = reachedAll && err == nil
	}
	found := h.groupOf(f.Name)
	h.mu.Lock()
	if reachedAll && h.sessionMayDefineLocked(from, f.Name, hosts, found) {
		if err := h.rememberGroupLocked(f.Name, hosts, from.name); err != nil {
			h.mu.Unlock()
			reply.Error = errorMessage(err)
			return
		}
	}
	h.mu.Unlock()
	ctx := withDialSlots(withConfig(context.Background(), cfg), cfg.FanoutOr(0))
	reply.Fan = make([]proto.FanItem, len(hosts))
	parallel(len(hosts), func(i int) {
		sub := member(i)
		item := proto.FanItem{Host: hosts[i], Target: sub.Name}
		defer func() { reply.Fan[i] = item }()
		if err := refused[i]; err != nil {
			item.Error = err.Error()
			return
		}
		info, _, err := h.open(ctx, from, &sub)
		if err != nil {
			item.Error = errorMessage(err)
			return
		}
		item.OK, item.Info = true, info
	})
	reply.OK = true
}

// fanStreams bounds the parts of one group request that stream their
// objects at once. The hub forwards each part's chunks as they come
// (streamObject), holding at most one chunk of each part and one of the
// caller's, so that a group's put, get or call costs it at most
// (fanStreams+1) × wire.ChunkSize, however large its objects and however
// many sessions it has.
const fanStreams = 8

// fanServe has every session of f.Targets serve f's put, get or call.
//
// With Bufs or Oob, its objects stream: each session's part is a single
// session's streamed transfer (relayServe) under the part's own id
// (fanLinkID), with the caller's chunks and acks, the target's first
// answer and the part's last word (a reply without First) all under that
// id; the reply to f then only gathers the parts' outcomes. A part that
// fails ends alone; at most fanStreams of them run at once.
func (h *Hub) fanServe(cancelled context.Context, from *Session, f *proto.Req, reply *proto.Reply) {
	if len(f.Targets) > maxHosts {
		reply.Error = fmt.Sprintf("at most %d sessions in one request", maxHosts)
		return
	}
	streamed := len(f.Bufs) > 0 || f.Oob
	slots := make(chan struct{}, fanStreams)
	reply.Fan = make([]proto.FanItem, len(f.Targets))
	blobs := make([][]byte, len(f.Targets))
	budget := newBlobBudget(from.maxBlob())
	parallel(len(f.Targets), func(i int) {
		sub := *f
		sub.Target, sub.Targets, sub.ID = f.Targets[i], nil, fanLinkID(f.ID, i)
		item := proto.FanItem{Target: sub.Target}
		if _, host, ok := strings.Cut(sub.Target, "@"); ok {
			item.Host = host
		}
		defer func() {
			reply.Fan[i] = item
			if streamed {
				from.send(&proto.Reply{ID: sub.ID, OK: item.OK, Error: item.Error})
			}
		}()
		if err := h.checkReach(from, &sub); err != nil {
			item.Error = err.Error()
			return
		}
		if streamed {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-cancelled.Done():
			}
			if cancelled.Err() != nil {
				item.Error = fmt.Sprintf("the %s was cancelled before it reached '%s'", f.Kind, sub.Target)
				return
			}
		}
		served, err := h.relayServe(cancelled, from, &sub)
		if err != nil {
			item.Error = errorMessage(err)
			return
		}
		if n := int64(len(served.Data)); !budget.take(n) {
			item.Error = fmt.Sprintf("the %s from '%s' is too large for the group's reply: %s, while its values together may be at most %s (max_object_mb in config.json)",
				f.Kind, sub.Target, wire.MBUp(n), wire.MBUp(budget.max))
			return
		}
		item.OK, item.Py, item.Kept, item.Error = served.OK, served.Py, served.Kept, served.Error
		if !served.OK && served.Error == "" {
			item.Error = "refused"
		}
		blobs[i] = served.Data
		item.Len = int64(len(served.Data))
	})
	reply.OK = true
	reply.Data = make([]byte, 0, budget.max-budget.left)
	for _, b := range blobs {
		reply.Data = append(reply.Data, b...)
	}
}

// blobBudget bounds what the blobs of one group reply add up to, as the
// asking session's maxBlob bounds one: each item's blob is taken while it
// fits in what is left, so that the hub holds at most that much for the
// reply however many sessions answer.
type blobBudget struct {
	mu   sync.Mutex
	max  int64
	left int64
}

func newBlobBudget(max int64) *blobBudget { return &blobBudget{max: max, left: max} }

// take counts n bytes against the budget, or says they do not fit.
func (b *blobBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// parallel runs do(0) … do(n-1) at once and waits for them all.
func parallel(n int, do func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(i)
		}()
	}
	wg.Wait()
}
