package hub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/procstat"
)

// Live records: while a session runs, LiveDir/NAME.json says so. It is
// written once the session has started (ensure), brought up to date at
// every cell (transcribe) and removed when the session ends in any way the
// hub sees (sessionExited: a kill, a death with its note written, the hub's
// graceful stop). A record still there when a hub starts means the hub
// that ran the session died without ending it (SIGKILL, the OOM killer, a
// power cut) and took the session with it: the new hub turns the record
// into a death note, so that the next exec under the name says so instead
// of quietly starting an empty session.
//
// A record is written whole through a rename at the start, then rewritten
// in place at each cell through the file the hub keeps open: one small
// pwrite, where a rename per cell would cost 0.1–0.2 ms on ext4, most of a
// trivial cell's round trip. A record shorter than the one before is
// padded with blanks rather than truncated, sparing a syscall. A record torn by a power cut in mid-write is
// still turned into a note, one that says it was unreadable.

// liveRecord is what LiveDir/NAME.json holds.
type liveRecord struct {
	Name    string    `json:"name"`
	Host    string    `json:"host"` // "local" or the host it runs on
	Root    bool      `json:"root,omitempty"`
	Pid     int       `json:"pid"` // the worker's, on its host
	Python  string    `json:"python"`
	Started time.Time `json:"started"`
	Cells   int       `json:"cells"` // cells started, the running one included
	// Restored is the count of cells the session had run when its swap
	// was restored into this worker, which has not had them.
	Restored int `json:"restored,omitempty"`
	// Seen is when the record was last written: the hub ran then.
	Seen time.Time `json:"seen"`
	// HubPid and HubStart (the kernel's start time of that process, where
	// /proc tells it) name the hub that runs the session, so that a hub
	// sharing this state folder (another runtime folder, same home) is not
	// mistaken for a dead one, even after its pid is reused.
	HubPid   int    `json:"hub_pid"`
	HubStart string `json:"hub_start,omitempty"`
	// HubSock is that hub's socket: a hub of the same runtime folder, which
	// holds its lock only once the other let go of it, waits for that one
	// to end rather than take its sessions for another hub's (endingHub).
	HubSock string `json:"hub_sock,omitempty"`

	// A durable worker's socket, and what a hub that adopts it needs to
	// know of it that the worker does not say.
	Sock        string `json:"sock,omitempty"`
	WorkerStart string `json:"worker_start,omitempty"`
	// Private is a run's session (private.go): its caller went with the
	// hub, so the next hub ends it rather than adopt it.
	Private bool `json:"private,omitempty"`
	// Handover is what a hub that restarts on request leaves for the
	// next: unread output, a result nobody collected, pending notes.
	Handover *handover `json:"handover,omitempty"`

	// swapped says, of a record a dead hub left, that its name has a
	// swap: that hub was restoring the swap into this worker, or had
	// written it and not yet ended the worker. The swap is the session,
	// and the worker ends as a run's does.
	swapped bool
}

// ends says whether the next hub ends the record's worker rather than
// keep it: a run's, or one a swap took the place of.
func (r liveRecord) ends() bool { return r.Private || r.swapped }

// liveSet tracks the records this hub has on disk. Its lock is taken last,
// after Hub.mu and Session.mu.
type liveSet struct {
	mu    sync.Mutex
	files map[string]*liveFile // by session name
}

// liveFile is one record on disk, the session it describes and the open
// file it is rewritten through. The name's newest session owns the record:
// a predecessor whose waiter runs late must not remove its successor's.
type liveFile struct {
	s *Session
	f *os.File
	n int // bytes in the file
}

func (h *Hub) livePath(name string) string {
	return filepath.Join(h.paths.LiveDir(), name+".json")
}

// liveRecordLocked describes s; s.mu is held.
func (h *Hub) liveRecordLocked(s *Session) liveRecord {
	return liveRecord{
		Name: s.name, Host: s.info.Host, Root: s.info.Root, Pid: s.info.Pid, Python: s.info.Python,
		Started: s.started, Cells: s.cells, Restored: s.restored, Seen: time.Now(),
		HubPid: selfPid(), HubStart: selfStart(), HubSock: h.paths.Socket(),
		Sock: s.sock, WorkerStart: s.workerStart, Private: s.private,
		Handover: s.handedOver,
	}
}

