package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

// jsonNames are the JSON names of t's fields.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// A part added to wire.Reply must be added to replyLine, or the client
// would drop it unseen.
func TestReplyLineCoversReply(t *testing.T) {
	assert.ElementsMatch(t, jsonNames(reflect.TypeFor[wire.Reply]()), jsonNames(reflect.TypeFor[replyLine]()))
}

// A reply with every part set decodes as json.Unmarshal decodes it.
func TestDecodeReplyAsUnmarshal(t *testing.T) {
	v := "2"
	full := wire.Reply{V: wire.Version, Message: "m",
		Progress: &wire.Progress{Session: "s", Cell: 3, ElapsedMS: 40, Hosts: 2},
		Err:      &wire.Error{Code: wire.CodeBusy, Message: "busy"},
		Result: &wire.Result{Session: "s", Cell: 3, Status: wire.StatusOK, Value: &v, Notes: []string{"n"},
			Error: &wire.CellError{Type: "E"}, Created: &wire.SessionInfo{Name: "s", Pid: 7},
			Display: []wire.Display{{MIME: "image/png", Data: []byte("png")}},
			Fan:     []wire.HostResult{{Host: "h", Result: &wire.Result{Session: "s@h", Cell: 1}}}},
		Sessions: &wire.SessionList{Hub: wire.HubInfo{Pid: 1}, Sessions: []wire.SessionInfo{{Name: "a"}}},
		Stream:   &wire.Stream{Size: 10, Done: 5},
		Swaps:    []wire.SwapOutcome{{}},
		Answer:   &wire.Answer{},
		Event:    &wire.Event{},
	}
	for _, rep := range []wire.Reply{full, {V: wire.Version, Result: full.Result}, {V: 1, Err: full.Err}, {}} {
		line, err := json.Marshal(rep)
		require.NoError(t, err)
		var want wire.Reply
		require.NoError(t, json.Unmarshal(line, &want))
		got, err := decodeReply(line)
		require.NoError(t, err)
		assert.Equal(t, want, *got, "%s", line)
	}
	for _, line := range []string{`{"v":2,"result":null,"err":null}`, `{"V":2,"RESULT":{"cell":4}}`} {
		var want wire.Reply
		require.NoError(t, json.Unmarshal([]byte(line), &want))
		got, err := decodeReply([]byte(line))
		require.NoError(t, err)
		assert.Equal(t, want, *got, "%s", line)
	}
}

// Whatever the hub sends, decodeReply fails where json.Unmarshal into a
// wire.Reply fails, and agrees with it on a reply without repeated keys.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"v":2,"result":{"session":"s","cell":1,"status":"ok","value":"2","notes":null}}`))
	f.Add([]byte(`{"v":2,"err":{"code":"busy","message":"x"}}`))
	f.Add([]byte(`{"v":2,"progress":{"session":"s","cell":1},"result":5}`))
	f.Add([]byte(`{"v":2,"sessions":{"hub":{"pid":1},"sessions":[{"name":"a","queued":[{"cell":1}]}]}}`))
	f.Add([]byte(`{"v":"2"}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var want wire.Reply
		werr := json.Unmarshal(line, &want)
		got, err := decodeReply(line)
		if (werr == nil) != (err == nil) {
			t.Fatalf("%q: json.Unmarshal says %v, decodeReply %v", line, werr, err)
		}
		if err != nil || repeatsAKey(line) {
			return
		}
		if !reflect.DeepEqual(want, *got) {
			t.Fatalf("%q: json.Unmarshal gives %+v, decodeReply %+v", line, want, *got)
		}
	})
}

// repeatsAKey reports whether line's object repeats a key (in any case):
// json.Unmarshal merges the two into one part, decodeReply keeps the last,
// and no hub sends such a line.
func repeatsAKey(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return true
	}
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.Token()
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		k := strings.ToLower(tok.(string))
		if seen[k] {
			return true
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return true
		}
	}
	return false
}
