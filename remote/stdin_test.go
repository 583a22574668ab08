package remote

import (
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// eofFlag writes like an ssh channel: Close sets a flag that Write reads
// without a lock, so under -race a Close beside a Write is reported.
type eofFlag struct {
	sentEOF bool
	closes  int
	block   chan struct{} // when set, Write waits on it
}

func (f *eofFlag) Write(b []byte) (int, error) {
	if f.block != nil {
		<-f.block
	}
	if f.sentEOF {
		return 0, io.EOF
	}
	return len(b), nil
}

func (f *eofFlag) Close() error {
	f.sentEOF = true
	f.closes++
	return nil
}

// A Close while a write is under way returns at once and leaves the
// stream to the channel's close; an idle one closes it.
func TestChannelStdinCloseNeverMeetsAWrite(t *testing.T) {
	f := &eofFlag{block: make(chan struct{})}
	c := &channelStdin{w: f}
	wrote := make(chan struct{})
	go func() {
		c.Write([]byte("frame"))
		close(wrote)
	}()
	time.Sleep(50 * time.Millisecond) // the write is blocked
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a blocked write")
	}
	close(f.block)
	<-wrote
	assert.Equal(t, 0, f.closes, "not closed beside a write")

	f.block = nil
	assert.NoError(t, c.Close())
	assert.Equal(t, 1, f.closes)
	_, err := c.Write([]byte("late"))
	assert.ErrorIs(t, err, io.EOF)

	// Many at once: -race reports the flag if they ever overlap.
	for range 50 {
		f := &eofFlag{}
		c := &channelStdin{w: f}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.Write([]byte("x")) }()
		go func() { defer wg.Done(); c.Close() }()
		wg.Wait()
	}
}
