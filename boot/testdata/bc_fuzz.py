"""Fuzzes boot.py's bytecode cache reader: a file written by _write_cache,
then truncated, extended, or with bytes changed, is read back as exactly
what was written or refused (None), never as anything else and never
with an exception.  Usage: bc_fuzz.py BOOT_PY DIR ROUNDS."""
import os
import random
import sys

src = open(sys.argv[1]).read()
tail = "run(PAYLOAD)"
assert src.rstrip().splitlines()[-1].startswith(tail)
boot = {"__name__": "boot_under_test"}
exec(compile(src[:src.rindex(tail)], sys.argv[1], "exec"), boot)
d = os.path.join(sys.argv[2], "replhub")
path = os.path.join(d, "x.bc")
key, ident, magic = b"k" * 32, "id1", b"MAGC"
codes = {"m": compile("x = 1\n", "<m>", "exec"), "n": compile("def f(): return 2\n", "<n>", "exec")}
assert boot["_write_cache"](path, key, ident, magic, codes) == ""
good = open(path, "rb").read()
got, why = boot["_read_cache"](path, key, ident, magic)
assert why == "" and sorted(got) == ["m", "n"], why
assert boot["_read_cache"](path, b"K" * 32, ident, magic)[0] is None, "another key"
assert boot["_read_cache"](path, key, "id2", magic)[0] is None, "another payload"
assert boot["_read_cache"](path, key, ident, b"MAGD")[0] is None, "another Python"
rng = random.Random(11)
for _ in range(int(sys.argv[3])):
    b = bytearray(good)
    how = rng.randrange(4)
    if how == 0:
        b = b[:rng.randrange(len(b))]
    elif how == 1:
        b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    elif how == 2:
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    else:
        i = rng.randrange(len(b))
        b[i:i] = b[rng.randrange(len(b)):][:rng.randrange(1, 64)]
    with open(path, "wb") as f:
        f.write(bytes(b))
    got, why = boot["_read_cache"](path, key, ident, magic)
    if bytes(b) == good:
        assert got is not None
    else:
        assert got is None and why == "cache failed its check", (how, why)

# What older payloads left is pruned at the next write; the rest stays.
old, new = os.path.join(d, "old.bc"), os.path.join(d, "new.bc")
for p in (old, new):
    open(p, "wb").close()
os.utime(old, (0, 0))
assert boot["_write_cache"](path, key, ident, magic, codes) == ""
assert sorted(os.listdir(d)) == ["new.bc", "x.bc"], os.listdir(d)
print("ok")
