package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Restoring a swapped session: see swap.go for the whole picture.

// startOrRestore starts s as req says, or, when its name has a swap,
// where the swapped session ran, and loads the swap; note is then the
// restore's one note for the reply. req is brought to where it started.
func (h *Hub) startOrRestore(ctx context.Context, s *Session, req *wire.Request) (note string, err error) {
	rec, err := h.readSwap(req.Name)
	if err == nil && rec != nil {
		err = rec.agrees(*req)
	}
	if err != nil {
		closeFailed(s)
		return "", &wire.Error{Code: wire.CodeStart, Message: err.Error()}
	}
	if rec == nil {
		return "", h.startSession(ctx, s, *req)
	}
	req.Host, req.Jump, req.Python, req.Pythons = rec.Host, rec.Jump, rec.Executable, nil
	if req.Host == config.Local {
		req.Host = ""
		if fi, err := os.Stat(rec.Cwd); err == nil && fi.IsDir() {
			req.Cwd = rec.Cwd
		}
	}
	op := &serveOp{sid: sids.Add(1), kind: "restore", from: "the hub", start: time.Now(),
		done: make(chan *proto.Served, 4), ended: make(chan struct{})}
	j := newJob(op.sid)
	op.ackSink = func(a *proto.Ack) {
		select {
		case j.acks <- a.Seq:
		default:
		}
	}
	s.mu.Lock()
	s.serving = op
	s.origin.Jump = rec.Jump
	h.addJobLocked(s, j)
	s.mu.Unlock()
	defer h.endJob(s, j)
	if err := h.startSession(ctx, s, *req); err != nil {
		return "", &wire.Error{Code: wire.CodeStart, Message: fmt.Sprintf(
			"session '%s' is swapped to disk, and starting it again to restore it failed: %v\nThe swap stays: try again, or %s deletes it",
			req.Name, errorMessage(err), wire.AdviceFor(req.Surface).Kill(req.Name))}
	}
	// On record while the swap loads: a hub that dies meanwhile leaves
	// the next one a worker to end (liveRecord.swapped), not one that
	// nobody knows of.
	h.recordLive(s)
	rctx, cancel := context.WithTimeout(ctx, restoreBound)
	defer cancel()
	ans, err := h.restoreInto(rctx, s, rec, op, j)
	if err == nil && !ans.OK {
		err = errors.New(ans.Error)
	}
	if err != nil {
		s.mu.Lock()
		killed := s.killed
		s.killed = true
		s.mu.Unlock()
		if killed {
			h.log.Info("session killed during its restore", "session", req.Name)
			return "", &wire.Error{Code: wire.CodeStart, Message: fmt.Sprintf(
				"session '%s' was killed on request while its swap was loaded; the swap is deleted", req.Name)}
		}
		h.log.Error("restore failed", "session", req.Name, "err", err)
		s.proc.Kill()
		j.gone = true
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
		return "", &wire.Error{Code: wire.CodeStart, Message: fmt.Sprintf(
			"session '%s' is swapped to disk, and loading its swap failed: %v\nThe swap stays: %s deletes it",
			req.Name, err, wire.AdviceFor(req.Surface).Kill(req.Name))}
	}
	kept := ""
	if len(ans.Skipped) > 0 {
		// What did not load may load elsewhere (its module installed
		// again): the pickle is kept aside, not deleted.
		if kept, err = h.keepSwap(req.Name, rec.When); err != nil {
			h.log.Error("swap not kept aside", "session", req.Name, "err", err)
			kept = ""
		}
	}
	h.removeSwap(req.Name)
	s.mu.Lock()
	s.cells, s.restored = rec.Cells, rec.Cells
	s.takeGone(rec.Gone)
	s.names = ans.Names
	s.lastActive = time.Now()
	s.mu.Unlock()
	h.endSwapOp(s, op)
	h.transcribeNote(s, fmt.Sprintf("restored from its swap of %s", rec.When.Format(time.RFC3339)), "")
	h.log.Info("session restored", "session", req.Name, "names", len(ans.Names), "skipped", len(ans.Skipped))
	return rec.note(s.snapshot(), ans, kept), nil
}

// agrees refuses a request that insists on another place than where the
// swapped session ran.
func (r *swapRecord) agrees(req wire.Request) error {
	adv := wire.AdviceFor(req.Surface)
	if req.Sudo {
		return fmt.Errorf("session '%s' is swapped to disk and ran as your user, not as root: %s %s restores it, or %s deletes the swap",
			r.Name, adv.Exec(r.Name), adv.Without("sudo"), adv.Kill(r.Name))
	}
	want := req.Host
	if want == "" {
		return nil
	}
	if want != r.Host {
		return fmt.Errorf("session '%s' is swapped to disk from %s, not %s: %s %s restores it there, or %s deletes the swap",
			r.Name, r.Host, want, adv.Exec(r.Name), adv.Without("host"), adv.Kill(r.Name))
	}
	return nil
}

