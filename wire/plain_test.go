package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/lean"
)

// marshalled is what WriteRequest must write for req: json.Marshal's line
// and the password after it.
func marshalled(t *testing.T, req Request) []byte {
	t.Helper()
	req.PasswordLen = len(req.Password)
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return append(append(b, '\n'), req.Password...)
}

// lean.Request's fields are Request's of those names and types.
func TestLeanRequestIsRequestsFields(t *testing.T) {
	lt, rt := reflect.TypeFor[lean.Request](), reflect.TypeFor[Request]()
	for i := range lt.NumField() {
		lf := lt.Field(i)
		rf, ok := rt.FieldByName(lf.Name)
		require.True(t, ok, lf.Name)
		assert.Equal(t, rf.Type, lf.Type, lf.Name)
	}
}

// A plain request and one with any other field set both encode as
// json.Marshal encodes a Request.
func TestWriteRequestAsMarshal(t *testing.T) {
	base := Request{V: Version, Op: OpExec, Name: "s<&>", Code: "print('\u2028é')", Timeout: 30, Stream: true, Plain: true}
	reqs := []Request{base, {V: Version, Op: OpPing}, {}}
	rt := reflect.TypeFor[Request]()
	for i := range rt.NumField() {
		req := base
		f := reflect.ValueOf(&req).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 7)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1.5)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("Request.%s: a kind this test does not set (%s)", rt.Field(i).Name, f.Kind())
		}
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		var b bytes.Buffer
		require.NoError(t, WriteRequest(&b, req))
		assert.Equal(t, string(marshalled(t, req)), b.String())
	}
	_, ok := plain(&base)
	assert.True(t, ok, "a warm exec takes the plain path")
	query := Request{V: Version, Op: OpVars, Name: "s", Expr: "e", Text: "t", All: true, KeepImports: true, MaxOutput: 9,
		Limit: 5, Wait: 2.45e-7, Plain: true, JSON: true}
	_, ok = plain(&query)
	assert.True(t, ok, "so does a query")
	var b bytes.Buffer
	require.NoError(t, WriteRequest(&b, query))
	assert.Equal(t, string(marshalled(t, query)), b.String(), "every field of a query at once, in order")
	exec := Request{V: Version, Op: OpExec, Name: "s", Code: "c", Timeout: 5, NoWait: true, Queue: true, Python: "/p", Cwd: "/w",
		Env: []string{"A=1"}, Host: "lab", Sudo: true, Progress: true, MaxOutput: 3, Stream: true, Plain: true}
	_, ok = plain(&exec)
	assert.True(t, ok, "and an exec with what early sends")
	b.Reset()
	require.NoError(t, WriteRequest(&b, exec))
	assert.Equal(t, string(marshalled(t, exec)), b.String(), "every field of such an exec at once, in order")
	run := Request{V: Version, Op: OpExec, Name: "run-0123456789abcdef", Code: "c", Timeout: 5, Python: "/p", Cwd: "/w",
		Env: []string{"A=1"}, Host: "lab", Sudo: true, MaxOutput: 3, Private: true, Stream: true, Plain: true}
	_, ok = plain(&run)
	assert.True(t, ok, "and a run with what early sends")
	b.Reset()
	require.NoError(t, WriteRequest(&b, run))
	assert.Equal(t, string(marshalled(t, run)), b.String(), "every field of such a run at once, in order")
}

func FuzzWriteRequestAsMarshal(f *testing.F) {
	f.Add(2, "exec", "s", "1+1", 30.0, false, 0, 0)
	f.Add(2, "exec", "s\x00\b\f\u007f", "\"\\\r\t\u2028\U0001F600\xed\xa0\x80", 1e-7, false, 1, 100)
	f.Add(-1, "", "\xff", "<\u2029>", 1e21, true, 3, -7)
	f.Add(2, "vars", "s", "json.dumps", 2.45e-7, true, 5, 30) // a query's fields, all at once
	f.Add(2, "inspect", "s", "x", 600.0, false, 6, 0)
	f.Fuzz(func(t *testing.T, v int, op, name, code string, timeout float64, stream bool, cell, maxOutput int) {
		if v >= 0 {
			v = Version // the plain path takes only its own version
		}
		req := Request{V: v, Op: op, Name: name, Code: code, Timeout: timeout, Stream: stream, Plain: cell%2 == 1, JSON: cell%3 == 1, Cell: cell / 4, MaxOutput: maxOutput,
			NoWait: cell%5 == 1, Queue: cell%7 == 1}
		if cell%4 >= 2 {
			req.Cwd, req.Env = name+code, []string{code, name}
		}
		if cell%11 >= 5 { // a query's fields
			req.Expr, req.Text, req.All, req.KeepImports = code, name+code, cell%3 == 2, stream
			req.Limit, req.Wait = maxOutput/3, timeout/float64(cell%5+1)
			if cell%11 == 6 {
				req.Wait = -1
			}
		}
		want, err := json.Marshal(req)
		var b bytes.Buffer
		if got := WriteRequest(&b, req); err != nil || got != nil {
			if (err == nil) != (got == nil) {
				t.Fatalf("Marshal: %v, WriteRequest: %v", err, got)
			}
			return
		}
		if b.String() != string(want)+"\n" {
			t.Fatalf("%q, json.Marshal gives %q", b.String(), want)
		}
	})
}

