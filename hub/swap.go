package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/wire"
)

// Swap: a session nobody has used for swap_after_hours goes to disk, and
// the next exec or session() under its name brings it back.
//
// A swap asks the worker to pickle its namespace (boot/replhub_toolkit/swap.py): locally
// into SwapDir/~NAME.pickle.part-SID, which the worker creates; a remote
// worker sends the bytes as chunk frames, which the hub writes there. Once
// the worker says it is done, the hub checks the file (a regular file of
// ours, 0600, of the size the worker reported), renames it NAME.pickle,
// writes NAME.json (a swapRecord: where and how the session ran, what did
// not pickle, the output and result nobody had read) and ends the worker.
// Until then the session goes on as it was: a failed swap costs nothing.
//
// A restore starts a worker where the session ran (host, jumps, Python,
// cwd), has it load the file (locally by path, remotely as chunks the hub
// streams from a descriptor it checked), deletes the swap and shows one
// note. Loading a pickle runs code, so a swap is loaded only while its
// files are regular files of ours with no group or other bits in a folder
// of ours with mode 0700; anything else is refused and logged, and stays
// on disk for `replhub kill NAME` to delete.
//
// Never swapped: root sessions, a session running a cell or serving
// another, and (except at a stop) one with a background job: a thread of
// the user's that is not a daemon, or a child process of the worker. The
// sweep tries those again at its next round.
//
// A swap or restore under way marks its session busy (Session.serving),
// and an exec or a relay on that session waits for it (waitSwapOf).

// swapEvery is how often the sweep runs; REPLHUB_SWAP_EVERY (a Go duration,
// for tests) overrides it.
const swapEvery = 10 * time.Minute

// stopSwapBudget bounds the swaps of a graceful stop; swapsAtOnce is how
// many run together.
const (
	stopSwapBudget = 90 * time.Second
	swapsAtOnce    = 4
	// cancelWait is how long a cancelled swap waits for the worker's answer.
	cancelWait = time.Second
	// swapBound bounds a swap: a worker that never answers (its main
	// thread starved by code holding the interpreter) is left running.
	swapBound = 10 * time.Minute
	// restoreBound bounds a restore after its worker has started.
	restoreBound = 30 * time.Minute
	// staleAfter is when a leftover part file (a hub died mid-swap) goes.
	staleAfter = time.Hour
	// maxRecord bounds a NAME.json read back.
	maxRecord = 64 << 20
)

// partPrefix starts the name of a swap being written: no session name can
// start with it (checkName), so a part file is never taken for a swap, nor
// a swap for a part file (a name may start with a dot).
const partPrefix = "~"

// swapRecord is NAME.json.
type swapRecord struct {
	Name  string    `json:"name"`
	When  time.Time `json:"when"`
	Why   string    `json:"why"` // "nobody used it for 24h", "the hub stopped", "on request"
	Host  string    `json:"host"`
	Route string    `json:"route,omitempty"`
	// Jump is the jump list the session was created with (nil: those of
	// ssh_config and config.json).
	Jump       *[]string        `json:"jump,omitempty"`
	Python     string           `json:"python"`
	Executable string           `json:"executable"`
	Cwd        string           `json:"cwd"`
	Cells      int              `json:"cells"`
	Bytes      int64            `json:"bytes"`
	Names      []string         `json:"names"`
	Skipped    []proto.SwapSkip `json:"skipped,omitempty"`
	Threads    []string         `json:"threads,omitempty"`
	Children   []string         `json:"children,omitempty"`
	// Output, Notes and Result are what nobody had read.
	Output string       `json:"output,omitempty"`
	Notes  []string     `json:"notes,omitempty"`
	Result *wire.Result `json:"result,omitempty"`
	// Kept are the results of earlier cells nobody had read, Gone why
	// some cells' results will not come (queue.go).
	Kept []*wire.Result `json:"kept,omitempty"`
	Gone map[int]string `json:"gone,omitempty"`
}

// maxCells bounds a cell count read back: a session that ran a cell every
// microsecond for twelve days has run fewer.
const maxCells = 1 << 40

