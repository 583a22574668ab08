"""Holds Names.send to its order: a reset's answer (on a thread of its
own) and a cell's done frame each carry a list, and the hub takes them in
the order they arrive. The answer's list is made, then its send stalls; a
cell binds a name and its done frame is sent meanwhile. The hub must end
with the namespace's list: the done frame waits for the answer, and its
list is made after it. Usage: names_order.py WORKER_PY."""
import sys
import threading
import types

src = open(sys.argv[1]).read()
worker = types.ModuleType("replhub_worker")
worker.__file__ = sys.argv[1]
exec(compile(src, sys.argv[1], "exec"), worker.__dict__)

ns = {"__builtins__": 1, "display": 2, "a": 1}
names = worker.Names(set(["__builtins__", "display"]))
made, go = threading.Event(), threading.Event()


class Chan(object):
    gen = 0

    def __init__(self):
        self.hub = None  # the hub's list, taken in the order frames arrive
        self.frames = []

    def send(self, frame, data=None):
        if frame["op"] == "answer":
            made.set()
            go.wait(5)
        self.frames.append(frame["op"])
        if "names" in frame:
            self.hub = frame["names"]


chan = Chan()
names.send(chan, ns, {"op": "done"})  # the first cell's
reset = threading.Thread(target=names.send, args=(chan, ns, {"op": "answer"}), kwargs={"anew": True})
reset.start()
assert made.wait(5)
ns["z"] = 1  # the cell let go past the reset's budget
cell = threading.Thread(target=names.send, args=(chan, ns, {"op": "done"}))
cell.start()
cell.join(0.3)
go.set()
reset.join(5)
cell.join(5)
assert chan.frames == ["done", "answer", "done"], chan.frames
assert chan.hub == ["a", "z"], chan.hub


class Refusing(Chan):
    def send(self, frame, data=None):
        raise ValueError("over the bound")


# An answer the channel refused: the hub kept its list, so the next done
# frame sends the list whole, though it did not change.
for anew in (True, False):
    try:
        names.send(Refusing(), ns, {"op": "answer"}, anew=anew)
    except ValueError:
        pass
    else:
        raise AssertionError("not raised")
    chan = Chan()
    names.send(chan, ns, {"op": "done"})
    assert chan.hub == ["a", "z"], (anew, chan.hub)
print("ok")
