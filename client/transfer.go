package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/wire"
)

// Progress is told how many bytes of total have moved.
type Progress func(done, total int64)

// Push copies the local file src to dest in session name (dest as the
// session sees it). The file appears there whole or not at all. The hub,
// which runs as the same user on this machine, reads src itself: the bytes
// make no detour through this process.
func (c *Client) Push(ctx context.Context, name, src, dest string, progress Progress) (string, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: no such file here", src)
	}
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	if err := atomicfile.NotToPush(src, fi); err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	return c.transfer(ctx, wire.Request{Op: wire.OpPush, Name: name, Path: dest, Local: abs}, progress)
}

// Pull copies src in session name to the local file dest, whole or not at
// all: dest.replhub-part (0600) is filled, fsynced, renamed into place and
// the folder fsynced. Overwriting keeps dest's mode; a new file takes the
// source's. The hub writes dest itself.
func (c *Client) Pull(ctx context.Context, name, src, dest string, progress Progress) (string, error) {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	if fi, err := os.Stat(abs); err == nil {
		if err := atomicfile.NotToReplace(dest, fi); err != nil {
			return "", fmt.Errorf("client: %w", err)
		}
	}
	if dir := filepath.Dir(abs); !isDir(dir) {
		return "", fmt.Errorf("%s: its folder %s is not there: make it first (mkdir -p), or give another path", dest, dir)
	}
	return c.transfer(ctx, wire.Request{Op: wire.OpPull, Name: name, Path: src, Local: abs}, progress)
}

// isDir reports whether path is a folder (or a link to one).
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// transfer sends a push or pull and follows its progress to the end. A
// client that goes away stops the transfer: the hub sees its connection
// close.
func (c *Client) transfer(ctx context.Context, req wire.Request, progress Progress) (string, error) {
	k, err := c.get(ctx)
	if err != nil {
		return "", err
	}
	defer k.c.Close()
	stop := context.AfterFunc(ctx, func() { k.c.Close() })
	defer stop()
	req.V = wire.Version
	if err := wire.WriteRequest(k.c, req); err != nil {
		return "", ErrHubGone
	}
	for {
		line, err := wire.ReadLine(k.r, wire.MaxLine)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", ErrHubGone
		}
		var rep wire.Reply
		if err := json.Unmarshal(line, &rep); err != nil {
			return "", fmt.Errorf("client: malformed reply from hub: %v", err)
		}
		if rep.Err != nil {
			return "", rep.Err
		}
		if rep.Stream != nil {
			if progress != nil {
				progress(rep.Stream.Done, rep.Stream.Size)
			}
			continue
		}
		return rep.Message, nil
	}
}
