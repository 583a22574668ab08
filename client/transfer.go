package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/replhub/replhub/wire"
)

// Progress is told how many bytes of total have moved.
type Progress func(done, total int64)

// Push copies the local file src to dest in session name (dest as the
// session sees it). The file appears there whole or not at all.
func (c *Client) Push(ctx context.Context, name, src, dest string, progress Progress) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	if fi.IsDir() {
		return "", fmt.Errorf("client: %s is a folder: push one file at a time (tar it first)", src)
	}
	k, err := c.get(ctx)
	if err != nil {
		return "", err
	}
	defer k.c.Close()
	stop := context.AfterFunc(ctx, func() { k.c.Close() })
	defer stop()
	if err := wire.WriteRequest(k.c, &wire.Request{V: wire.Version, Op: wire.OpPush, Name: name, Path: dest,
		Stream: &wire.Stream{Size: fi.Size(), Mode: uint32(fi.Mode().Perm())}}); err != nil {
		return "", ErrHubGone
	}
	rep, err := readReply(k)
	if err != nil {
		return "", err
	}
	if rep.Stream == nil || !rep.Stream.Ready {
		return "", errors.New("client: the hub did not start the transfer")
	}
	// Acks and the final answer arrive on their own goroutine.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	acked := int64(-1)
	var final *wire.Reply
	var ferr error
	go func() {
		for {
			r, err := readReply(k)
			mu.Lock()
			if err != nil || r.Stream == nil {
				final, ferr = r, err
				if final == nil && ferr == nil {
					ferr = ErrHubGone
				}
				cond.Broadcast()
				mu.Unlock()
				return
			}
			if r.Stream.Ack && r.Stream.Seq > acked {
				acked = r.Stream.Seq
			}
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	// Reading the file overlaps with sending it: two buffers take turns.
	type chunk struct {
		b   []byte
		err error
	}
	chunks := make(chan chunk, 1)
	free := make(chan []byte, 2)
	free <- make([]byte, wire.ChunkSize)
	free <- make([]byte, wire.ChunkSize)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			var b []byte
			select {
			case b = <-free:
			case <-quit:
				return
			}
			n, err := io.ReadFull(f, b)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case chunks <- chunk{b[:n], err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var sent int64
	for seq := int64(0); ; seq++ {
		mu.Lock()
		for seq-acked > wire.Window && final == nil && ferr == nil {
			cond.Wait()
		}
		done := final != nil || ferr != nil
		mu.Unlock()
		if done {
			break
		}
		c := <-chunks
		if len(c.b) > 0 {
			if err := wire.WriteRequest(k.c, &wire.Request{V: wire.Version, Op: wire.OpStream, Stream: &wire.Stream{Seq: seq, Data: c.b}}); err != nil {
				break
			}
			sent += int64(len(c.b))
			if progress != nil {
				progress(sent, fi.Size())
			}
		}
		if c.err == io.EOF {
			wire.WriteRequest(k.c, &wire.Request{V: wire.Version, Op: wire.OpStream, Stream: &wire.Stream{Seq: seq + 1, EOF: true}})
			break
		}
		if c.err != nil {
			return "", fmt.Errorf("client: reading %s: %w", src, c.err)
		}
		free <- c.b[:cap(c.b)]
	}
	mu.Lock()
	for final == nil && ferr == nil {
		cond.Wait()
	}
	mu.Unlock()
	if ferr != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", ferr
	}
	return final.Message, nil
}

// Pull copies src in session name to the local file dest, whole or not at
// all: it fills dest.replhub-part (0600), fsyncs, renames and fsyncs the
// folder. Overwriting keeps dest's mode; a new file takes the source's.
func (c *Client) Pull(ctx context.Context, name, src, dest string, progress Progress) (string, error) {
	k, err := c.get(ctx)
	if err != nil {
		return "", err
	}
	defer k.c.Close()
	stop := context.AfterFunc(ctx, func() { k.c.Close() })
	defer stop()
	if err := wire.WriteRequest(k.c, &wire.Request{V: wire.Version, Op: wire.OpPull, Name: name, Path: src}); err != nil {
		return "", ErrHubGone
	}
	rep, err := readReply(k)
	if err != nil {
		return "", err
	}
	if rep.Stream == nil || !rep.Stream.Ready {
		return "", errors.New("client: the hub did not start the transfer")
	}
	total := rep.Stream.Size
	sink, err := NewSink(dest, os.FileMode(rep.Stream.Mode))
	if err != nil {
		return "", err
	}
	// Reading the next chunk overlaps with writing this one.
	type got1 struct {
		r   *wire.Reply
		err error
	}
	replies := make(chan got1, wire.Window)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			r, err := readReply(k)
			select {
			case replies <- got1{r, err}:
			case <-quit:
				return
			}
			if err != nil || r.Stream == nil || r.Stream.EOF {
				return
			}
		}
	}()
	var got int64
	for {
		g := <-replies
		r, err := g.r, g.err
		if err != nil {
			sink.Abort()
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", err
		}
		if r.Stream == nil {
			sink.Abort()
			return "", errors.New("client: the transfer ended early: " + r.Message)
		}
		if r.Stream.EOF {
			break
		}
		err = sink.Write(r.Stream.Data)
		got += int64(len(r.Stream.Data))
		wire.PutChunk(r.Stream.Data)
		if err != nil {
			sink.Abort()
			return "", err
		}
		if progress != nil {
			progress(got, total)
		}
		if err := wire.WriteRequest(k.c, &wire.Request{V: wire.Version, Op: wire.OpStream, Stream: &wire.Stream{Seq: r.Stream.Seq, Ack: true}}); err != nil {
			sink.Abort()
			return "", ErrHubGone
		}
	}
	if err := sink.Finish(); err != nil {
		return "", err
	}
	final, err := readReply(k)
	if err != nil {
		return "", err
	}
	return final.Message, nil
}

