package cmdenv

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

// Resume prints what package early handed on as the whole call would:
// a plain result, a full one, the hub's error, the hub gone.
func TestResume(t *testing.T) {
	line := func(rep wire.Reply) []byte {
		var b bytes.Buffer
		rep.V = wire.Version
		require.NoError(t, wire.Write(&b, rep))
		return b.Bytes()
	}
	for _, tc := range []struct {
		name     string
		line     []byte
		out, err string
		code     int
	}{
		{"plain", line(wire.Reply{Plain: &wire.Plain{Exit: 3, Text: "T\n"}}), "T\n", "", ExitRunning},
		{"result", line(wire.Reply{Result: &wire.Result{Session: "s", Cell: 2, Status: wire.StatusError, Output: "boom\n"}}), "boom\n", "", ExitCellError},
		{"error", line(wire.Reply{Err: &wire.Error{Code: wire.CodeBusy, Message: "session 's' is busy"}}), "", "replhub: session 's' is busy\n", ExitFailure},
		{"gone", nil, "", "replhub: " + ErrorText(client.ErrHubGone) + "\n", ExitFailure},
		{"garbled", []byte("{\n"), "", "replhub: client: malformed reply from hub", ExitFailure},
	} {
		var out, errb bytes.Buffer
		e := New(IO{Out: &out, Err: &errb}, func(string) string { return "" })
		code := e.Finish(e.Resume(context.Background(), "s", "1", 30, false, tc.line))
		assert.Equal(t, tc.code, code, tc.name)
		assert.Equal(t, tc.out, out.String(), tc.name)
		assert.Contains(t, errb.String(), tc.err, tc.name)
		if tc.err == "" {
			assert.Empty(t, errb.String(), tc.name)
		}
	}
}
