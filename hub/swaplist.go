package hub

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/wire"
)

// swapListing keeps the list's line of each swap on disk, with what its
// two files were (fileKey) when it was read: a list reads and checks a
// record again only when either file changed. Read and checked at every
// list, each swap cost it about 45 µs and 11 system calls.
type swapListing struct {
	mu    sync.Mutex
	lines map[string]swapLine
	// epoch counts the swaps written and removed: a line read before one
	// is not kept (a file system that keeps whole seconds, or reuses an
	// inode, may give a new swap the key of the one it replaced).
	epoch uint64
}

type swapLine struct {
	record, pickle fileKey
	info           wire.SwappedInfo // Expires aside: the config may change
}

// fileKey is what a file is, as far as a list can tell without reading
// it: its identity, size, time, mode and owner.
type fileKey struct {
	dev, ino    uint64
	size, mtime int64
	mode        os.FileMode
	uid         uint32
}

// keyOf is path's fileKey, not following a link; false without one.
func keyOf(path string) (fileKey, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino), fi.Size(), fi.ModTime().UnixNano(), fi.Mode(), st.Uid}, true
}

// listSwapped describes the swaps on disk. A record that cannot be read,
// or a swap folder that is not safe, is read again at every list, and says
// why in its cwd.
func (h *Hub) listSwapped() []wire.SwappedInfo {
	names := h.swappedNames()
	if len(names) == 0 {
		h.swapList.forget(nil)
		return nil
	}
	cfg, _ := config.Load(h.paths.ConfigFile())
	_, dirErr := h.swapDir() // once for all: readSwap checks it for each
	var out []wire.SwappedInfo
	seen := map[string]bool{}
	for _, name := range names {
		seen[name] = true
		info := h.swapLineOf(name, dirErr == nil)
		if cfg != nil && cfg.SwapKeep() > 0 && !info.When.IsZero() {
			info.Expires = info.When.Add(cfg.SwapKeep())
		}
		out = append(out, info)
	}
	h.swapList.forget(seen)
	return out
}

// swappedNames lists the names of the swaps on disk from the folder's
// entries alone: which sessions a group's name stands for needs no record
// read, where listSwapped, which starts from these names, stats both
// files of each and reads a record it has not seen.
func (h *Hub) swappedNames() []string {
	ents, _ := os.ReadDir(h.paths.SwapDir())
	var names []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && checkName(name) == nil {
			names = append(names, name)
		}
	}
	return names
}

// swapLineOf is name's line in the list: the one kept, when cached and
// neither file changed since.
func (h *Hub) swapLineOf(name string, cached bool) wire.SwappedInfo {
	pickle, record := h.swapPaths(name)
	epoch := h.swapList.now()
	rk, rok := keyOf(record)
	pk, pok := keyOf(pickle)
	keyed := cached && rok && pok
	if keyed {
		if l, ok := h.swapList.get(name); ok && l.record == rk && l.pickle == pk {
			return l.info
		}
	}
	info := wire.SwappedInfo{Name: name, Host: "?", Python: "?", Cwd: "?"}
	rec, err := h.readSwap(name)
	switch {
	case rec != nil:
		info = wire.SwappedInfo{Name: name, Host: rec.Host, Route: rec.Route, Python: rec.Python, Cwd: rec.Cwd,
			When: rec.When, Cells: rec.Cells, Bytes: rec.Bytes, Names: rec.Names, Path: pickle,
			Unread: rec.Output != "" || rec.Result != nil || len(rec.Kept) > 0}
		if keyed {
			h.swapList.put(name, swapLine{rk, pk, info}, epoch)
		}
	case err != nil:
		info.Cwd = err.Error()
	}
	return info
}

func (l *swapListing) get(name string) (swapLine, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line, ok := l.lines[name]
	return line, ok
}

func (l *swapListing) now() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// put keeps name's line, read since epoch, unless a swap was written or
// removed meanwhile.
func (l *swapListing) put(name string, line swapLine, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch {
		return
	}
	if l.lines == nil {
		l.lines = map[string]swapLine{}
	}
	l.lines[name] = line
}

// changed drops name's line: its swap is being written or removed.
func (l *swapListing) changed(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	delete(l.lines, name)
}

// forget drops the lines of swaps not in keep (all, for nil).
func (l *swapListing) forget(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range l.lines {
		if !keep[name] {
			delete(l.lines, name)
		}
	}
}
