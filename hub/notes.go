package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/wire"
)

// deathNote records how a session died without being killed on request.
// It is kept as DeadDir/NAME.json until the next exec under that name (or a
// kill of the name) shows it.
type deathNote struct {
	Name       string    `json:"name"`
	When       time.Time `json:"when"`
	How        string    `json:"how"`
	Cells      int       `json:"cells"`
	LastOutput string    `json:"last_output"`
	Transcript string    `json:"transcript"`
	Host       string    `json:"host"`
	Root       bool      `json:"root,omitempty"`
	// NeverRan are the cells that were queued when it died; Unread those
	// whose results nobody had read.
	NeverRan []int `json:"never_ran,omitempty"`
	Unread   []int `json:"unread,omitempty"`
}

func (n deathNote) text() string {
	cells := "cells"
	if n.Cells == 1 {
		cells = "cell"
	}
	s := fmt.Sprintf("session '%s' died at %s (%s ago): %s, after %d %s; transcript %s",
		n.Name, n.When.Local().Format("15:04:05"), wire.Duration(time.Since(n.When).Seconds()), n.How, n.Cells, cells, n.Transcript)
	if len(n.NeverRan) > 0 {
		s += fmt.Sprintf("; %s, queued, never ran", cellList(n.NeverRan))
	}
	if len(n.Unread) > 0 {
		s += fmt.Sprintf("; the results of %s were never read", cellList(n.Unread))
	}
	if n.LastOutput != "" {
		s += "\nits last output:\n    " + strings.ReplaceAll(n.LastOutput, "\n", "\n    ")
	}
	return s
}

func (h *Hub) deathNotePath(name string) string {
	return filepath.Join(h.paths.DeadDir(), name+".json")
}

func (h *Hub) writeDeathNote(n deathNote) error {
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(h.deathNotePath(n.Name), b, 0o600); err != nil {
		return err
	}
	h.mu.Lock()
	h.dead[n.Name] = true
	h.told.forgetLocked(n.Name)
	over := len(h.dead) > maxDeathNotes
	h.mu.Unlock()
	if over {
		h.dropOldDeathNotes()
	}
	return nil
}

// maxDeathNotes bounds the death notes kept: each name that dies leaves
// one until it is shown, and a host's code may open and end new names
// in a loop.
const maxDeathNotes = 256

// dropOldDeathNotes removes the oldest death notes (by their file's time)
// past maxDeathNotes.
func (h *Hub) dropOldDeathNotes() {
	ents, err := os.ReadDir(h.paths.DeadDir())
	if err != nil {
		return
	}
	type note struct {
		name string
		at   time.Time
	}
	var notes []note
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if fi, err := e.Info(); err == nil {
			notes = append(notes, note{name, fi.ModTime()})
		}
	}
	if len(notes) <= maxDeathNotes {
		return
	}
	slices.SortFunc(notes, func(a, b note) int { return a.at.Compare(b.at) })
	old := notes[:len(notes)-maxDeathNotes]
	for _, n := range old {
		os.Remove(h.deathNotePath(n.name))
	}
	h.mu.Lock()
	for _, n := range old {
		delete(h.dead, n.name)
		h.told.forgetLocked(n.name)
	}
	h.mu.Unlock()
	h.log.Info("old death notes dropped", "dropped", len(notes)-maxDeathNotes, "kept", maxDeathNotes)
}

// loadDeadNames reads which death notes are on disk, once at start; from
// then on h.dead follows every note written and shown, so that a reply's
// line about other sessions costs no disk access.
func loadDeadNames(dir string) map[string]bool {
	dead := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			dead[name] = true
		}
	}
	return dead
}

// maxDeathNote bounds a death note read back: its last output is ten
// lines of at most ReplyCap characters.
const maxDeathNote = 1 << 20

// readDeathNote returns the note for name, or nil. An unreadable note (or
// one of another name, or not a file the hub wrote) is returned as a note
// that says so.
func (h *Hub) readDeathNote(name string) *deathNote {
	b, err := atomicfile.ReadFile(h.deathNotePath(name), maxDeathNote)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var n deathNote
	if err != nil || json.Unmarshal(b, &n) != nil || n.Name != name {
		return &deathNote{Name: name, When: time.Now(), How: "its death note " + h.deathNotePath(name) + " is unreadable"}
	}
	return &n
}

// peekDeathNote returns the note's text for name, or "".
func (h *Hub) peekDeathNote(name string) string {
	if n := h.readDeathNote(name); n != nil {
		return n.text()
	}
	return ""
}

// takeDeathNote returns the note for name and removes it: it is shown once.
func (h *Hub) takeDeathNote(name string) string {
	note := h.peekDeathNote(name)
	if note != "" {
		os.Remove(h.deathNotePath(name))
	}
	h.mu.Lock()
	delete(h.dead, name)
	h.told.forgetLocked(name)
	h.mu.Unlock()
	return note
}