// check refuses a record that this hub could not have written: one that
// would number the next cell past what an int holds, or start the session
// again with an interpreter given by a relative path or on a host whose
// name the start would refuse.
func (r *swapRecord) check() error {
	switch {
	case r.Cells < 0 || r.Cells > maxCells:
		return fmt.Errorf("a count of %d cells", r.Cells)
	case r.Bytes < 0:
		return fmt.Errorf("a size of %d bytes", r.Bytes)
	case r.Executable != "" && !filepath.IsAbs(r.Executable):
		return fmt.Errorf("the interpreter %q is not an absolute path", r.Executable)
	case r.Host != config.Local && r.Host != "":
		if _, _, _, err := remote.ParseSpec(r.Host); err != nil {
			return err
		}
	}
	return nil
}

// swapState is the hub's swaps and restores under way. Its lock is taken
// after Session.mu when both are held.
type swapState struct {
	mu   sync.Mutex
	jobs map[*Session]*swapJob
}

// swapJob is one swap or restore under way on a session.
type swapJob struct {
	sid      int64
	swapped  chan *proto.Swapped
	restored chan *proto.Restored
	acks     chan int64
	done     chan struct{} // closed when the job is over
	gone     bool          // set before done closes: the session went to disk, or failed to come back

	mu      sync.Mutex
	sink    *os.File // a remote swap's chunks go here
	sinkErr error
}

func newJob(sid int64) *swapJob {
	return &swapJob{sid: sid, swapped: make(chan *proto.Swapped, 1), restored: make(chan *proto.Restored, 1),
		acks: make(chan int64, 64), done: make(chan struct{})}
}

// addJobLocked records j as s's job; s.mu is held, so that whoever finds s
// busy also finds its job.
func (h *Hub) addJobLocked(s *Session, j *swapJob) {
	h.swap.mu.Lock()
	defer h.swap.mu.Unlock()
	if h.swap.jobs == nil {
		h.swap.jobs = map[*Session]*swapJob{}
	}
	h.swap.jobs[s] = j
}

func (h *Hub) endJob(s *Session, j *swapJob) {
	h.swap.mu.Lock()
	if h.swap.jobs[s] == j {
		delete(h.swap.jobs, s)
	}
	h.swap.mu.Unlock()
	close(j.done)
}

func (h *Hub) jobOf(s *Session) *swapJob {
	h.swap.mu.Lock()
	defer h.swap.mu.Unlock()
	return h.swap.jobs[s]
}

// onSwapped and onRestored hand a worker's answer to its job.
func (h *Hub) onSwapped(s *Session, f *proto.Swapped) {
	if j := h.jobOf(s); j != nil && j.sid == f.Sid {
		select {
		case j.swapped <- f:
		default:
		}
	}
}

func (h *Hub) onRestored(s *Session, f *proto.Restored) {
	if j := h.jobOf(s); j != nil && j.sid == f.Sid {
		select {
		case j.restored <- f:
		default:
		}
	}
}

// waitSwapOf waits while s is being swapped or restored, and reports
// whether s has ended meanwhile (it went to disk, or its restore failed):
// the caller must then look the name up again.
func (h *Hub) waitSwapOf(ctx context.Context, s *Session) bool {
	j := h.jobOf(s)
	if j == nil {
		return false
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		return false
	}
	select {
	case <-s.exited:
		return true
	default:
		return j.gone
	}
}

// -- files -------------------------------------------------------------

func (h *Hub) swapPaths(name string) (pickle, record string) {
	d := h.paths.SwapDir()
	return filepath.Join(d, name+".pickle"), filepath.Join(d, name+".json")
}

