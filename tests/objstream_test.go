package tests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// objMake builds, in a session, the objects that stream: a 100+ MB bytes,
// a bytearray, memoryviews (one of floats in two dimensions), a mix of
// small and large buffers with one big buffer twice, an object of a class
// that gives a PickleBuffer (as numpy arrays do), and numpy arrays where
// numpy loads; digest(x) is their fingerprint.
const objMake = `import hashlib, pickle
MB = 1 << 20
big = bytes(range(256)) * (110 * MB // 256)
ba = bytearray(b"x" * (24 * MB + 3))
mv = memoryview(bytearray(range(256)) * (12 * MB // 256))
fl = memoryview(bytearray(16 * MB)).cast("d", [1024, 2048])
shared = bytes(3 * MB)
mixed = {"small": [1, "two", b"three"], "tiny": b"t" * 100, "big": [shared, shared, bytearray(2 * MB + 1)], "n": 7}
class ZeroCopy(bytearray):
    def __reduce_ex__(self, protocol):
        if protocol >= 5:
            return type(self), (pickle.PickleBuffer(self),), None
        return type(self), (bytearray(self),), None
zc = ZeroCopy(b"z" * (5 * MB))
try:
    import numpy
    arr = numpy.arange(4 * MB, dtype="float64").reshape(2048, -1)
except ImportError:
    arr = None
def digest(x):
    h = hashlib.sha256()
    def walk(v):
        h.update(type(v).__name__.encode())
        if isinstance(v, dict):
            for k in sorted(v):
                h.update(k.encode()); walk(v[k])
        elif isinstance(v, list):
            for i in v: walk(i)
        elif isinstance(v, memoryview):
            h.update(("%s%s%s" % (v.format, v.shape, v.readonly)).encode()); h.update(v.tobytes())
        elif hasattr(v, "tobytes"):
            h.update(repr(v.shape).encode()); h.update(v.tobytes())
        elif isinstance(v, (bytes, bytearray)):
            h.update(bytes(v))
        else:
            h.update(repr(v).encode())
    walk(x)
    return h.hexdigest()
`

// objRoundTrip puts the objects into session "b" (opened from "a" with
// open), gets them back, and calls b with a big argument and a big
// value, checking each on arrival, and that they streamed.
func objRoundTrip(t *testing.T, e *hubtest.Env, open string) {
	t.Helper()
	ok(t, e.Run("exec", "b", objMake))
	ok(t, e.Run("exec", "a", objMake+"\nb = "+open))
	out := ok(t, e.Run("exec", "a", `names = dict(big=big, ba=ba, mv=mv, fl=fl, mixed=mixed, zc=zc, arr=arr)
b.put(**names)
want = {k: digest(v) for k, v in names.items()}
there = b.call(lambda ks: {k: digest(globals()[k]) for k in ks}, sorted(names))
back = dict(zip(sorted(names), b.get(*sorted(names))))
print("put", there == want, "get", {k: digest(v) for k, v in back.items()} == want)
print("types", type(back["zc"]).__name__, type(back["ba"]).__name__, back["fl"].format, back["fl"].shape)
r = b.call(lambda x: x + b"!", big)
print("call", r[-1:] == b"!" and r[:-1] == big, len(r))
from replhub_toolkit import objstream
s = objstream.STATS
print("streamed", s["sent"] >= 8, s["received"] >= 8, s["sent_bytes"] > 200 * MB)`))
	assert.Contains(t, out, "put True get True")
	assert.Contains(t, out, "types ZeroCopy bytearray d (1024, 2048)")
	assert.Contains(t, out, "call True 115343361")
	assert.Contains(t, out, "streamed True True True")
	// A session is free once it has served: no transfer left half done.
	out = ok(t, e.Run("exec", "b", `digest(big) == digest(bytes(range(256)) * (110 * MB // 256)), type(mixed["big"][0]), mixed["big"][0] is mixed["big"][1]`))
	assert.Contains(t, out, "(True, <class 'bytes'>, True)")
}

func TestObjectStreamLocal(t *testing.T) {
	needCloudpickle(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py(t, "3.12"))
	objRoundTrip(t, e, `session("b")`)
}

var _ = strings.Contains
var _ = require.Equal
