package proto

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonKeys lists the JSON keys of a frame type, its Head's included.
func jsonKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			for k := range jsonKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// The Python that travels writes only keys its frames' Go types have, and
// reads only keys some frame of the hub's has: a misspelt key on either
// side fails here. The keys are read from the Python source by
// testdata/pykeys.py.
func TestPythonKeys(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	sources, _ := filepath.Glob("../boot/*.py")
	more, _ := filepath.Glob("../boot/*/*.py")
	sources = append(sources, more...)
	require.NotEmpty(t, sources)
	out, err := exec.Command(py, append([]string{"testdata/pykeys.py"}, sources...)...).Output()
	require.NoError(t, err)
	var keys struct {
		Sent map[string][]string `json:"sent"`
		Read []string            `json:"read"`
	}
	require.NoError(t, json.Unmarshal(out, &keys))

	for op, ks := range keys.Sent {
		mk, ok := fromWorker[op]
		if !assert.True(t, ok, "the worker sends op %q, which the hub does not take", op) {
			continue
		}
		have := jsonKeys(reflect.TypeOf(mk()).Elem())
		for _, k := range ks {
			assert.True(t, have[k], "the worker's %q frame has key %q, which proto.%T lacks", op, k, mk())
		}
	}
	hubKeys := map[string]bool{}
	for _, mk := range fromHub {
		for k := range jsonKeys(reflect.TypeOf(mk()).Elem()) {
			hubKeys[k] = true
		}
	}
	for _, k := range keys.Read {
		assert.True(t, hubKeys[k], "the worker reads key %q, which no frame of the hub's has", k)
	}
	// The extraction found the frames it must: this test cannot pass on
	// an empty reading.
	for _, op := range []string{OpDone, OpReq, OpServed, OpChunk, OpAck} {
		assert.Contains(t, keys.Sent, op)
	}
	sort.Strings(keys.Read)
	for _, k := range []string{"code", "fence", "cell", "sid", "seq", "kind"} {
		assert.Contains(t, keys.Read, k)
	}
}
