package hub

import (
	"bytes"
	"testing"

	"github.com/replhub/replhub/proto"
)

// The frame reader is busy with a frame (blocked on s.mu, or forwarding a
// chunk to a slow session) while the link drops and comes back: its next
// Read must not splice the new link's bytes onto the old link's half-read
// frame. Here the old link's last bytes are a whole out frame and the head
// of another; the new link starts with the held done frame.
func TestLinkReaderDoesNotSpliceLinks(t *testing.T) {
	p := &linkProc{changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	whole := []byte("{\"op\":\"out\",\"len\":3}\nabc")
	half := []byte("{\"op\":\"out\",\"len\":40}\nxyz") // 37 bytes never came
	p.r = bytes.NewReader(append(append([]byte(nil), whole...), half...))
	rd := proto.NewReader(linkReader{p})
	if _, err := rd.Read(); err != nil {
		t.Fatal(err)
	}
	// The link drops and comes back before the reader reads again.
	done := []byte("{\"op\":\"done\",\"cell\":7,\"status\":\"ok\",\"value\":\"1\",\"error\":null,\"duration\":0.1}\n")
	p.mu.Lock()
	p.r, p.gen = bytes.NewReader(done), p.gen+1
	p.mu.Unlock()
	m, err := rd.Read()
	if err == nil {
		if o, ok := m.(*proto.Out); ok {
			t.Fatalf("the new link's done frame was read as the rest of the old link's out frame: %q", o.Data)
		}
		if _, ok := m.(*proto.Done); !ok {
			t.Fatalf("read %T", m)
		}
	}
}

// swapAfterWrite is an old link whose write completes just as the link
// is replaced (down and up again) by the supervisor.
type swapAfterWrite struct {
	p   *linkProc
	got bytes.Buffer
	to  *bytes.Buffer
}

func (w *swapAfterWrite) Write(b []byte) (int, error) {
	w.got.Write(b)
	w.p.mu.Lock()
	w.p.w, w.p.gen = w.to, w.p.gen+1
	w.p.mu.Unlock()
	return len(b), nil
}

// A frame of more than 64 KiB is two writes; the second must not go to a
// link the first did not: the worker would read the payload as frames.
func TestLinkWriterDoesNotSpliceLinks(t *testing.T) {
	p := &linkProc{changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	var newLink bytes.Buffer
	old := &swapAfterWrite{p: p, to: &newLink}
	p.w = old
	payload := bytes.Repeat([]byte("{\"op\":\"exec\",\"cell\":99,\"code\":\"import os; os.system('id')\",\"fence\":\"f\"}\n"), 2000)
	err := proto.NewWriter(linkWriter{p}).Write(&proto.Reply{ID: 1, OK: true, Data: payload})
	if newLink.Len() > 0 {
		t.Fatalf("the new link got %d bytes of a frame whose header went to the old one (err %v); it begins %q",
			newLink.Len(), err, newLink.Bytes()[:80])
	}
}