// swapDir makes the swap folder, or checks the one there: a folder of ours
// that only we may enter.
func (h *Hub) swapDir() (string, error) {
	dir := h.paths.SwapDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("swap folder: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("swap folder: %w", err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("swap folder %s is not a folder: remove it", dir)
	case st != nil && int(st.Uid) != os.Getuid():
		return "", fmt.Errorf("swap folder %s belongs to uid %d, not to you: remove it", dir, st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("swap folder %s has mode %04o, open to others: `chmod 700 %s` closes it", dir, fi.Mode().Perm(), dir)
	}
	return dir, nil
}

// checkSwapFile says why fi may not be loaded; nil when it is a regular
// file of ours with no group or other bits.
func checkSwapFile(path string, fi os.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link, not a swap file replhub wrote", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	case st != nil && int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s belongs to uid %d, not to you", path, st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o: others may have read or changed it", path, fi.Mode().Perm())
	}
	return nil
}

// openSwapFile opens path for reading without following a link and checks
// what it opened.
func openSwapFile(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s is a symbolic link, not a swap file replhub wrote", path)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkSwapFile(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// UnsafeSwapError is a swap that is not loaded: its files are not what
// replhub wrote, as far as it can tell.
type UnsafeSwapError struct {
	Name string
	Err  error
}

func (e *UnsafeSwapError) Error() string {
	return fmt.Sprintf("refused to load the swap of session '%s': %v; loading a pickle runs code, so only a regular file of yours with mode 0600 is loaded. `replhub kill %s` deletes the swap",
		e.Name, e.Err, e.Name)
}

// readSwap returns name's swap record, nil when there is none, or an
// *UnsafeSwapError (logged) when its files may not be loaded.
func (h *Hub) readSwap(name string) (*swapRecord, error) {
	pickle, record := h.swapPaths(name)
	if _, err := os.Lstat(record); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	refuse := func(err error) (*swapRecord, error) {
		h.log.Error("swap refused", "session", name, "err", err)
		return nil, &UnsafeSwapError{Name: name, Err: err}
	}
	if _, err := h.swapDir(); err != nil {
		return refuse(err)
	}
	f, _, err := openSwapFile(record)
	if err != nil {
		return refuse(err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord))
	f.Close()
	if err != nil {
		return refuse(err)
	}
	var rec swapRecord
	err = decodeRecord(b, &rec)
	if errors.Is(err, errManyValues) {
		return refuse(fmt.Errorf("%s holds more values than a swap record", record))
	}
	if err != nil || rec.Name != name {
		return refuse(fmt.Errorf("%s is not a swap record", record))
	}
	if err := rec.check(); err != nil {
		return refuse(fmt.Errorf("%s is not a swap record: %v", record, err))
	}
	fi, err := os.Lstat(pickle)
	if err == nil {
		err = checkSwapFile(pickle, fi)
	}
	if err != nil {
		return refuse(err)
	}
	return &rec, nil
}

// hasSwap says whether rec's name has a swap from rec's host.
func (h *Hub) hasSwap(rec liveRecord) bool {
	sw, err := h.readSwap(rec.Name)
	return err == nil && sw != nil && sw.Host == rec.Host
}

// removeSwap deletes name's swap: the record first, so that a swap is
// never half there.
func (h *Hub) removeSwap(name string) {
	pickle, record := h.swapPaths(name)
	h.swapList.changed(name)
	os.Remove(record)
	os.Remove(pickle)
	syncDir(h.paths.SwapDir())
}

// keepSwap moves name's pickle to SwapDir/kept/NAME-TIME.pickle (0600,
// in a folder of mode 0700), for a restore that could not load every name;
// the record is left for removeSwap.
func (h *Hub) keepSwap(name string, when time.Time) (string, error) {
	pickle, _ := h.swapPaths(name)
	h.swapList.changed(name)
	dir := filepath.Join(h.paths.SwapDir(), "kept")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	kept := filepath.Join(dir, name+"-"+when.Local().Format("20060102-150405")+".pickle")
	if err := os.Rename(pickle, kept); err != nil {
		return "", err
	}
	syncDir(dir)
	return kept, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// diskReserve is what a remote session's swap leaves free on the disk
// that holds the swap folder: the host's bytes must not fill this machine.
const diskReserve = 1 << 30

// diskRoom says whether n more bytes leave diskReserve free in dir's file
// system (or a twentieth of it, if that is less).
func diskRoom(dir string, n int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // nothing to go by: the write itself will tell
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	reserve := min(int64(diskReserve), int64(st.Blocks)*int64(st.Bsize)/20)
	if free-n < reserve {
		return fmt.Errorf("the disk of %s would have less than %s free: the swap stops", dir, wire.MB(reserve))
	}
	return nil
}

// -- swapping out ----------------------------------------------------------

// swapOut swaps s to disk and ends it, unless it is busy, root, (without
// force) runs a background job, or was used less than idleFor ago (the
// sweep's swap_after_hours: the sweep chose s on what it saw a moment
// before, and a session that has just started or ended a cell since is
// not idle). why says what made the hub do it.
func (h *Hub) swapOut(ctx context.Context, s *Session, force bool, why string, idleFor time.Duration) wire.SwapOutcome {
	t0 := time.Now()
	out := wire.SwapOutcome{Name: s.name, Host: s.host(), Status: wire.SwapKept}
	select {
	case <-s.ready:
	default:
		out.Why = "it is starting"
		return out
	}
	dir, err := h.swapDir()
	if err != nil {
		out.Status, out.Why = wire.SwapFailed, err.Error()
		return out
	}
	op := &serveOp{sid: sids.Add(1), kind: "swap", from: "the hub", start: t0,
		done: make(chan *proto.Served, 4), ended: make(chan struct{})}
	j := newJob(op.sid)
	op.chunkSink = func(c *proto.Chunk) {
		j.mu.Lock()
		if j.sink != nil && j.sinkErr == nil {
			if j.sinkErr = diskRoom(dir, int64(len(c.Data))); j.sinkErr == nil {
				_, j.sinkErr = j.sink.Write(c.Data)
			}
			if j.sinkErr != nil {
				// On the frame reader: never a write that could wait.
				go s.relayLater(&proto.Cancel{Sid: op.sid})
			}
		}
		j.mu.Unlock()
		proto.PutChunk(c.Data)
	}
	s.mu.Lock()
	switch {
	case s.state == stateDead || s.state == stateStarting || s.startErr != nil:
		out.Why = "it is not running"
	case s.info.Root:
		out.Why = "a root session is never swapped"
	case s.channelLost != "":
		out.Why = "its worker cannot reach the hub: its channel was closed by its own code"
	default:
		if busy := s.busyWithLocked(); busy != "" {
			out.Why = "it is busy: " + busy
		} else if d := time.Since(s.lastActive); d < idleFor {
			out.Why = usedAgo(d, idleFor)
		}
	}
	if out.Why != "" {
		s.mu.Unlock()
		return out
	}
	s.serving = op
	s.state = stateRunning
	local := s.info.Host == "local"
	h.addJobLocked(s, j)
	s.mu.Unlock()
	finished := false
	defer func() {
		if !finished {
			h.endSwapOp(s, op)
			h.endJob(s, j)
		}
	}()

	part := filepath.Join(dir, fmt.Sprintf("%s%s.pickle.part-%d", partPrefix, s.name, op.sid))
	frame := &proto.Swap{Sid: op.sid, Force: force}
	if local {
		frame.Path = part
	} else {
		f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			out.Status, out.Why = wire.SwapFailed, err.Error()
			return out
		}
		j.mu.Lock()
		j.sink = f
		j.mu.Unlock()
	}
	defer os.Remove(part) // gone by then unless the swap failed
	ctx, cancel := context.WithTimeout(ctx, swapBound)
	defer cancel()
	// Through the relay writer: a worker that reads nothing fails the
	// swap after relayStall, rather than holding it, the sweep behind it
	// and the hub's stop.
	ans := h.awaitSwapped(ctx, s, j, op, s.relaySend(frame, ctx.Done()))
	j.mu.Lock()
	sink, sinkErr := j.sink, j.sinkErr
	j.sink = nil
	j.mu.Unlock()
	if sink != nil {
		if sinkErr == nil {
			sinkErr = sink.Sync()
		}
		sink.Close()
	}
	switch {
	case sinkErr != nil:
		out.Status, out.Why = wire.SwapFailed, "writing the swap: "+sinkErr.Error()
		return out
	case ans == nil:
		out.Status, out.Why = wire.SwapFailed, "the session did not finish its swap: "+h.swapStopped(ctx, s)
		return out
	case !ans.OK && ans.Job != "":
		out.Why = "a background job runs: " + ans.Job
		return out
	case !ans.OK:
		out.Status, out.Why = wire.SwapFailed, ans.Error
		return out
	}
	fi, err := os.Lstat(part)
	if err == nil {
		err = checkSwapFile(part, fi)
	}
	if err == nil && fi.Size() != ans.Size {
		err = fmt.Errorf("the swap has %d bytes, the session said %d", fi.Size(), ans.Size)
	}
	if err != nil {
		out.Status, out.Why = wire.SwapFailed, err.Error()
		return out
	}
	rec := h.swapRecordOf(s, ans, why)
	if err := h.writeSwap(s.name, part, rec); err != nil {
		out.Status, out.Why = wire.SwapFailed, err.Error()
		return out
	}
	h.transcribeNote(s, "swapped to disk: "+why, "")
	// The swap is on disk: the session ends, quietly, and what nobody had
	// read goes with the swap, not to a reply. Its name is free at once;
	// its worker's memory goes back to the system as it exits.
	s.mu.Lock()
	s.killed = true
	s.death = "swapped to disk"
	s.out.take()
	s.pending, s.notes = nil, nil
	if r := s.cur; r != nil && r.isFinished() {
		r.collected = true
	}
	s.mu.Unlock()
	h.mu.Lock()
	if h.sessions[s.name] == s {
		delete(h.sessions, s.name)
	}
	h.mu.Unlock()
	h.endSwapOp(s, op)
	s.proc.Kill()
	finished = true
	j.gone = true
	h.endJob(s, j)
	out.Status, out.Why = wire.SwapDone, why
	out.Bytes, out.Names, out.DurationMS = ans.Size, len(ans.Names), time.Since(t0).Milliseconds()
	for _, k := range ans.Skipped {
		out.Skipped = append(out.Skipped, k.Name+" ("+k.Why+")")
	}
	h.log.Info("session swapped", "session", s.name, "why", why, "bytes", ans.Size, "names", len(ans.Names),
		"skipped", len(ans.Skipped), "ms", out.DurationMS)
	return out
}

// awaitSwapped waits for the worker's swapped frame; nil when the session
// died or ctx ended first (then the swap is cancelled).
func (h *Hub) awaitSwapped(ctx context.Context, s *Session, j *swapJob, op *serveOp, sent error) *proto.Swapped {
	if sent != nil {
		if sent == errStalled || sent == errPending {
			// The relay writer still has the frame, and writes it once
			// the worker reads again: its cancel follows it there.
			go s.relayLater(&proto.Cancel{Sid: op.sid})
		}
		return nil
	}
	select {
	case f := <-j.swapped:
		return f
	case <-s.exited:
		return nil
	case <-s.channelGone:
		return nil // its answer cannot come
	case <-ctx.Done():
	}
	go s.relayLater(&proto.Cancel{Sid: op.sid}) // after the swap frame, and never waited for
	select {
	case f := <-j.swapped:
		if f.OK {
			return f // it finished before the cancel: keep it
		}
	case <-s.exited:
	case <-time.After(cancelWait):
	}
	return nil
}

// swapStopped says why a swap got no answer.
func (h *Hub) swapStopped(ctx context.Context, s *Session) string {
	select {
	case <-s.exited:
		return "it died: " + s.deathText()
	default:
	}
	if ctx.Err() != nil {
		return "the swap was stopped (" + ctx.Err().Error() + ")"
	}
	return "its stream closed"
}

// endSwapOp frees s of its swap or restore without counting it as use.
func (h *Hub) endSwapOp(s *Session, op *serveOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving == op {
		s.serving = nil
		close(op.ended)
		if s.state == stateRunning {
			s.state = stateIdle
		}
	}
}

// swapRecordOf describes s and its swap, with what nobody has read.
func (h *Hub) swapRecordOf(s *Session, ans *proto.Swapped, why string) *swapRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := &swapRecord{Name: s.name, When: time.Now(), Why: why, Host: s.info.Host, Route: s.info.Route,
		Jump: s.origin.Jump, Python: s.info.Python, Executable: s.info.Executable, Cwd: ans.Cwd,
		Cells: s.cells, Bytes: ans.Size, Names: ans.Names, Skipped: ans.Skipped,
		Threads: ans.Threads, Children: ans.Children, Notes: append([]string(nil), s.notes...)}
	if rec.Cwd == "" {
		rec.Cwd = s.info.Cwd
	}
	unread := s.out.peek()
	rec.Output = unread.text + string(s.pending)
	rec.Notes = append(rec.Notes, unread.notes...)
	if r := s.cur; r != nil && r.isFinished() && !r.collected && r.collecting == 0 && r.result != nil {
		res := *r.result
		rec.Result = &res
	}
	for _, r := range s.kept {
		if !r.collected && r.result != nil {
			rec.Kept = append(rec.Kept, r.result)
		}
	}
	rec.Gone = maps.Clone(s.gone)
	return rec
}

