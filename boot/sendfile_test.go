package boot

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worker's send_file keeps the frame stream whole: a file that gives
// fewer bytes than its frame promised (it shrank after the pull began)
// has the frame completed with zeros, and the sender is told why.
func TestSendFileKeepsFramesWhole(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	worker := filepath.Join(dir, "worker.py")
	require.NoError(t, os.WriteFile(worker, Worker, 0o600))
	script := `
import importlib.util, json, os, sys, threading
spec = importlib.util.spec_from_file_location("w", sys.argv[1])
w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)
path = os.path.join(sys.argv[2], "f.bin")
with open(path, "wb") as f:
    f.write(bytes(range(256)) * 4)
r, wfd = os.pipe()
chan = w.Channel(r, wfd)
got = []
t = threading.Thread(target=lambda: got.append(chan.recv())); t.start()
with open(path, "rb") as f:
    assert chan.send_file({"op": "chunk", "seq": 0}, f, 24, 1000)
t.join()
h, data = got.pop()
assert h == {"op": "chunk", "seq": 0, "len": 1000}, h
assert bytes(data) == (bytes(range(256)) * 4)[24:], "whole"
t = threading.Thread(target=lambda: got.append(chan.recv())); t.start()
with open(path, "rb") as f:
    try:
        chan.send_file({"op": "chunk", "seq": 1}, f, 1000, 100000)
        raise SystemExit("no error for a short file")
    except OSError as e:
        err = str(e)
t.join()
h, data = got.pop()
assert h["len"] == 100000 and len(data) == 100000, h
assert bytes(data[:24]) == (bytes(range(256)) * 4)[1000:] and not any(data[24:]), "padded with zeros"
print(err)
`
	out, err := exec.Command(py, "-c", script, worker, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "the file shrank while it was being sent")
}