// deadNames lists sessions with an unshown death note, but self and live ones.
func (h *Hub) deadNames(self string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadNamesLocked(self)
}

// deathsToTell lists the deaths (as deadNames) that client has not heard
// of yet, and counts them as heard. A client without a name (a CLI call)
// hears of every one.
func (h *Hub) deathsToTell(client, self string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := h.deadNamesLocked(self)
	if client == "" {
		return names
	}
	heard := h.told.of(client)
	fresh := names[:0]
	for _, n := range names {
		if !heard[n] {
			heard[n] = true
			fresh = append(fresh, n)
		}
	}
	return fresh
}

// toldLimit bounds the clients whose heard deaths the hub remembers; past
// it the client heard from least recently is forgotten, and would hear of
// the deaths again.
const toldLimit = 64

// toldDeaths remembers, per client, the deaths it has been told of. A
// death is forgotten when its note is written anew or shown, so that a
// later death under the same name is told again. Guarded by Hub.mu.
type toldDeaths struct {
	order []string // clients, least recently heard from first
	heard map[string]map[string]bool
}

// of returns client's set, making it the most recent.
func (t *toldDeaths) of(client string) map[string]bool {
	if t.heard == nil {
		t.heard = map[string]map[string]bool{}
	}
	for i, c := range t.order {
		if c == client {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
	t.order = append(t.order, client)
	if len(t.order) > toldLimit {
		delete(t.heard, t.order[0])
		t.order = t.order[1:]
	}
	set := t.heard[client]
	if set == nil {
		set = map[string]bool{}
		t.heard[client] = set
	}
	return set
}

func (t *toldDeaths) forgetLocked(name string) {
	for _, set := range t.heard {
		delete(set, name)
	}
}

func (h *Hub) deadNamesLocked(self string) []string {
	var names []string
	for name := range h.dead {
		if name != self && h.sessions[name] == nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// transcribe appends a cell to its session's transcript, which stays open
// for the session's life, and brings its live record's cell count up to
// date: at once, or for a cell that came right after another, within
// behindAfter (behind.go). Nothing ever runs a transcript: it is a record
// for people.
func (h *Hub) transcribe(s *Session, r *run, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hot := !s.transcribed.IsZero() && r.start.Sub(s.transcribed) < behindAfter
	s.transcribed = r.start
	// One write for a small cell; a big one is written from where it
	// lies, not copied behind its header (a cell may be tens of MB).
	small := len(code) <= 64<<10
	if hot && small {
		s.behind = appendCell(s.behind, r, s.info.Cwd, code)
		s.behindLive = true
		h.behindLocked(s)
		return
	}
	h.flushBehindLocked(s)
	h.touchLiveLocked(s)
	if err := s.openTranscriptLocked(); err != nil {
		return
	}
	defer s.releaseTranscriptLocked()
	if small {
		s.transcript.Write(appendCell(make([]byte, 0, 128+len(code)), r, s.info.Cwd, code))
		return
	}
	s.transcript.Write(cellHeader(nil, r, s.info.Cwd))
	io.WriteString(s.transcript, code)
	if !strings.HasSuffix(code, "\n") {
		s.transcript.Write([]byte{'\n'})
	}
}

// cellHeader appends the line that begins cell r in the transcript.
func cellHeader(b []byte, r *run, cwd string) []byte {
	return fmt.Appendf(b, "\n# ---- cell %d · %s · cwd %s\n", r.cell, r.start.Format(time.RFC3339), cwd)
}

// appendCell appends cell r as the transcript has it: its header line,
// then its code, ended by a newline.
func appendCell(b []byte, r *run, cwd, code string) []byte {
	b = append(cellHeader(b, r, cwd), code...)
	if !strings.HasSuffix(code, "\n") {
		b = append(b, '\n')
	}
	return b
}

// releaseTranscriptLocked closes the transcript after a write that came
// once the worker had exited (the cell that killed it is written after its
// exec frame went, and its death may be handled first).
func (s *Session) releaseTranscriptLocked() {
	if s.transcriptShut && s.transcript != nil {
		s.transcript.Close()
		s.transcript = nil
	}
}

// openTranscriptLocked opens the transcript at its first use.
func (s *Session) openTranscriptLocked() error {
	if s.transcript != nil {
		return nil
	}
	if s.private && !s.transcribe {
		return errNoTranscript
	}
	f, err := os.OpenFile(s.hub.paths.Transcript(s.name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		s.hub.log.Error("transcript", "session", s.name, "err", err)
		return err
	}
	s.transcript = f
	return nil
}