// writeSwap puts the pickle in place, then its record.
func (h *Hub) writeSwap(name, part string, rec *swapRecord) error {
	pickle, record := h.swapPaths(name)
	h.swapList.changed(name)
	defer h.swapList.changed(name) // a list that read the files meanwhile
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.Rename(part, pickle); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(record, b, 0o600); err != nil {
		os.Remove(pickle)
		return err
	}
	syncDir(filepath.Dir(pickle))
	return nil
}

// swapMany swaps list, swapsAtOnce at a time (swapOut).
func (h *Hub) swapMany(ctx context.Context, list []*Session, force bool, why func(*Session) string, idleFor time.Duration) []wire.SwapOutcome {
	out := make([]wire.SwapOutcome, len(list))
	sem := make(chan struct{}, swapsAtOnce)
	var wg sync.WaitGroup
	for i, s := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = h.swapOut(ctx, s, force, why(s), idleFor)
		}()
	}
	wg.Wait()
	return out
}

// allSessions lists the hub's sessions, in no order.
func (h *Hub) allSessions() []*Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	all := make([]*Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	return all
}

// liveSessions lists the hub's sessions by name, but for runs' own.
func (h *Hub) liveSessions() []*Session {
	// A run's session ends with its call.
	all := slices.DeleteFunc(h.allSessions(), func(s *Session) bool { return s.private })
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all
}

