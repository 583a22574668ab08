package hub

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// A push from the command line to a session that stops reading its stdin
// (stopped, or stuck in C code) fails after relayStall and says why,
// instead of holding the client for ever; the session stays busy until
// it says its last word, and is free after it.
func TestClientPushToAStoppedSession(t *testing.T) {
	shortStall(t, 500*time.Millisecond)
	h := reachHub(t, map[string]string{"web": "lab-7"})
	target := h.sessions["web"]
	frames, g := gatedWorker(t, target)
	g.let.Store(4 << 10) // the serve frame goes, no chunk after it

	local := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(local)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(3*proto.ChunkSize))
	f.Close()

	clientGone := make(chan struct{})
	t.Cleanup(func() { close(clientGone) })
	next := func() (*wire.Request, bool) {
		<-clientGone
		return nil, false
	}
	replies := make(chan wire.Reply, 1)
	go func() {
		replies <- h.clientTransfer(wire.Request{Op: wire.OpPush, Name: "web", Local: local, Path: "/tmp/big"}, next,
			func(wire.Reply) error { return nil })
	}()
	var sv proto.Serve
	require.NoError(t, json.Unmarshal(nextFrame(t, frames).line, &sv))
	require.Equal(t, "write", sv.Kind)
	target.onServed(&proto.Served{Sid: sv.Sid, OK: true})

	select {
	case r := <-replies:
		require.NotNil(t, r.Err)
		assert.Equal(t, wire.CodeBusy, r.Err.Code)
		assert.Contains(t, r.Err.Message, "session 'web' took none of the push's data for 0.5s: is it stopped")
	case <-time.After(relayStall + 10*time.Second):
		t.Fatal("the push waits on the stopped session")
	}
	assert.Contains(t, busyWith(target), "serving a write", "busy until its last word")
	target.onServed(&proto.Served{Sid: sv.Sid, Error: "cancelled"})
	require.Eventually(t, func() bool { return busyWith(target) == "" }, 5*time.Second, time.Millisecond)
}

// A pull whose target never answers the serve (it reads its stdin no
// more) fails after relayStall and says why; one whose client goes away
// first ends at once. Either way the target stays busy until it answers.
func TestClientPullUnanswered(t *testing.T) {
	shortStall(t, 500*time.Millisecond)
	for _, leave := range []bool{false, true} {
		if leave {
			relayStall = time.Minute // what ends the pull is the client
		}
		h := reachHub(t, map[string]string{"web": "lab-7"})
		target := h.sessions["web"]
		frames := framesTo(t, target)
		clientGone := make(chan struct{})
		next := func() (*wire.Request, bool) {
			<-clientGone
			return nil, false
		}
		replies := make(chan wire.Reply, 1)
		t0 := time.Now()
		go func() {
			replies <- h.clientTransfer(wire.Request{Op: wire.OpPull, Name: "web", Local: filepath.Join(t.TempDir(), "x"), Path: "/etc/hostname"}, next,
				func(wire.Reply) error { return nil })
		}()
		var sv proto.Serve
		require.NoError(t, json.Unmarshal(nextFrame(t, frames).line, &sv))
		if leave {
			close(clientGone)
		}
		select {
		case r := <-replies:
			require.NotNil(t, r.Err)
			if leave {
				assert.Less(t, time.Since(t0), 30*time.Second, "the client left: the pull ends at once")
				assert.Contains(t, r.Err.Message, "the client went away")
			} else {
				close(clientGone)
				assert.Contains(t, r.Err.Message, "session 'web' did not answer the pull for 0.5s: is it stopped")
			}
		case <-time.After(40 * time.Second):
			t.Fatal("the pull waits on the silent session")
		}
		assert.Equal(t, "cancel", nextFrame(t, frames).op, "the target is told to stop")
		target.onServed(&proto.Served{Sid: sv.Sid, Error: "cancelled"})
		require.Eventually(t, func() bool { return busyWith(target) == "" }, 5*time.Second, time.Millisecond)
	}
}

