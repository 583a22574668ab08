"""Holds the worker's kept list of names (Names) to the list computed
afresh, over random cells' worth of changes to a namespace: names bound,
rebound, deleted and bound again, private, too long, not strings, the
start's own; a new hub connection now and then, a reset's forget. After
each cell the hub's copy (the last list sent) must be the fresh list, and
the list goes only when it changed, or to a new hub, or after a forget.
Usage: names_diff.py WORKER_PY ROUNDS."""
import random
import sys
import types

src = open(sys.argv[1]).read()
worker = types.ModuleType("replhub_worker")
worker.__file__ = sys.argv[1]
exec(compile(src, sys.argv[1], "exec"), worker.__dict__)
Names, NAME_CAP, NAMES_MAX = worker.Names, worker.NAME_CAP, worker.NAMES_MAX
rng = random.Random(11)


def fresh(ns, base):
    return sorted(k for k in ns.keys() - base if isinstance(k, str)
                  and len(k) <= NAME_CAP and not k.startswith("_"))[:NAMES_MAX]


for _ in range(int(sys.argv[2])):
    ns = {"__builtins__": 1, "display": 2, "put": 3}
    base = set(ns)
    names, hub, gen = Names(base), None, 0
    pool = ["k%03d" % i for i in range(rng.choice([5, 50, 400]))]
    pool += ["_h", "display", "x" * (NAME_CAP + 1), 7, (1, 2)]
    for _ in range(40):
        for _ in range(rng.choice([0, 0, 1, 1, 2, 5, 30, 300])):
            k = rng.choice(pool)
            if rng.random() < 0.6:
                ns[k] = 1
            else:
                ns.pop(k, None)
        new_hub, forgot = rng.random() < 0.05, rng.random() < 0.03
        gen += new_hub
        if forgot:
            names.forget()
        want = fresh(ns, base)
        got = names.changed(ns, gen)
        if hub is None or new_hub or forgot:
            assert got is not None, "a new hub, or a forget, is sent the list"
        elif hub == want:
            assert got is None, "an unchanged list is not sent: %r" % (got[:5],)
        if got is not None:
            hub = got
        assert hub == want, (hub[:5], want[:5])
print("ok")