// restoreInto has s's new worker load the swap: by path here, as chunks
// from a checked descriptor on a host.
func (h *Hub) restoreInto(ctx context.Context, s *Session, rec *swapRecord, op *serveOp, j *swapJob) (*proto.Restored, error) {
	pickle, _ := h.swapPaths(rec.Name)
	if rec.Host == config.Local {
		if err := s.relaySend(&proto.Restore{Sid: op.sid, Path: pickle}, ctx.Done()); err != nil {
			return nil, err
		}
		return h.awaitRestored(ctx, s, j)
	}
	f, _, err := openSwapFile(pickle)
	if err != nil {
		h.log.Error("swap refused", "session", rec.Name, "err", err)
		return nil, err
	}
	defer f.Close()
	// Every frame of a restore goes through the relay writer: a worker
	// that stops reading fails it after relayStall (or as ctx ends)
	// instead of holding the exec that restores it.
	if err := s.relaySend(&proto.Restore{Sid: op.sid}, ctx.Done()); err != nil {
		return nil, err
	}
	// The worker acknowledges with seq -1 once it can take chunks, then
	// each chunk: at most wire.Window are in flight.
	acked := int64(-2)
	waitAck := func() (*proto.Restored, error) {
		select {
		case a := <-j.acks:
			acked = max(acked, a)
			return nil, nil
		case f := <-j.restored:
			return f, nil // it failed before it took everything
		case <-s.exited:
			return nil, fmt.Errorf("the new worker died: %s", s.deathText())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	chunks := readAhead(f, stop)
	for seq := int64(0); ; seq++ {
		for acked < -1 || seq-acked > wire.Window {
			if ans, err := waitAck(); ans != nil || err != nil {
				return ans, err
			}
		}
		c := <-chunks
		var err error
		if len(c.b) > 0 {
			err = s.relaySend(&proto.Chunk{Sid: op.sid, Seq: seq, Data: c.b}, ctx.Done()) // gives c.b back
		} else {
			proto.PutChunk(c.b)
		}
		if err == nil && c.err == io.EOF {
			err = s.relaySend(&proto.Chunk{Sid: op.sid, Seq: seq + 1, EOF: true}, ctx.Done())
			if err == nil {
				break
			}
		}
		if err == nil {
			err = c.err
		}
		if err != nil {
			return nil, err
		}
	}
	return h.awaitRestored(ctx, s, j)
}

// awaitRestored waits for the restored frame.
func (h *Hub) awaitRestored(ctx context.Context, s *Session, j *swapJob) (*proto.Restored, error) {
	select {
	case f := <-j.restored:
		return f, nil
	case <-s.exited:
		return nil, fmt.Errorf("the new worker died: %s", s.deathText())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// note is the one note a restored session opens with; kept is where the
// pickle was kept aside ("": deleted).
func (r *swapRecord) note(now wire.SessionInfo, ans *proto.Restored, kept string) string {
	var b strings.Builder
	where := ""
	if r.Host != "" && r.Host != config.Local {
		where = " on " + now.Route
	}
	fmt.Fprintf(&b, "session '%s'%s was swapped to disk at %s (%s ago; %s) and is back: %d names, python %s, cwd %s",
		r.Name, where, r.When.Local().Format("2006-01-02 15:04:05"), wire.Duration(time.Since(r.When).Seconds()),
		r.Why, len(ans.Names), now.Python, now.Cwd)
	list := func(title string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(&b, "\n%s: %s", title, strings.Join(items, "; "))
		}
	}
	skips := func(ks []proto.SwapSkip) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Name+" ("+k.Why+")")
		}
		return out
	}
	list("not swapped (it did not pickle)", skips(r.Skipped))
	list("not restored (it did not load)", skips(ans.Skipped))
	if kept != "" {
		fmt.Fprintf(&b, "\nthe swap is kept in %s", kept)
	}
	list("threads that were running then (they are not now)", r.Threads)
	list("child processes that were running then (ended)", r.Children)
	if ans.Note != "" {
		b.WriteString("\n" + ans.Note)
	}
	for _, n := range r.Notes {
		b.WriteString("\n" + n)
	}
	if out := strings.TrimRight(r.Output, "\n"); out != "" {
		b.WriteString("\noutput nobody had read:\n    " + strings.ReplaceAll(out, "\n", "\n    "))
	}
	for _, res := range append(append([]*wire.Result(nil), r.Kept...), r.Result) {
		if res == nil {
			continue
		}
		fmt.Fprintf(&b, "\ncell %d's reply, which nobody had read:\n    %s", res.Cell,
			strings.ReplaceAll(strings.TrimRight(res.Text(), "\n"), "\n", "\n    "))
	}
	return b.String()
}
