package payload

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/replhub/replhub/internal/atomicfile"
)

// A host keeps the payload's compiled code in its user's cache folder, so
// that a start there does not compile the worker again (boot.py, "the
// bytecode cache"). The table tells it under which name (ID, a digest of
// the sources it compiles) and the key of the MAC that each cache file
// carries: a host runs cached code only when it was made under this key,
// so a file that another user planted, a truncated one or one of another
// payload is compiled anew from the sources.
type bytecode struct {
	Key string `json:"key"`
	ID  string `json:"id"`
}

// sourcesID is the digest that names the compiled form of mods: every
// module that travels with its source, by name.
func sourcesID(mods map[string]Module) string {
	h := sha256.New()
	names := make([]string, 0, len(mods))
	for n, m := range mods {
		if !m.Late {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", n, len(mods[n].Src), btoi(mods[n].Pkg))
		h.Write([]byte(mods[n].Src))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

var keyState struct {
	mu   sync.Mutex
	file string
	key  []byte
}

// UseKeyFile makes the bytecode key the one kept in file (0600, made with
// a new random key when it is missing or damaged), so that the caches a
// host keeps serve the next hub too; without it a hub makes a key of its
// own, and each host compiles the payload once more for it. Call it before
// the first Build.
func UseKeyFile(file string) {
	keyState.mu.Lock()
	keyState.file, keyState.key = file, nil
	keyState.mu.Unlock()
}

// bytecodeKey is the key of the hosts' bytecode caches: 32 random bytes,
// read from the key file or made (and kept there, where it can be).
func bytecodeKey() []byte {
	keyState.mu.Lock()
	defer keyState.mu.Unlock()
	if keyState.key != nil {
		return keyState.key
	}
	if keyState.file != "" {
		if b := readKey(keyState.file); b != nil {
			keyState.key = b
			return b
		}
	}
	k := make([]byte, 32)
	rand.Read(k)
	keyState.key = k
	if keyState.file != "" {
		writeKey(keyState.file, k)
	}
	return k
}

// readKey is the key kept in file, or nil unless file is a regular file
// of 32 bytes, this user's and private: a link, a FIFO or a device there
// (which would hang the hub or fill its memory) is replaced, not read.
func readKey(file string) []byte {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() != 32 {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return nil
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil
	}
	return b
}

// writeKey writes k to file whole, or not at all: a hub that cannot keep
// it uses it for its own life.
func writeKey(file string, k []byte) {
	atomicfile.WriteFile(file, k, 0o600)
}
