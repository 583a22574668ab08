package client

import (
	"bytes"
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

// The raw parts of resultLine hide fields of wire.Result's: a name that
// matched none would leave that field out of every result.
func TestResultLineHidesResultsParts(t *testing.T) {
	names := jsonNames(reflect.TypeFor[wire.Result]())
	own := jsonNames(reflect.TypeFor[resultLine]())[1:] // after the embedded Result
	require.NotEmpty(t, own)
	for _, n := range own {
		assert.Contains(t, names, n)
	}
}

// A reply with every part set decodes as json.Unmarshal decodes it.
func TestDecodeReplyAsUnmarshal(t *testing.T) {
	v := "2"
	full := wire.Reply{V: wire.Version, Message: "m", Plain: &wire.Plain{Exit: 1, Text: "t"},
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
	// Every part is set, and every part of a result that resultLine
	// holds raw, so that one decodeReply forgets to copy fails below.
	rv := reflect.ValueOf(full)
	for i := range rv.NumField() {
		assert.False(t, rv.Field(i).IsZero(), "full sets Reply.%s", rv.Type().Field(i).Name)
	}
	res := reflect.ValueOf(*full.Result)
	for _, n := range jsonNames(reflect.TypeFor[resultLine]())[1:] {
		for i := range res.NumField() {
			if name, _, _ := strings.Cut(res.Type().Field(i).Tag.Get("json"), ","); name == n {
				assert.False(t, res.Field(i).IsZero(), "full sets Result.%s", res.Type().Field(i).Name)
			}
		}
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
	for _, line := range []string{`{"v":2,"result":null,"err":null}`, `{"V":2,"RESULT":{"cell":4,"Fan":null,"DISPLAY":[{"mime":"x"}]}}`,
		`{"v":2,"result":{"created":null,"fan":[{"host":"h","result":null}]}}`} {
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
	f.Add([]byte(`{"v":2,"result":{"created":{"name":"s","queued":[{"cell":1}]},"display":[{"mime":"image/png","data":"cG5n"}],"fan":[{"host":"h","result":{"cell":2}}]}}`))
	f.Add([]byte(`{"v":2,"result":{"fan":5}}`))
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

// repeatsAKey reports whether line's object, or the result in it, repeats
// a key (in any case): json.Unmarshal merges the two into one part,
// decodeReply keeps the last, and no hub sends such a line.
func repeatsAKey(line []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		k := strings.ToLower(strings.ToUpper(tok.(string))) // as json folds a name
		if seen[k] {
			return true
		}
		seen[k] = true
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return true
		}
		if k == "result" && repeatsAKey(v) {
			return true
		}
	}
	return false
}
