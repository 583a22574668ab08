"""Holds the worker's frame codec (_loads, _dumps) to json's, on frames
and on random and mangled text: the same value or the same refusal (a
ValueError), the same text out.  Usage: codec_diff.py WORKER_PY ROUNDS."""
import json
import random
import sys
import types

src = open(sys.argv[1]).read()
worker = types.ModuleType("replhub_worker")
worker.__file__ = sys.argv[1]
exec(compile(src, sys.argv[1], "exec"), worker.__dict__)
loads, dumps = worker._loads, worker._dumps
assert loads.__module__ != "json", "the worker's own codec is under test"
rng = random.Random(7)
ATOMS = [0, -1, 2 ** 63, 1.5, -0.0, 1e308, True, False, None, "", "a\"b\\c", "\x00\x1f\x7f",
         "\u00e9\u4e2d\U0001f600", "\ud800", "\n\t"]


def value(depth=0):
    k = rng.random()
    if depth > 3 or k < 0.5:
        return rng.choice(ATOMS)
    if k < 0.75:
        return [value(depth + 1) for _ in range(rng.randrange(4))]
    return dict((rng.choice(["op", "cell", "code", "len", "é", "", "\ud800"]), value(depth + 1))
                for _ in range(rng.randrange(4)))


def outcome(f, text):
    try:
        return ("ok", repr(f(text)))
    except ValueError:
        return ("refused", None)


def mangle(text):
    chars = list(text)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(3)
        i = rng.randrange(len(chars) + 1)
        if op == 0 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op == 1:
            chars.insert(i, rng.choice('{}[]",:0-.eE \\ntruefalsenull\u00e9'))
        elif chars:
            chars[min(i, len(chars) - 1)] = rng.choice('{}[]",: 1x')
    return "".join(chars)


rounds = int(sys.argv[2])
for text in ['{"op":"exec","cell":1,"code":"1+1","fence":"F"}', " {} \n", "[1,2]", "NaN", "-Infinity",
             '{"a":1}{"b":2}', "", "   ", '"\\ud800"', "1e400", "01", '{"a":1,}',
             '"', '"abc', '["', '{"a":"', '\\"']:
    assert outcome(loads, text) == outcome(json.loads, text), text
for _ in range(rounds):
    v = value()
    want = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    got = dumps(v)
    assert got == want, (v, got, want)
    for text in (want, mangle(want), mangle(want)):
        a, b = outcome(loads, text), outcome(json.loads, text)
        assert a == b, (text, a, b)
for bad in (object(), {1j: 1}, {(1,): 2}, float("nan")):
    try:
        want = ("ok", json.dumps(bad, separators=(",", ":"), ensure_ascii=False))
    except (TypeError, ValueError) as e:
        want = ("refused", type(e))
    try:
        got = ("ok", dumps(bad))
    except (TypeError, ValueError) as e:
        got = ("refused", type(e))
    assert got == want, (bad, got, want)
print("ok")
