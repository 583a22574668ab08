package hub

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

// A get's value: the target's First answer, with the sizes of the buffers
// its chunks fill, reaches the caller before those chunks, however late
// the relay gets to pass it on. Here the relay still waits for the serve
// frame's write to end when the target has answered and sent a chunk, as
// a target that answers at once may, on a loaded machine, before the
// goroutine that sent it the serve runs again. The caller's worker reads a
// chunk into the buffers that answer announced; one that comes first fits
// none ("a chunk that does not fit the buffers announced", seen in
// TestRelayStallGet under load). Both a single request (chunks queued) and
// a group's part (chunks written on the target's reader).
func TestFirstAnswerBeforeItsChunks(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   int64
	}{{"request", 5}, {"part", fanLinkID(5, 0)}} {
		t.Run(tc.name, func(t *testing.T) {
			h, from, _, targets := relayHub(t, "t%d", 1)
			target := h.sessions[targets[0]]
			caller := framesTo(t, from)
			served, g := gatedWorker(t, target) // the serve frame waits at the gate

			sid := sids.Load() + 1
			result := make(chan error, 1)
			go func() {
				_, err := h.relayServe(context.Background(), from, &proto.Req{ID: tc.id, Kind: "get", Target: target.name, Names: []string{"x"}, Oob: true})
				result <- err
			}()
			require.Eventually(t, func() bool { sink, _ := target.servingSinks(sid); return sink != nil },
				5*time.Second, time.Millisecond, "the serve's sinks are set")

			// On the target's reader: its First answer, then a chunk.
			target.onServed(&proto.Served{Sid: sid, OK: true, First: true, Py: "3.12", Bufs: []int64{16}, Data: []byte("pickle")})
			chunked := make(chan struct{})
			go func() {
				defer close(chunked)
				target.onChunk(&proto.Chunk{Sid: sid, Seq: 0, Data: []byte("0123456789abcdef")})
			}()
			select {
			case f := <-caller:
				t.Fatalf("the caller got a %s before the target's First answer went: %s", f.op, f.line)
			case <-time.After(200 * time.Millisecond):
			}

			close(g.open)
			require.Equal(t, "serve", nextFrame(t, served).op)
			f := nextFrame(t, caller)
			require.Equal(t, "reply", f.op, "the First answer comes first: %s", f.line)
			var r proto.Reply
			require.NoError(t, json.Unmarshal(f.line, &r))
			assert.Equal(t, tc.id, r.ID)
			assert.True(t, r.First)
			assert.Equal(t, []int64{16}, r.Bufs)
			f = nextFrame(t, caller)
			require.Equal(t, "chunk", f.op)
			var c proto.Chunk
			require.NoError(t, json.Unmarshal(f.line, &c))
			assert.Equal(t, tc.id, c.ID)
			assert.Equal(t, "0123456789abcdef", string(f.data))
			<-chunked

			target.onServed(&proto.Served{Sid: sid, OK: true})
			select {
			case err := <-result:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the get never ended")
			}
		})
	}
}