// A pull says the bytes it wrote: a file whose size says nothing (/proc's,
// announced as 0), or one that grew while it was read, gives more than
// announced. One that ends short of what was announced is not whole: the
// pull fails and leaves no file.
func TestClientPullSize(t *testing.T) {
	for _, c := range []struct {
		announced int64
		sent      int
		want      string
	}{
		{0, 1409, "pulled 1409 bytes from session 'web'"},
		{5, 10, "pulled 10 bytes from session 'web'"},
		{10, 10, "pulled 10 bytes from session 'web'"},
		{100, 10, "session 'web' sent 10 of the 100 bytes of /proc/x that it announced (did the file shrink meanwhile?); the pull is stopped"},
	} {
		h := reachHub(t, map[string]string{"web": "lab-7"})
		target := h.sessions["web"]
		frames := framesTo(t, target)
		local := filepath.Join(t.TempDir(), "x")
		clientGone := make(chan struct{})
		t.Cleanup(func() { close(clientGone) })
		replies := make(chan wire.Reply, 1)
		go func() {
			replies <- h.clientTransfer(wire.Request{Op: wire.OpPull, Name: "web", Local: local, Path: "/proc/x"},
				func() (*wire.Request, bool) { <-clientGone; return nil, false }, func(wire.Reply) error { return nil })
		}()
		var sv proto.Serve
		require.NoError(t, json.Unmarshal(nextFrame(t, frames).line, &sv))
		go func() { // the acks
			for range frames {
			}
		}()
		target.onServed(&proto.Served{Sid: sv.Sid, OK: true, First: true, Size: c.announced, Mode: 0o644})
		target.onChunk(&proto.Chunk{Sid: sv.Sid, Seq: 0, Data: make([]byte, c.sent)})
		target.onChunk(&proto.Chunk{Sid: sv.Sid, Seq: 1, EOF: true})
		target.onServed(&proto.Served{Sid: sv.Sid, OK: true})
		select {
		case r := <-replies:
			fi, err := os.Stat(local)
			if c.sent < int(c.announced) {
				require.NotNil(t, r.Err)
				assert.Equal(t, c.want, r.Err.Message)
				assert.True(t, os.IsNotExist(err), "no file")
			} else {
				require.Nil(t, r.Err)
				assert.Contains(t, r.Message, c.want)
				require.NoError(t, err)
				assert.Equal(t, int64(c.sent), fi.Size())
			}
			_, err = os.Stat(local + ".replhub-part")
			assert.True(t, os.IsNotExist(err), "no partial file")
		case <-time.After(10 * time.Second):
			t.Fatal("the pull never ended")
		}
	}
}

// A transfer with no path in the session is refused before the session
// is asked for anything.
func TestClientTransferEmptyPath(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	for _, op := range []string{wire.OpPull, wire.OpPush} {
		r := h.clientTransfer(wire.Request{Op: op, Name: "web", Local: filepath.Join(t.TempDir(), "x")},
			func() (*wire.Request, bool) { return nil, false }, func(wire.Reply) error { return nil })
		require.NotNil(t, r.Err, op)
		assert.Equal(t, "hub: a transfer needs the path of the file in the session: it is empty", r.Err.Message)
		assert.Empty(t, busyWith(h.sessions["web"]))
	}
}

// A push's local file that became a FIFO after the client looked does not
// block the hub's open; it is refused, saying what it is.
func TestOpenToPushRefusesAFifo(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "ff"), filepath.Join(dir, "f")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	done := make(chan error, 1)
	go func() {
		_, _, err := openToPush(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Equal(t, fifo+" is a named pipe, not a regular file: push copies regular files only", err.Error())
	case <-time.After(10 * time.Second):
		t.Fatal("the open blocks on the FIFO")
	}
	f, fi, err := openToPush(file)
	if err == nil {
		defer f.Close()
		assert.True(t, fi.Mode().IsRegular())
		_, err = f.Read(make([]byte, 1))
	}
	require.NoError(t, err)
}

// A small file is read whole before its push, and the size told is what
// it held: a sysfs file says 4096 bytes for a line. One that holds more
// than smallWhole is read from its start, its size a floor.
func TestWholeIfSmall(t *testing.T) {
	read := func(path string, size int64) (string, int64) {
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		r, n, err := wholeIfSmall(f, size, nil)
		require.NoError(t, err)
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		return string(b), n
	}
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	require.NoError(t, os.WriteFile(small, []byte("hi\n"), 0o600))
	b, n := read(small, 3)
	assert.Equal(t, "hi\n", b)
	assert.EqualValues(t, 3, n)

	big := filepath.Join(dir, "big")
	data := bytes.Repeat([]byte("x"), smallWhole+10)
	require.NoError(t, os.WriteFile(big, data, 0o600))
	b, n = read(big, 100) // it grew since its size was read
	assert.Equal(t, len(data), len(b), "read from its start")
	assert.EqualValues(t, 100, n)
	b, n = read(big, int64(len(data)))
	assert.Equal(t, len(data), len(b))
	assert.EqualValues(t, len(data), n)
	b, n = read("/proc/self/status", 0)
	assert.Contains(t, b, "VmRSS")
	assert.Zero(t, n, "a size that says nothing")

	const sysfs = "/sys/class/net/lo/address"
	want, err := os.ReadFile(sysfs)
	require.NoError(t, err)
	fi, err := os.Stat(sysfs)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(len(want)), "sysfs's size says more than it holds")
	b, n = read(sysfs, fi.Size())
	assert.Equal(t, string(want), b)
	assert.EqualValues(t, len(want), n)
}

// A push's small file is read whole before the transfer; one that waits
// for what it gives (here a pipe, which the poller waits for as it does
// for /proc/kmsg) holds that read only until its client goes: the file is
// closed then, and the read ends.
func TestSmallFileThatWaitsEndsWithItsClient(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	gone := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := wholeIfSmall(r, 10, gone)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the read ended before the client went: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gone)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, os.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the read of a small file that waits did not end when its client went")
	}

	// A file that gives its bytes is read whole, and left open.
	r, w, err = os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	w.Write([]byte("hi\n"))
	w.Close()
	in, n, err := wholeIfSmall(r, 10, make(chan struct{}))
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	b, _ := io.ReadAll(in)
	assert.Equal(t, "hi\n", string(b))
	_, err = r.Stat()
	assert.NoError(t, err, "the file was closed")
}