// swapLoop runs the sweep every swapEvery until ctx ends.
func (h *Hub) swapLoop(ctx context.Context) {
	every := swapEvery
	if v := os.Getenv("REPLHUB_SWAP_EVERY"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			every = max(d, 50*time.Millisecond)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := h.sweep(ctx); err != nil {
			h.log.Warn("swap sweep", "err", err)
		}
	}
}

// ErrSwapOff is a sweep asked for while swap_after_hours is 0.
var ErrSwapOff = errors.New(`swapping is off ("swap_after_hours": 0 in config.json); ` + "`replhub swap NAME` swaps one session")

// sweep deletes swaps kept too long and swaps every session nobody has
// used for swap_after_hours; it says what it did with each session.
func (h *Hub) sweep(ctx context.Context) ([]wire.SwapOutcome, error) {
	cfg, err := config.Load(h.paths.ConfigFile())
	if err != nil {
		return nil, err
	}
	h.expireSwaps(cfg.SwapKeep())
	after := cfg.SwapAfter()
	if after == 0 {
		return nil, ErrSwapOff
	}
	var kept []wire.SwapOutcome
	var due []*Session
	idle := map[*Session]time.Duration{}
	for _, s := range h.liveSessions() {
		s.mu.Lock()
		d, state := time.Since(s.lastActive), s.state
		s.mu.Unlock()
		if state == stateIdle && d < after {
			kept = append(kept, wire.SwapOutcome{Name: s.name, Host: s.host(), Status: wire.SwapKept, Why: usedAgo(d, after)})
			continue
		}
		idle[s] = d
		due = append(due, s)
	}
	// Not cancelled by the hub's stop: a swap under way finishes, and the
	// stop's own swaps wait for it (swapAtStop).
	done := h.swapMany(context.WithoutCancel(ctx), due, false, func(s *Session) string {
		return "nobody used it for " + wire.Duration(idle[s].Seconds())
	}, after)
	all := append(done, kept...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all, nil
}

// usedAgo is why the sweep keeps a session used d ago.
func usedAgo(d, after time.Duration) string {
	return fmt.Sprintf("used %s ago (swap_after_hours is %s)", wire.Duration(d.Seconds()), hours(after))
}

func hours(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", d.Hours()), "0"), ".")
}

// swapAllAtStop swaps every user session before a graceful stop; shutdown
// ends the rest.
func (h *Hub) swapAllAtStop() {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	h.swapAtStop(h.liveSessions(), "the hub stopped")
}

// swapAtStop swaps the sessions in list as the hub ends (at a restart,
// those that cannot outlive it), ending the background jobs of those that
// have one. It stops after stopSwapBudget, or at once when the process gets
// SIGTERM or SIGINT again (the first one ended Run's context).
func (h *Hub) swapAtStop(list []*Session, why string) {
	if len(list) == 0 {
		return
	}
	cfg, err := config.Load(h.paths.ConfigFile())
	if err != nil {
		// The sessions' state matters more than a typo: swap as by default.
		h.log.Error("config.json unreadable at stop; swapping by default", "err", err)
	} else if cfg.SwapAfter() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopSwapBudget)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			h.log.Warn("a second signal: the hub stops without swapping the rest")
			cancel()
		case <-ctx.Done():
		}
	}()
	h.log.Info("swapping sessions before the hub ends", "sessions", len(list), "why", why)
	// A swap the sweep (or a request) has under way is finished first; a
	// session it took to disk is not swapped again.
	var todo []*Session
	for _, s := range list {
		if j := h.jobOf(s); j != nil {
			select {
			case <-j.done:
			case <-ctx.Done():
			}
		}
		if h.holds(s) {
			todo = append(todo, s)
		}
	}
	outs := h.swapMany(ctx, todo, true, func(*Session) string { return why }, 0)
	// The swapped workers are ended, but only their exits remove their
	// live records: wait for them, or the next hub would take each for a
	// session lost with this one.
	exits := time.After(5 * time.Second)
	for _, s := range list {
		if h.holds(s) {
			continue // not swapped: shutdown ends it
		}
		select {
		case <-s.exited:
		case <-exits:
		}
	}
	for _, o := range outs {
		if o.Status != wire.SwapDone {
			h.log.Info("not swapped", "session", o.Name, "why", o.Why)
		}
	}
}

