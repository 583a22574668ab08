"""Holds what the worker's Sigint does with a SIGINT that Session._nudge
sent again: the first raises KeyboardInterrupt, as any interrupt; one that
comes once that was raised, while no interrupt is awaited, is dropped, and
only one; a SIGINT nobody sent again raises as before, and none raises
outside user code. Usage: sigint_extra.py WORKER_PY."""
import sys
import types

src = open(sys.argv[1]).read()
worker = types.ModuleType("replhub_worker")
worker.__file__ = sys.argv[1]
exec(compile(src, sys.argv[1], "exec"), worker.__dict__)


def raises(s):
    try:
        s.handler(2, None)
    except KeyboardInterrupt:
        return True
    return False


s = worker.Sigint()
s.live = True
s.sent, s.extra = True, 1   # an interrupt, and one SIGINT sent again for it
assert raises(s), "the interrupt raises"
assert not s.sent
assert not raises(s), "the SIGINT sent again, after the raise, is dropped"
assert s.extra == 0
assert raises(s), "a SIGINT from elsewhere raises as before"
s.sent, s.extra = True, 2   # two sent again: the first raise, then one dropped
assert raises(s) and not raises(s) and raises(s)
s.live, s.sent, s.extra = False, True, 1
assert not raises(s), "outside user code nothing raises"
s.live, s.depth = True, 1   # in a frame write: kept for its end
assert not raises(s) and s.pending
print("ok")
