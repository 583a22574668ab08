package hub

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// A swap record read back is the record written, with the name of its
// file, or an *UnsafeSwapError; the list, the restore's note and the
// swap's expiry read it without harm, and touch no file outside the swap
// and dead folders.
func FuzzSwapRecord(f *testing.F) {
	h, p, root := fuzzHub(f)
	dir, err := h.swapDir()
	require.NoError(f, err)
	part := filepath.Join(dir, "~x.part")
	for _, rec := range []*swapRecord{
		{Name: "x", When: time.Now(), Why: "on request", Host: "local", Python: "3.12.1", Executable: "/usr/bin/python3", Cwd: "/w", Cells: 2, Bytes: 6, Names: []string{"a"}},
		{Name: "x", When: time.Now().Add(-48 * time.Hour), Why: "the hub stopped", Host: "lab-7", Route: "lab-7", Jump: &[]string{"bastion"},
			Python: "3.9.18", Cwd: "/home/u", Cells: 9, Skipped: []proto.SwapSkip{{Name: "sock", Why: "TypeError"}}, Threads: []string{"t"},
			Children: []string{"pid 7: sleep"}, Output: "unread \xff\n", Notes: []string{"n"},
			Result: &wire.Result{Cell: 9, Status: wire.StatusOK, Output: "9\n", Value: ptr("9")}, Kept: []*wire.Result{{Cell: 8}, nil}},
	} {
		require.NoError(f, os.WriteFile(part, []byte("pickle"), 0o600))
		require.NoError(f, h.writeSwap("x", part, rec))
		_, record := h.swapPaths("x")
		b, err := os.ReadFile(record)
		require.NoError(f, err)
		f.Add("x", b)
		for _, k := range []int{1, len(b) / 2, len(b) - 2} {
			f.Add("x", b[:k])
		}
	}
	h.removeSwap("x")
	for _, s := range []string{`{"name":"../x"}`, `{"name":"x","when":"0001-01-01T00:00:00Z","cells":-1,"bytes":-9223372036854775808}`,
		`{"name":"x","cells":9223372036854775807}`, `{"name":"x","host":"-oProxyCommand=sh"}`, `{"name":"x","host":"h;rm"}`, `{"name":"x","executable":"python3"}`,
		`{"name":"x","kept":[null,{"cell":-1,"fan":[{}],"display":[{}]}],"result":{}}`, `{"name":"x","jump":null,"host":""}`, `null`, ``} {
		f.Add("x", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		if checkName(name) != nil {
			name = "x"
		}
		pickle, record := h.swapPaths(name)
		require.NoError(t, os.WriteFile(record, b, 0o600))
		require.NoError(t, os.WriteFile(pickle, []byte("pickle"), 0o600))
		h.swapList.forget(nil) // a file rewritten in place may keep its key
		defer func() {
			os.Remove(record)
			os.Remove(pickle)
			h.takeDeathNote(name)
		}()
		before := files(t, root)

		rec, err := h.readSwap(name)
		var want swapRecord
		readable := fewValues(b) && json.Unmarshal(b, &want) == nil && want.Name == name && want.check() == nil
		var unsafe *UnsafeSwapError
		switch {
		case readable && (err != nil || rec == nil):
			t.Fatalf("the record %q was refused: %v", b, err)
		case readable:
			got, _ := json.Marshal(rec)
			w, _ := json.Marshal(want)
			if string(got) != string(w) {
				t.Fatalf("read %s, written %s", got, w)
			}
		case rec != nil || !errors.As(err, &unsafe) || unsafe.Name != name:
			t.Fatalf("the record %q read as %+v, %v", b, rec, err)
		}

		var line *wire.SwappedInfo
		for _, l := range h.listSwapped() {
			if l.Name == name {
				line = &l
			}
		}
		switch {
		case line == nil:
			t.Fatalf("the list has no line for %s", name)
		case readable && (line.Cells != rec.Cells || line.Host != rec.Host || line.Cwd != rec.Cwd):
			t.Fatalf("the list's line %+v is not the record's %+v", line, rec)
		case !readable && !strings.Contains(line.Cwd, "not a swap record"):
			t.Fatalf("the list's line %+v does not say why it is refused", line)
		}
		if rec != nil {
			note := rec.note(wire.SessionInfo{Python: "3.12.1", Cwd: "/w", Route: "lab-7"}, &proto.Restored{OK: true}, "")
			if !strings.HasPrefix(note, "session '"+name+"'") {
				t.Fatalf("the restore's note reads %q", note)
			}
			rec.agrees(wire.Request{Name: name, Host: "lab-8"})
			h.whereIs(name)
		}
		changedOnlyIn(t, before, files(t, root))

		// Past swap_keep_days: the swap goes and a note says so, or (not a
		// record) it stays.
		h.expireSwaps(time.Nanosecond)
		changedOnlyIn(t, before, files(t, root), p.SwapDir(), p.DeadDir())
		_, err = os.Stat(record)
		if gone := errors.Is(err, os.ErrNotExist); gone != (readable && time.Since(rec.When) >= time.Nanosecond) {
			t.Fatalf("the record %q expired: %v", b, gone)
		}
	})
}

// A swap record that would decode into gigabytes is refused, not decoded.
func TestReadSwapManyValues(t *testing.T) {
	h := testHub(t, testPaths(t))
	dir, err := h.swapDir()
	require.NoError(t, err)
	for name, b := range map[string]string{
		"objects": `{"name":"objects","kept":[` + strings.Repeat(`{},`, 3<<20) + `{}]}`,
		"values":  `{"name":"values","names":[` + strings.Repeat(`"",`, 5<<20) + `""]}`,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), []byte(b), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pickle"), []byte("pickle"), 0o600))
		var rec *swapRecord
		n := allocated(func() { rec, err = h.readSwap(name) })
		assert.Less(t, n, uint64(100<<20), "bytes allocated to read %d MB", len(b)>>20)
		assert.True(t, rec == nil, "the record was decoded")
		var unsafe *UnsafeSwapError
		assert.True(t, errors.As(err, &unsafe), "%v", err)
	}
}