// holds says whether s is still the hub's session by its name: not
// swapped away, and not ended.
func (h *Hub) holds(s *Session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[s.name] == s
}

// stopMessage answers a stop request.
func (h *Hub) stopMessage() string {
	if cfg, err := config.Load(h.paths.ConfigFile()); err == nil && cfg.SwapAfter() > 0 {
		return "hub stopping; its user sessions go to disk (root sessions and running cells end)"
	}
	return "hub stopping; its sessions end"
}

// expireSwaps deletes the swaps older than keep (zero keeps them all),
// each leaving a death note; and part files left by a hub that died mid-swap.
func (h *Hub) expireSwaps(keep time.Duration) {
	dir := h.paths.SwapDir()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, partPrefix) {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter {
				os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		base, ok := strings.CutSuffix(name, ".json")
		if !ok || checkName(base) != nil || keep == 0 {
			continue
		}
		rec, err := h.readSwap(base)
		if err != nil || rec == nil || time.Since(rec.When) < keep {
			continue
		}
		h.mu.Lock()
		live := h.sessions[base] != nil
		h.mu.Unlock()
		if live {
			continue
		}
		note := deathNote{Name: base, When: time.Now(), Cells: rec.Cells, Transcript: h.paths.Transcript(base), Host: rec.Host,
			How: fmt.Sprintf("its swap of %s was not restored within swap_keep_days (%s) and was deleted; its state is gone",
				rec.When.Local().Format("2006-01-02 15:04"), wire.Duration(keep.Seconds()))}
		if err := h.writeDeathNote(note); err != nil {
			h.log.Error("death note not written; the swap stays", "session", base, "err", err)
			continue
		}
		h.removeSwap(base)
		h.log.Info("swap expired", "session", base, "swapped", rec.When)
	}
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		// A pickle without its record: the hub died between the two.
		if base, ok := strings.CutSuffix(e.Name(), ".pickle"); ok {
			if _, err := os.Lstat(filepath.Join(dir, base+".json")); errors.Is(err, os.ErrNotExist) {
				if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter {
					os.Remove(filepath.Join(dir, e.Name()))
				}
			}
		}
	}
}