// readReply reads one reply line; an error reply is returned as error.
func readReply(k *conn) (*wire.Reply, error) {
	line, err := wire.ReadLine(k.r, wire.MaxLine)
	if err != nil {
		return nil, ErrHubGone
	}
	var rep wire.Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return nil, fmt.Errorf("client: malformed reply from hub: %v", err)
	}
	if rep.Len > 0 {
		data, err := wire.ReadData(k.r, rep.Len)
		if err != nil {
			return nil, ErrHubGone
		}
		if rep.Stream == nil {
			rep.Stream = &wire.Stream{}
		}
		rep.Stream.Data = data
	}
	if rep.Err != nil {
		return nil, rep.Err
	}
	return &rep, nil
}

// Sink writes a file whole or not at all (see Pull).
type Sink struct {
	target string
	part   string
	mode   os.FileMode
	f      *os.File
}

// NewSink starts writing dest; a symlink dest stays a link to the file it
// names, which is replaced.
func NewSink(dest string, mode os.FileMode) (*Sink, error) {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("client: %s is a folder: give the file's own path", dest)
	}
	target := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		target = real
	}
	s := &Sink{target: target, part: target + ".replhub-part", mode: mode}
	s.f, err = os.OpenFile(s.part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	s.f.Chmod(0o600)
	return s, nil
}

// Write appends p.
func (s *Sink) Write(p []byte) error {
	_, err := s.f.Write(p)
	return err
}

// Finish puts the file in place.
func (s *Sink) Finish() error {
	if err := s.f.Sync(); err != nil {
		s.Abort()
		return err
	}
	mode := s.mode.Perm()
	if fi, err := os.Stat(s.target); err == nil {
		mode = fi.Mode().Perm()
	}
	if mode == 0 {
		mode = 0o600
	}
	s.f.Chmod(mode)
	if err := s.f.Close(); err != nil {
		os.Remove(s.part)
		return err
	}
	if err := os.Rename(s.part, s.target); err != nil {
		os.Remove(s.part)
		return err
	}
	if d, err := os.Open(filepath.Dir(s.target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Abort removes the partial file.
func (s *Sink) Abort() {
	s.f.Close()
	os.Remove(s.part)
}