// recordLive writes s's live record once it has started. A session that
// has died already (its waiter ran first) gets none.
func (h *Hub) recordLive(s *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateDead {
		return
	}
	b, _ := json.Marshal(h.liveRecordLocked(s))
	f, err := os.CreateTemp(h.paths.LiveDir(), ".tmp-*") // 0600
	if err == nil {
		if _, err = f.Write(b); err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	if err != nil {
		h.log.Error("live record not written", "session", s.name, "err", err)
		return
	}
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	if err := os.Rename(f.Name(), h.livePath(s.name)); err != nil {
		f.Close()
		os.Remove(f.Name())
		h.log.Error("live record not written", "session", s.name, "err", err)
		return
	}
	if h.live.files == nil {
		h.live.files = map[string]*liveFile{}
	}
	if old := h.live.files[s.name]; old != nil {
		old.f.Close()
	}
	h.live.files[s.name] = &liveFile{s: s, f: f, n: len(b)}
}

// touchLiveLocked rewrites s's record with its cell count; s.mu is held.
func (h *Hub) touchLiveLocked(s *Session) {
	h.rewriteLiveLocked(s, h.liveRecordLocked(s))
}

// rewriteLiveLocked writes rec as s's record; s.mu is held.
func (h *Hub) rewriteLiveLocked(s *Session, rec liveRecord) {
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	lf := h.live.files[s.name]
	if lf == nil || lf.s != s {
		return
	}
	b, _ := json.Marshal(rec)
	short := len(b) < lf.n
	if short && lf.n-len(b) <= maxPad {
		// Padded over the longer record it replaces, which a truncate
		// would cost a syscall at every cell: JSON allows trailing blanks.
		b = append(b, bytes.Repeat([]byte{' '}, lf.n-len(b))...)
		short = false
	}
	if _, err := lf.f.WriteAt(b, 0); err != nil {
		h.log.Error("live record not updated", "session", s.name, "err", err)
		return
	}
	if short {
		// After a hand-over's big record. Where the file cannot be cut,
		// the rest of the old record is blanked, so the JSON stays whole.
		if err := lf.f.Truncate(int64(len(b))); err != nil {
			lf.f.WriteAt(bytes.Repeat([]byte{' '}, lf.n-len(b)), int64(len(b)))
			return
		}
	}
	lf.n = len(b)
}

// maxPad is the most blanks a record is padded with: a shorter record by
// more (one that followed a hand-over's) truncates the file instead.
const maxPad = 256

// dropLive removes s's record; sessionExited calls it with s.mu held, after
// the death note (if any) is written, so that no moment lacks both.
func (h *Hub) dropLive(s *Session) {
	h.live.mu.Lock()
	defer h.live.mu.Unlock()
	lf := h.live.files[s.name]
	if lf == nil || lf.s != s {
		return
	}
	os.Remove(h.livePath(s.name))
	lf.f.Close()
	delete(h.live.files, s.name)
}

// reclaimLive turns the records a dead hub left into death notes; New calls
// it before the hub serves. A name that has a note already keeps it (the
// hub died between writing it and removing the record). A record whose
// hub still runs is left alone.
func (h *Hub) reclaimLive() {
	dir := h.paths.LiveDir()
	ents, _ := os.ReadDir(dir)
	var adoptable []liveRecord
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			// A record a hub was writing when it died; a minute's wait
			// spares one that a hub handing over writes now.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || checkName(name) != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := atomicfile.ReadFile(path, maxLiveRecord)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var rec liveRecord
		readable := err == nil && decodeRecord(b, &rec) == nil && rec.Name == name
		if readable && rec.Sock != "" && !isWorkerSocket(rec.Sock) {
			// Not a worker's socket: neither dialled nor removed.
			rec.Sock = ""
		}
		if readable && hubAlive(rec.HubPid, rec.HubStart) && !h.endingHub(rec) {
			continue
		}
		if readable {
			rec.swapped = h.hasSwap(rec)
		}
		if readable && rec.Sock != "" {
			adoptable = append(adoptable, rec)
			continue
		}
		if readable && rec.ends() {
			h.dropRunRecord(rec)
			continue
		}
		if !readable {
			rec = liveRecord{Name: name}
			if fi, err := e.Info(); err == nil {
				rec.Seen = fi.ModTime()
			}
		}
		h.loseLive(rec, readable)
	}
	// A record adopted is rewritten by this hub; one that is not, lost.
	for _, rec := range h.adoptAll(adoptable) {
		if rec.ends() {
			h.dropRunRecord(rec)
			continue
		}
		h.loseLive(rec, true)
	}
	h.endAdoptedRuns(adoptable)
}

// endingHubWait bounds the wait for a hub of this runtime folder that is
// ending (endingHub).
const endingHubWait = 5 * time.Second

// endingHub says whether rec's hub, which still runs, is one of this
// runtime folder that is ending, and waits for it to end: it let go of
// the runtime folder's lock, which this hub holds, as it ended, but its
// process may run a moment longer, and its sessions are this hub's to
// adopt then, not another hub's to leave alone.
func (h *Hub) endingHub(rec liveRecord) bool {
	if rec.HubSock != h.paths.Socket() {
		return false
	}
	for deadline := time.Now().Add(endingHubWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if procstat.Exited(rec.HubPid, rec.HubStart) {
			return true
		}
	}
	return false
}

