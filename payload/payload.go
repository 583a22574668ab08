// Package payload builds the compressed bundle that a remote session's
// `python -c` stub reads from stdin: boot.py, a NUL byte, then a JSON module
// table holding the worker (and, where this machine has it, cloudpickle),
// all zlib-compressed, sent as a decimal length line and the bytes.
//
// It does not send anything; package remote does.
package payload

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/replhub/replhub/boot"
)

// Module is one Python module in the bundle.
type Module struct {
	Src string `json:"src"`
	Pkg bool   `json:"pkg,omitempty"`
}

// WorkerModule is the name the worker is imported under remotely.
const WorkerModule = "replhub_worker"

// Build returns the framed payload (length line + zlib bytes) for the
// worker and extra modules.
func Build(extra map[string]Module) ([]byte, error) {
	mods := map[string]Module{WorkerModule: {Src: string(boot.Worker)}}
	for k, v := range extra {
		mods[k] = v
	}
	table, err := json.Marshal(struct {
		Modules map[string]Module `json:"modules"`
		Main    string            `json:"main"`
	}{mods, WorkerModule})
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	w.Write(boot.Boot)
	w.Write([]byte{0})
	w.Write(table)
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	out := []byte(strconv.Itoa(z.Len()) + "\n")
	return append(out, z.Bytes()...), nil
}

var (
	once    sync.Once
	cached  []byte
	errOnce error
)

// Default is the payload with the standard modules, built once per process.
func Default() ([]byte, error) {
	once.Do(func() { cached, errOnce = Build(nil) })
	return cached, errOnce
}
