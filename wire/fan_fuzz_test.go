package wire

import (
	"encoding/json"
	"testing"
)

// A result decoded from a file the hub wrote (a swap record, a hand-over)
// or from a reply renders, whatever it holds, on every surface: a host
// without its result, an error status without its exception.
func FuzzResultText(f *testing.F) {
	v := "'6.1'"
	for _, r := range []*Result{
		{Session: "s", Cell: 3, Status: StatusOK, Output: "hi\n", Value: &v, Notes: []string{"n"}},
		{Session: "s", Cell: 2, Status: StatusError, Error: &CellError{Type: "ZeroDivisionError", Message: "division by zero"}},
		{Session: "s", Cell: 2, Status: StatusDead, Death: "killed", Created: &SessionInfo{Name: "s", Host: "lab-1", Root: true}},
		{Session: "s", Cell: 1, Status: StatusOK, Display: []Display{{MIME: "image/png", Path: "/p.png"}, {MIME: "image/svg+xml", Text: "<svg/>"}, {MIME: "text/html", Text: "<b>x</b>"}}},
		{Session: "p", Cell: 4, Fan: []HostResult{hostOK("lab-1", "hi\n", v, 2), hostOK("lab-2", "", v, 5),
			{Host: "lab-4", Result: &Result{Session: "p@lab-4", Cell: 2, Status: StatusError, Error: &CellError{Type: "E", Message: "m"}}},
			{Host: "lab-5", Result: &Result{Session: "p@lab-5", Status: StatusRunning}, Connecting: true},
			{Host: "lab-31", Result: &Result{Session: "p@lab-31", Status: StatusFailed}, Failure: "session 'p@lab-31' did not start: refused"}}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"fan":[{}]}`))
	f.Add([]byte(`{"fan":[{"host":"h","status":"error"}]}`))
	f.Add([]byte(`{"status":"error","cell":-1,"duration_ms":-9223372036854775808}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Result
		if json.Unmarshal(b, &r) != nil {
			t.Skip()
		}
		for _, s := range []string{SurfaceCLI, SurfaceMCP, ""} {
			r.TextFor(s)
		}
		r.Plain()
		r.ExitCode()
		Worst(r.Fan)
	})
}