// -- the hub's other ops ------------------------------------------------------

// handleSwap answers OpSwap: one session now, or the sweep.
func (h *Hub) handleSwap(ctx context.Context, req wire.Request) wire.Reply {
	if req.Name == "" {
		outs, err := h.sweep(ctx)
		if err != nil {
			return errReply(wire.CodeBadRequest, "%v", err)
		}
		// A Message, always: serveConn takes a reply without one (nor
		// a result or a list) for a client gone away.
		return wire.Reply{Swaps: outs, Message: fmt.Sprintf("%d sessions considered", len(outs))}
	}
	if err := checkName(req.Name); err != nil {
		return replyErr(err)
	}
	h.mu.Lock()
	s := h.sessions[req.Name]
	h.mu.Unlock()
	if s == nil {
		rec, err := h.readSwap(req.Name)
		if err != nil {
			return errReply(wire.CodeStart, "%v", err) // its swap is refused: say why
		}
		if rec != nil {
			adv := wire.AdviceFor(req.Surface)
			o := wire.SwapOutcome{Name: req.Name, Host: rec.Host, Status: wire.SwapOnDisk,
				Why: fmt.Sprintf("swapped %s; %s restores it", rec.When.Local().Format("2006-01-02 15:04:05"), adv.Exec(req.Name))}
			return wire.Reply{Swaps: []wire.SwapOutcome{o}, Message: o.Line()}
		}
		if note := h.peekDeathNote(req.Name); note != "" {
			return errReply(wire.CodeDead, "nothing to swap: %s", note)
		}
		return errReply(wire.CodeNoSession, "no session '%s'", req.Name)
	}
	o := h.swapOut(ctx, s, req.Force, "on request", 0)
	if o.Status == wire.SwapKept && strings.HasPrefix(o.Why, "a background job runs") {
		o.Why += fmt.Sprintf("; `replhub swap %s --force` swaps it anyway, ending the job", req.Name)
	}
	return wire.Reply{Swaps: []wire.SwapOutcome{o}, Message: o.Line()}
}

// killSwap deletes name's swap, if it has one.
func (h *Hub) killSwap(name string) (string, bool) {
	_, record := h.swapPaths(name)
	if _, err := os.Lstat(record); err != nil {
		return "", false
	}
	h.removeSwap(name)
	h.takeDeathNote(name)
	h.log.Info("swap deleted on request", "session", name)
	return fmt.Sprintf("deleted the swap of session '%s'; its name is free", name), true
}

// swappedError is the answer about a name that is on disk.
func (h *Hub) swappedError(name string, adv wire.Advice) error {
	_, record := h.swapPaths(name)
	if _, err := os.Lstat(record); err != nil {
		return nil
	}
	return &wire.Error{Code: wire.CodeNoSession, Message: fmt.Sprintf(
		"session '%s' is swapped to disk: the next %s (or session(\"%s\")) restores it, with what nobody had read",
		name, adv.Exec(name), name)}
}