// maxLiveRecord bounds a live record read back: a hand-over's holds at
// most maxQueueBytes of queued code and a few times UnreadCap of output
// and results, which JSON's escapes may make a few times longer.
const maxLiveRecord = 256 << 20

// A record read back is decoded only when it holds at most maxObjects
// objects and maxValues values: decoded, "{}," (three bytes) is a
// wire.Result of some 300, so that a record within its bytes' bound could
// still take gigabytes. A record the hub wrote holds far fewer: its
// longest lists are a swap's names and a hand-over's runs of output (at
// most one per byte of UnreadCap), its objects a few hundred results.
const (
	maxObjects = 1 << 18
	maxValues  = 1 << 22
)

// errManyValues is decodeRecord's refusal of a record with more values
// than the hub writes.
var errManyValues = errors.New("more values than a record the hub writes")

// decodeRecord decodes b, a record the hub wrote and read back, into v,
// once fewValues has found it small enough to decode.
func decodeRecord(b []byte, v any) error {
	if !fewValues(b) {
		return errManyValues
	}
	return json.Unmarshal(b, v)
}

// fewValues says whether the JSON in b holds at most maxObjects objects
// and maxValues values, counted (roughly, and without decoding) as the
// '{' and the ',' and ':' outside its strings.
func fewValues(b []byte) bool {
	objects, values := 0, 0
	in, esc := false, false
	for _, c := range b {
		switch {
		case in:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == '{':
			objects++
		case c == ',' || c == ':':
			values++
		}
	}
	return objects <= maxObjects && values <= maxValues
}

// isWorkerSocket says whether sock, taken from a live record, is a
// durable worker's socket as workerSocket names them, in the worker
// folder of this hub or of one that ran from another runtime folder (a
// login without XDG_RUNTIME_DIR): a socket of this user's, named by 16
// hex digits, in a folder named as WorkerDir is. A record torn or forged
// must not have the hub dial, or remove, anything else.
func isWorkerSocket(sock string) bool {
	dir, base := filepath.Split(sock)
	if !filepath.IsAbs(sock) || filepath.Clean(sock) != sock || filepath.Base(dir) != workerDirName {
		return false
	}
	hex, ok := strings.CutSuffix(base, ".sock")
	if !ok || len(hex) != 16 || strings.Trim(hex, "0123456789abcdef") != "" {
		return false
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// workerDirName is the last part of config.Paths.WorkerDir.
const workerDirName = "w"

// loseLive turns a record left by a dead hub into a death note, unless
// the name has one already, and removes it.
func (h *Hub) loseLive(rec liveRecord, readable bool) {
	if h.readDeathNote(rec.Name) == nil {
		note := rec.lostNote(h.paths.Transcript(rec.Name), readable)
		if err := h.writeDeathNote(note); err != nil {
			h.log.Error("death note not written; the live record stays", "session", rec.Name, "err", err)
			return
		}
		h.log.Warn("session lost with the previous hub", "session", rec.Name, "hub_pid", rec.HubPid, "cells", rec.Cells)
	}
	os.Remove(h.livePath(rec.Name))
	if rec.Sock != "" {
		os.Remove(rec.Sock)
	}
}

// lostNote is the death note of a session whose hub died under it.
func (r liveRecord) lostNote(transcript string, readable bool) deathNote {
	where := "this local session"
	if r.Host != "" && r.Host != "local" {
		where = "this session on " + r.Host
	}
	if r.Root {
		where = strings.Replace(where, "session", "root session", 1)
	}
	how := fmt.Sprintf("lost with the hub: the hub (pid %d) that ran %s stopped without ending it, at that time or later; its state is gone", r.HubPid, where)
	if !readable {
		how = "lost with the hub: the hub that ran it stopped without ending it, at that time or later; its state is gone (its live record was unreadable)"
	}
	when := r.Seen
	if when.IsZero() {
		when = time.Now()
	}
	return deathNote{Name: r.Name, When: when, How: how, Cells: r.Cells, Transcript: transcript, Host: r.Host, Root: r.Root}
}

// hubAlive reports whether the process pid, started at start (as
// procstat.Stat gives it; "" when unknown), still runs. This process is
// not: it is the hub now starting.
func hubAlive(pid int, start string) bool {
	return pid > 0 && pid != os.Getpid() && procstat.Running(pid, start)
}

// selfPid is this process's pid: os.Getpid is a syscall, and the record
// that names it is written at every cell.
var selfPid = sync.OnceValue(os.Getpid)

// selfStart is this process's start time as procstat.Stat gives it.
var selfStart = sync.OnceValue(func() string {
	_, st, _ := procstat.Stat(os.Getpid())
	return st
})