func TestExitCode(t *testing.T) {
	for status, want := range map[string]int{StatusOK: 0, StatusError: 1, StatusRunning: 3, StatusTimeout: 3, StatusDead: 4, StatusFailed: 2, StatusIdle: 0} {
		assert.Equal(t, want, (&Result{Status: status}).ExitCode(), status)
	}
}

// IsZero looks at every part of a Reply: a part it missed would make the
// hub close the connection instead of answering with it.
func TestReplyIsZero(t *testing.T) {
	assert.True(t, (&Reply{}).IsZero())
	rt := reflect.TypeFor[Reply]()
	for i := range rt.NumField() {
		var r Reply
		f := reflect.ValueOf(&r).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int:
			f.SetInt(1)
		case reflect.String:
			f.SetString("x")
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		default:
			t.Fatalf("Reply.%s: a kind this test does not set (%s)", rt.Field(i).Name, f.Kind())
		}
		assert.False(t, r.IsZero(), "Reply.%s set", rt.Field(i).Name)
	}
}

// PlainJSON is the result as --json prints it, where Plain would be given;
// none where printing takes more, or the text would be too long to send
// in a reply's line once escaped.
func TestPlainJSON(t *testing.T) {
	v := "2"
	r := &Result{Session: "s", Cell: 3, Status: StatusError, Output: "<a>\n", Value: &v}
	var want bytes.Buffer
	require.NoError(t, r.WriteJSON(&want))
	assert.Contains(t, want.String(), "\n  \"notes\": []\n")
	assert.Nil(t, r.Notes, "r is left as it was")
	p := r.PlainJSON()
	require.NotNil(t, p)
	assert.Equal(t, Plain{Exit: ExitCellError, Text: want.String()}, *p)
	assert.Contains(t, p.Text, "\n  \"session\": \"s\",\n")

	assert.Nil(t, (&Result{Display: []Display{{MIME: "image/png"}}}).PlainJSON())
	assert.Nil(t, (&Result{Fan: []HostResult{}}).PlainJSON())
	assert.Nil(t, (&Result{Output: strings.Repeat("x", maxPlainJSON)}).PlainJSON())
	assert.NotNil(t, (&Result{Output: strings.Repeat("x", maxPlainJSON/2)}).PlainJSON())

	// As the command line prints what it read from a reply: a byte that is
	// not UTF-8 is the character U+FFFD, not its escape.
	bad := &Result{Session: "s", Output: "a\xffb", Notes: []string{`\ufffd`}}
	var line bytes.Buffer
	require.NoError(t, Write(&line, Reply{V: Version, Result: bad}))
	var rep Reply
	require.NoError(t, json.Unmarshal(line.Bytes(), &rep))
	want.Reset()
	require.NoError(t, WriteJSON(&want, rep.Result))
	p = bad.PlainJSON()
	require.NotNil(t, p)
	assert.Equal(t, want.String(), p.Text)
	assert.Contains(t, p.Text, "a\uFFFDb")
}

// A list goes plainly as `replhub sessions [NAME] [--json]` prints it
// after reading it from a reply, and not at all for a name it lacks;
// either way the hub's list is left as it was.
func TestSessionListPlain(t *testing.T) {
	l := &SessionList{Sessions: []SessionInfo{{Name: "a", State: "idle", Python: "3.12"}, {Name: "lab@h1", State: "idle"}, {Name: "lab@h2", State: "running"}},
		Dead: []DeadInfo{{Name: "gone", Note: "it died"}}}
	whole := *l
	whole.Sessions = append([]SessionInfo(nil), l.Sessions...)

	p := l.Plain("", false)
	require.NotNil(t, p)
	assert.Equal(t, Plain{Exit: ExitOK, Text: l.Text(false)}, *p)
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, l))
	assert.Equal(t, b.String(), l.Plain("", true).Text)

	lab := &SessionList{Sessions: whole.Sessions[1:]}
	assert.Equal(t, lab.Text(true), l.Plain("lab", false).Text, "a group's sessions, in detail")
	assert.Nil(t, l.Plain("nosuch", false), "the command line says there is none")
	assert.Nil(t, l.Plain("nosuch", true))
	assert.Equal(t, whole, *l)
}

// An answer's Plain is what the CLI prints of it as it reads it back from
// a reply: its text or its JSON, with exit 1 for one that says why it has
// none; a string that is not UTF-8 prints as the reply carries it.
func TestAnswerPlain(t *testing.T) {
	a := &Answer{Session: "s", Kind: OpVars, Findings: Findings{Vars: []Var{{Name: "x\xff", Type: "int", Repr: "1"}}}}
	var back Answer
	b, err := json.Marshal(a)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	var js strings.Builder
	require.NoError(t, WriteJSON(&js, &back))
	assert.Equal(t, &Plain{Text: back.Text()}, a.Plain(false))
	assert.Contains(t, a.Plain(false).Text, "x\ufffd")
	assert.Equal(t, &Plain{Text: js.String()}, a.Plain(true))
	a.Error = "evaluating it raised NameError"
	assert.Equal(t, ExitCellError, a.Plain(false).Exit)
	assert.Equal(t, ExitCellError, a.Plain(true).Exit)
	big := &Answer{Session: "s", Kind: OpVars, Findings: Findings{Vars: []Var{{Name: strings.Repeat("\n", maxPlainJSON/2)}}}}
	assert.Nil(t, big.Plain(true), "too long for a reply's line")
}
