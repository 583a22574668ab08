package hub

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/testbound"
	"github.com/replhub/replhub/wire"
)

// A death note read back is the note written, or one that says it is
// unreadable; either reads as a note on the name it was asked for, and
// showing it removes its file, no other.
func FuzzDeathNote(f *testing.F) {
	h, p, root := fuzzHub(f)
	for _, n := range []deathNote{
		{Name: "x", When: time.Now(), How: "killed by signal SIGKILL", Cells: 3, LastOutput: "a\nb \xff", Transcript: p.Transcript("x"), Host: "local"},
		{Name: "x", When: time.Now(), How: "lost", Cells: 1, Host: "lab-7", Root: true, NeverRan: []int{4, 5, 6, 9}, Unread: []int{2}},
	} {
		require.NoError(f, h.writeDeathNote(n))
		b, err := os.ReadFile(h.deathNotePath("x"))
		require.NoError(f, err)
		f.Add("x", b)
		for _, k := range []int{1, len(b) / 2, len(b) - 2} {
			f.Add("x", b[:k])
		}
	}
	os.Remove(h.deathNotePath("x"))
	for _, s := range []string{`{"name":"../x"}`, `{"name":"x","when":"9999-12-31T23:59:59Z","cells":-1}`, `{"name":"x","never_ran":[-9223372036854775808,9223372036854775807]}`,
		`{"name":"x","when":"0001-01-01T00:00:00Z","never_ran":[1,2,3,5],"unread":[0]}`, `null`, `"x"`, ``} {
		f.Add("x", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		if checkName(name) != nil {
			name = "x"
		}
		path := h.deathNotePath(name)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		defer os.Remove(path)
		n := h.readDeathNote(name)
		if n == nil {
			t.Fatalf("no note from %q", b)
		}
		var want deathNote
		readable := json.Unmarshal(b, &want) == nil && want.Name == name
		switch {
		case n.Name != name:
			t.Fatalf("the note of %q is named %q", name, n.Name)
		case !readable && !strings.Contains(n.How, "unreadable"):
			t.Fatalf("the note %q reads as %+v", b, n)
		case readable:
			// As written: the note rewritten by the hub reads the same.
			got, _ := json.Marshal(n)
			w, _ := json.Marshal(want)
			if string(got) != string(w) {
				t.Fatalf("read %s, written %s", got, w)
			}
			require.NoError(t, h.writeDeathNote(*n))
			again := h.readDeathNote(name)
			if got2, _ := json.Marshal(again); string(got2) != string(w) {
				t.Fatalf("rewritten, it reads %s, not %s", got2, w)
			}
		}
		if text := n.text(); !strings.HasPrefix(text, "session '"+name+"' died") {
			t.Fatalf("the note reads %q", text)
		}
		h.diedQueued(name, 1)
		h.checkTie(wire.Request{Name: name, Host: "lab-7"})
		before := files(t, root)
		h.takeDeathNote(name)
		after := files(t, root)
		if _, ok := after[path]; ok {
			t.Fatal("a note shown stays")
		}
		delete(before, path)
		changedOnlyIn(t, before, after)
	})
}

// A note that is not a file the hub wrote (a FIFO, a link to /dev/zero)
// is not read, and a note of another name is not taken for this one's:
// each reads, at once, as unreadable.
func TestReadDeathNoteOddFiles(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	require.NoError(t, syscall.Mkfifo(filepath.Join(p.DeadDir(), "fifo.json"), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(p.DeadDir(), "zero.json")))
	require.NoError(t, os.WriteFile(filepath.Join(p.DeadDir(), "other.json"), []byte(`{"name":"../../x","how":"forged"}`), 0o600))
	notes := map[string]string{}
	testbound.Within(t, 10*time.Second, "reading the death notes", func() {
		for _, name := range []string{"fifo", "zero", "other"} {
			notes[name] = h.peekDeathNote(name)
		}
	})
	for name, note := range notes {
		assert.True(t, strings.HasPrefix(note, "session '"+name+"' died"), note)
		assert.Contains(t, note, "is unreadable", name)
	}
}

// At most maxDeathNotes death notes are kept: past it the oldest go, from
// the disk and from the hub's list of the dead, so that names dying in a
// loop (a host's code may open and end new ones) do not fill the disk.
func TestDeathNotesAreBounded(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	start := time.Now().Add(-time.Hour)
	for i := range maxDeathNotes + 20 {
		name := fmt.Sprintf("d%d", i)
		require.NoError(t, h.writeDeathNote(deathNote{Name: name, When: start, How: "killed"}))
		at := start.Add(time.Duration(i) * time.Second)
		require.NoError(t, os.Chtimes(h.deathNotePath(name), at, at))
	}
	ents, err := os.ReadDir(p.DeadDir())
	require.NoError(t, err)
	assert.Len(t, ents, maxDeathNotes)
	assert.Empty(t, h.peekDeathNote("d0"), "the oldest went")
	assert.NotEmpty(t, h.peekDeathNote(fmt.Sprintf("d%d", maxDeathNotes+19)), "the newest stays")
	h.mu.Lock()
	assert.Len(t, h.dead, maxDeathNotes)
	h.mu.Unlock()
}
