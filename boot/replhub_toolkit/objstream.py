"""replhub toolkit: objects streamed between sessions, their big buffers
out of band.

Between two sessions of the same Python, 3.8 or later, put, get and call
pickle with protocol 5 and keep every buffer of OOB_MIN bytes or more out
of the pickle: bytes, bytearray and memoryview objects (through
persistent_id, where has_big finds that it pays: pickle would copy them
in), and whatever exposes a PickleBuffer (a numpy array; through
buffer_callback). The small pickle
goes in the request or answer frame with the buffers' sizes ("bufs"); the
buffers follow as chunks, written from slices of the objects themselves,
at most WINDOW unacknowledged, and land in a bytearray per buffer that the
reader thread reads them into (Stream.into): no copy of the object is made
on either side, and the hub holds a window of chunks, never the object.
A big buffer's memory is asked for in huge pages (huge_pages).
hub/objstream.go has the frames' order.

Persistent ids and PickleBuffers each take the next buffer, in the order
the pickle meets them; the loader hands them out in the same order, so the
sizes are all the frames need to say. Sessions of 3.6 and 3.7, and peers of
another version, go on with the one blob of protocol 4 (relay.dumps).

A group's put, get or call (group.py) is one request whose every part is
such a transfer under an id of its own (fan, Part): the object pickled
once, the same buffers' chunks sent to each part at its own pace.

Standard library only; imported by relay, used on 3.8+ only.
"""

import pickle
import sys
import threading
import types

from replhub_toolkit import relay

OOB_MIN = 1 << 20   # smaller buffers stay in the pickle
MAX_BUFS = 4096     # and so do buffers past this many
CHUNK = 8 << 20     # as a file's chunks: the hub's bound
_PID = "replhub-buf"
_FORMATS = set("bBhHiIlLqQnNfdc?e")
# Buffers and bytes this session streamed out and in (tests read them).
STATS = {"sent": 0, "sent_bytes": 0, "received": 0, "received_bytes": 0}


class StreamError(Exception):
    """A streamed object that could not be sent or received whole."""


class Buffers(list):
    """The out-of-band buffers of a pickle (1-D bytes memoryviews), and
    kinds: what each becomes on arrival, "b" bytes or "a" a bytearray."""

    def __init__(self):
        list.__init__(self)
        self.kinds = []

    def add(self, raw, kind):
        self.append(raw)
        self.kinds.append(kind)


_new = []  # [(bytes maker, bytearray maker) or None], found at first use


def allocate(n, kind):
    """A new object of n bytes for a buffer of kind "b" (bytes) or "a"
    (bytearray), and a writable memoryview of its memory. Where CPython's
    C API can be reached, both are made without zeroing, and a bytes
    object is filled in place, before anything else sees it: no copy of
    it is made afterwards. Elsewhere a bytearray, which the loader turns
    into bytes."""
    if not _new:
        _new.append(_makers())
    makers = _new[0]
    if makers is None:
        obj = bytearray(n)
        return obj, memoryview(obj)
    import ctypes
    obj = makers[kind == "a"](None, n)
    if kind == "a":
        view = memoryview(obj)
        huge_pages(ctypes.addressof(ctypes.c_char.from_buffer(view)), n)
        return obj, view
    # The bytes object's characters start at ob_sval, one byte before the
    # end of its fixed part.
    addr = id(obj) + bytes.__basicsize__ - 1
    huge_pages(addr, n)
    area = (ctypes.c_char * n).from_address(addr)
    return obj, memoryview(area).cast("B")


HUGE = 2 << 20     # a huge page on x86-64 and arm64 with 4 KiB pages
_madvise = []      # [libc's madvise, MADV_HUGEPAGE] or [None], found at first use


def huge_pages(addr, n):
    """Ask Linux to back the whole huge pages of the n bytes at addr, not
    yet touched, with huge pages (madvise MADV_HUGEPAGE, which a kernel
    with transparent huge pages "madvise" waits for): filled from the
    link, they fault once per 2 MiB instead of once per 4 KiB page, which
    on a virtual machine is most of a big object's time to arrive. A no-op
    where the call or the constant is missing, or when it fails."""
    fn = _madvise_fn() if n >= 2 * HUGE else None
    if fn is None:
        return
    start = (addr + HUGE - 1) & ~(HUGE - 1)
    end = (addr + n) & ~(HUGE - 1)
    if end > start:
        fn(start, end - start, _madvise[1])


MADV_POPULATE_WRITE = 23   # Linux 5.14+: fault pages in, writable
_no_populate = []          # [True] once the kernel refused the call: not tried again


def populate(view):
    """Fault in the pages of view, the writable slice of a received buffer
    that the reader thread reads a chunk into next (Stream.into), where
    the prefault (Prefault) has not been yet. The kernel zeroes a fresh
    page at its first touch; taken inside the pipe's read, that happens
    with the pipe's lock held, and the hub, writing the next bytes, spins
    on that lock. A no-op for slices under a huge page, where madvise or
    MADV_POPULATE_WRITE is missing (Linux before 5.14), and once the
    kernel has refused the advice (not for a passing failure: no memory,
    a bad address)."""
    n = len(view)
    fn = _madvise_fn() if n >= HUGE and not _no_populate else None
    if fn is None:
        return
    try:
        import ctypes
        import errno
        addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
        start = addr & ~4095
        if fn(start, addr + n - start, MADV_POPULATE_WRITE) != 0 and \
                ctypes.get_errno() not in (errno.ENOMEM, errno.EFAULT, errno.EINTR, errno.EAGAIN):
            _no_populate.append(True)
    except Exception:
        _no_populate.append(True)


class Prefault(object):
    """Faults in the pages of a received object's buffers (views, of objs)
    on a thread of its own, CHUNK by CHUNK from the start and at most AHEAD
    chunks past those the reader thread has taken (took): the kernel
    zeroes each fresh page as it faults in, which on a virtual machine
    that shadows its page tables costs 3.7 ms a MB, more than the link
    takes to bring it. Done ahead, the zeroing overlaps the transfer
    instead of holding up each chunk's read; bounded, a transfer that
    fails early leaves little faulted in for nothing. ready is how many
    bytes from the start it has been over; stop ends it, and waits."""

    AHEAD = 8

    def __init__(self, views, objs):
        self.ready = 0
        self._views, self._objs = views, objs  # objs: what views' memory belongs to
        self._taken = 0
        self._stopped = False
        self._cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="replhub-prefault")
        self.thread.daemon = True
        self.thread.start()

    def took(self, n):
        """The reader thread has taken n bytes in all."""
        with self._cond:
            self._taken = n
            self._cond.notify()

    def _run(self):
        pos = 0
        try:
            for v in self._views:
                for off in range(0, len(v), CHUNK):
                    n = min(CHUNK, len(v) - off)
                    with self._cond:
                        # The reader thread takes a chunk at least every
                        # relay stall bound, or its transfer fails: a
                        # minute without one, and this one is left over.
                        idle = 0
                        while not self._stopped and pos >= self._taken + self.AHEAD * CHUNK and idle < 60:
                            taken = self._taken
                            self._cond.wait(1.0)
                            idle = 0 if self._taken != taken else idle + 1
                        if self._stopped or _no_populate or idle >= 60:
                            return
                        behind = pos + n <= self._taken  # the reader populated it
                    if not behind:
                        populate(v[off:off + n])
                    pos = self.ready = pos + n
        finally:
            self._views = self._objs = None

    def stop(self):
        with relay.held(), self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self.thread:
            self.thread.join()


def prefault(views, objs):
    """A Prefault of views (of objs), or None where there is nothing to
    gain: under two chunks in all (populate's own call per chunk does),
    where populate cannot work, or when no thread can be started."""
    if sum(len(v) for v in views) < 2 * CHUNK or _no_populate or _madvise_fn() is None:
        return None
    try:
        return Prefault(views, objs)
    except Exception:  # RuntimeError: can't start new thread
        return None


def _madvise_fn():
    """libc's madvise, or None, found at first use."""
    if not _madvise:
        _madvise.extend(_find_madvise())
    return _madvise[0]


def _find_madvise():
    if not sys.platform.startswith("linux"):
        return [None]
    try:
        import ctypes
        import mmap
        advice = mmap.MADV_HUGEPAGE
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
        return [fn, advice]
    except Exception:
        return [None]


def _makers():
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes
        makers = []
        for name in ("PyBytes_FromStringAndSize", "PyByteArray_FromStringAndSize"):
            fn = getattr(ctypes.pythonapi, name)
            fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_ssize_t), ctypes.py_object
            makers.append(fn)
        return tuple(makers)
    except Exception:
        return None


_classes = {}


def pickler(base, f, bufs, obj):
    """A pickler of class base (cloudpickle's or relay's own) writing obj
    to f with protocol 5, appending every big buffer to bufs, as a 1-D
    bytes memoryview, instead of pickling it. persistent_id, which bytes
    and bytearrays need, costs a call per object pickled: it is on only
    where a look at obj finds a big one (has_big)."""
    classes = _classes.get(base)
    if classes is None:
        classes = _classes[base] = _oob_classes(base)
    return classes[has_big(obj)](f, bufs)


_WALK = 100000     # objects has_big looks at, at most
_BIG_GRAPH = 64 << 20  # big buffers that pay for persistent_id in a graph past _WALK


def has_big(obj):
    """Whether obj holds a big bytes, bytearray or memoryview in its dicts,
    lists, tuples and instances' attributes, where it pays to find them by
    persistent_id: in a graph of up to _WALK objects, any; in a larger one
    (where a call per object costs more than the copies it saves), when
    those found among its first _WALK objects come to _BIG_GRAPH bytes.
    Others go in the pickle."""
    stack, left, big = [obj], _WALK, 0
    while stack and left:
        left -= 1
        o = stack.pop()
        t = type(o)
        if t is bytes or t is bytearray:
            if len(o) >= OOB_MIN:
                big += len(o)
        elif t is memoryview:
            if o.nbytes >= OOB_MIN:
                big += o.nbytes
        elif t is dict:
            stack.extend(o.values())
        elif t is list or t is tuple:
            stack.extend(o)
        elif t is types.FunctionType:
            stack.extend(_carried(o))
        else:
            d = getattr(o, "__dict__", None)
            if type(d) is dict:
                stack.extend(d.values())
    return big >= _BIG_GRAPH if (stack and not left) else big > 0


def _carried(fn):
    """What a function that travels by value takes along: its defaults, its
    closure's cells, and the globals its code names."""
    out = list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    out.extend(c.cell_contents for c in fn.__closure__ or () if _full(c))
    g, codes = fn.__globals__, [fn.__code__]
    while codes:
        code = codes.pop()
        out.extend(g[n] for n in code.co_names if n in g)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out


def _full(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _oob_classes(base):
    # relay's own pickler refuses code of __main__ in persistent_id; the
    # C pickler's attribute of that name is a descriptor, not a method.
    parent_pid = getattr(base, "persistent_id", None)
    if not isinstance(parent_pid, types.FunctionType):
        parent_pid = None

    class OobPickler(base):
        def __init__(self, f, bufs):
            base.__init__(self, f, protocol=5, buffer_callback=self._callback)
            self._bufs = bufs

        def _callback(self, pb):
            # False: out of band (the next buffer); True: in the pickle.
            try:
                raw = pb.raw()
            except BufferError:
                return True
            if raw.nbytes < OOB_MIN or len(self._bufs) >= MAX_BUFS:
                return True
            self._bufs.add(raw, "a")
            return False

    class PidPickler(OobPickler):
        def __init__(self, f, bufs):
            OobPickler.__init__(self, f, bufs)
            self._pids = {}   # id(obj) -> its persistent id
            self._keep = []   # the objects those ids are of

        def persistent_id(self, obj):
            t = type(obj)
            if t is bytes or t is bytearray or t is memoryview:
                pid = self._pids.get(id(obj))
                if pid is None:
                    pid = self._buffer_pid(obj, t)
                if pid is not None:
                    return pid
            if parent_pid is not None:
                return parent_pid(self, obj)
            return None

        def _buffer_pid(self, obj, t):
            n = obj.nbytes if t is memoryview else len(obj)
            if n < OOB_MIN or len(self._bufs) >= MAX_BUFS:
                return None
            if t is memoryview:
                fmt = obj.format.lstrip("@")
                if not obj.c_contiguous or fmt not in _FORMATS:
                    return None
                raw = obj.cast("B") if (obj.ndim != 1 or fmt != "B") else obj
                pid = (_PID, len(self._bufs), "m", fmt, list(obj.shape), obj.readonly)
            else:
                raw = memoryview(obj)
                pid = (_PID, len(self._bufs), "b" if t is bytes else "a", "B", None, False)
            self._bufs.add(raw, "b" if t is bytes else "a")
            self._pids[id(obj)] = pid
            self._keep.append(obj)
            return pid

    return OobPickler, PidPickler


class Loader(object):
    """Hands a pickle's out-of-band buffers out in the order it meets
    them: persistent ids by their index, PickleBuffers as the next."""

    def __init__(self, bufs):
        self.bufs = list(bufs)
        self.taken = 0
        self.made = {}

    def buffers(self):
        while self.taken < len(self.bufs):
            self.taken += 1
            yield self.bufs[self.taken - 1]
        raise StreamError("the pickle wants more buffers than were sent")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == _PID and isinstance(pid[1], int)):
            raise pickle.UnpicklingError("unknown persistent id")
        i, kind, fmt, shape, readonly = pid[1:]
        if i in self.made:
            return self.made[i]
        if i != self.taken or i >= len(self.bufs):
            raise StreamError("buffer %d out of step" % i)
        self.taken += 1
        buf = self.bufs[i]
        if kind == "a":
            obj = buf
        elif kind == "b":
            obj = buf if type(buf) is bytes else bytes(buf)
            self.bufs[i] = None
        elif kind == "m" and fmt in _FORMATS:
            obj = memoryview(buf)
            if fmt != "B" or len(shape or ()) != 1:
                obj = obj.cast(fmt, shape)
            if readonly:
                obj = obj.toreadonly()
        else:
            raise pickle.UnpicklingError("unknown buffer kind %r" % (kind,))
        self.made[i] = obj
        return obj

    def done(self):
        if self.taken != len(self.bufs):
            raise StreamError("%d buffers were sent and %d used" % (len(self.bufs), self.taken))


def loads(blob, bufs, unpickler=pickle.Unpickler, **kwargs):
    """Load a streamed object: its pickle and its buffers (bytearrays).
    unpickler (relay's GuardedUnpickler for another version) is given
    kwargs."""
    import io
    loader = Loader(bufs)

    class Unpickler(unpickler):
        def persistent_load(self, pid):
            return loader.persistent_load(pid)

    obj = Unpickler(io.BytesIO(blob), buffers=loader.buffers(), **kwargs).load()
    loader.done()
    return obj


def send(chan, stream, field, key, bufs):
    """Send bufs as chunks of transfer key (field "id" or "sid"), slices of
    the buffers themselves, at most the stream's window unacknowledged."""
    seq = 0
    for raw in bufs:
        n = raw.nbytes
        for off in range(0, n, CHUNK):
            stream.wait_window(seq)
            chan.send({"op": "chunk", field: key, "seq": seq}, raw[off:off + CHUNK])
            seq += 1
        STATS["sent"] += 1
        STATS["sent_bytes"] += n


def receive(chan, stream, field, key):
    """Take the chunks of transfer key into the stream's buffers (the reader
    thread reads them in, see Stream.into), acknowledging each. A reply in
    their midst (the other side failed) ends it with that reply's error."""
    left = total = stream.expecting()
    while left > 0:
        h, data = stream.get()
        if h.get("op") == "reply":
            raise StreamError(h.get("error") or "the transfer ended before its end")
        if h.get("op") != "chunk" or not stream.holds(data):
            raise StreamError("a chunk that does not fit the buffers announced")
        left -= len(data)
        chan.send({"op": "ack", field: key, "seq": h.get("seq", -1)})
    STATS["received"] += len(stream.dest or ())
    STATS["received_bytes"] += total


def sizes(bufs):
    return [b.nbytes for b in bufs]


def kinds(bufs):
    return "".join(bufs.kinds)


# -- the two sides of a put, get or call ----------------------------------

def ask(link, kind, blob, bufs, oob, fields):
    """The caller's side (relay._ask): the request with blob and the sizes
    of bufs; on a first reply without bufs the target is ready for them;
    on one with bufs the value's buffers follow. Returns (the value, the
    last reply)."""
    st = []
    try:
        header, data = link.request(kind, blob, stream=st, bufs=sizes(bufs or []) or None,
                                    kinds=kinds(bufs) if bufs else None, oob=oob or None, **fields)
        rid, stream = st
        value = None
        while header.get("first"):
            if header.get("bufs"):  # the value's buffers follow
                receive(link.chan, stream, "id", rid)
                value = (data, header.get("py"), stream.objs)
            else:  # the target is ready for ours
                send(link.chan, stream, "id", rid, bufs)
            header, data = stream.get()
            if header.get("op") != "reply":
                raise StreamError("the transfer went out of step")
        if not header.get("ok"):
            raise relay.HubError(header.get("error") or "refused")
        if value is not None:
            return relay.loads(value[0], value[1], value[2]), header
        return relay.reply_value(header, data)
    except StreamError as e:
        _cancel(link, st)
        raise relay.HubError(str(e))
    except relay.Cancelled:  # the hub went away (hub_gone)
        _cancel(link, st)
        raise relay.HubError("the %s was cut off: the hub went away; try again" % kind)
    except BaseException:
        _cancel(link, st)
        raise
    finally:
        if st:
            relay.close_stream(("id", st[0]))


def _cancel(link, st):
    if st:
        try:
            link.cancel(st[0])
        except Exception:
            pass


def take(header, data, stream):
    """The target's side of a put's or call's object (relay._take): it
    says it is ready, takes the chunks, and loads."""
    sid = header["sid"]
    chan = relay._need_link().chan
    try:
        bufs = stream.expect(header)
        stream.expecting()  # fails here, before the sender starts
        chan.send({"op": "served", "sid": sid, "ok": True, "first": True, "py": relay.PY})
        receive(chan, stream, "sid", sid)
    except StreamError as e:
        raise relay.HubError(str(e))
    except KeyboardInterrupt:
        raise relay.Cancelled()
    return relay.loads(data, header.get("py"), bufs)


def answer(header, value, stream):
    """The target's side of a get's or call's value (relay._answer): its
    pickle in a first answer with the buffers' sizes, then the buffers;
    or, with none big, the pickle as the answer."""
    bufs = Buffers()
    blob = relay.dumps(value, bufs)
    if not bufs:
        return {"ok": True}, blob
    sid = header["sid"]
    chan = relay._need_link().chan
    chan.send({"op": "served", "sid": sid, "ok": True, "first": True, "py": relay.PY,
               "bufs": sizes(bufs), "kinds": kinds(bufs)}, blob)
    try:
        send(chan, stream, "sid", sid, bufs)
    except KeyboardInterrupt:
        raise relay.Cancelled()
    return {"ok": True}, None


# -- a group's side: one request, a streamed transfer per session ---------

def part_id(rid, i):
    """The id of part i of group request rid (the hub's fanLinkID)."""
    return -((rid << 12) | i) - 1


class Part(object):
    """One session's part of a group's streamed put, get or call: the
    frames ask() meets for a single request, under the part's own id (its
    first answers, chunks either way, its last word), taken one at a time
    so that fan() drives every part at once, each at its own pace."""

    def __init__(self, rid, i, cond):
        self.id = part_id(rid, i)
        self.stream = relay.open_stream(("id", self.id), cond)
        self.pieces = None  # the chunks to send, once the target is ready
        self.seq = 0
        self.left = 0       # bytes of the value still to come
        self.value = None   # (pickle, py, buffers) of a streamed value
        self.error = None
        self.done = False

    def can_move(self):
        """Whether step has something to do (the stream's cond held)."""
        return bool(self.stream.items) or self.stream.cancelled or self._room()

    def _room(self):
        """Whether a chunk is left to send and the window has room for it."""
        return self.pieces is not None and self.seq - self.stream.acked <= relay.WINDOW

    def step(self, chan, bufs):
        """Take the next frame, or send the next chunk the window has room
        for; returns whether it did either."""
        st = self.stream
        with relay.held(), st.cond:
            if st.cancelled:
                raise relay.Cancelled()
            item = st.items.pop(0) if st.items else None
            room = self._room()
        try:
            if item is not None:
                self._take(chan, bufs, *item)
            elif room:
                chan.send({"op": "chunk", "id": self.id, "seq": self.seq}, self.pieces[self.seq])
                self.seq += 1
                if self.seq == len(self.pieces):
                    self.pieces = None
                    _count("sent", bufs)
            return item is not None or room
        except StreamError as e:
            # This part only: its target is cancelled, the others go on.
            self.error, self.done = str(e), True
            st.stop_prefault()
            chan.send(relay.cancel_frame(self.id))
            return True

    def _take(self, chan, bufs, h, data):
        op = h.get("op")
        if op == "chunk" and self.left > 0 and self.stream.holds(data):
            self.left -= len(data)
            chan.send({"op": "ack", "id": self.id, "seq": h.get("seq", -1)})
            if not self.left:
                _count("received", self.value[2])
        elif op == "reply" and not h.get("first"):  # the last word
            self.done = True
            if self.left or self.pieces is not None or not h.get("ok"):
                self.error = h.get("error") or "the transfer ended before its end"
                self.stream.stop_prefault()
        elif op == "reply" and not self.left and self.pieces is None and h.get("bufs"):
            self.left = self.stream.expecting()  # the value's buffers follow
            self.value = (data, h.get("py"), self.stream.objs)
            if not self.left:
                _count("received", self.value[2])
        elif op == "reply" and not self.left and self.pieces is None and not self.seq:
            self.pieces = _pieces(bufs or [])  # the target is ready for ours
            if not self.pieces:
                self.pieces = None
        else:
            raise StreamError("the transfer went out of step")


def _pieces(bufs):
    """The chunks of bufs: slices of the buffers themselves."""
    return [raw[off:off + CHUNK] for raw in bufs for off in range(0, raw.nbytes, CHUNK)]


def _count(way, bufs):
    STATS[way] += len(bufs)
    STATS[way + "_bytes"] += sum(memoryview(b).nbytes for b in bufs)


def fan(link, kind, blob, bufs, oob, n, fields):
    """A group's put, get or call to n sessions of this Python, 3.8+
    (group.py; the hub's side is fanServe): one request with blob and the
    sizes of bufs, whose every part is a streamed transfer of its own
    (Part), all driven here at once: the object is pickled once and each
    part sent the same buffers' chunks. A part that fails ends alone.
    Returns the group's reply (header, data) and the parts."""
    cond = threading.Condition()
    parts = []

    def opens(rid):
        parts.extend(Part(rid, i, cond) for i in range(n))
    rid = None
    try:
        rid, slot = link.start(kind, blob, opens, bufs=sizes(bufs or []) or None,
                               kinds=kinds(bufs) if bufs else None, oob=oob or None, **fields)
        live = parts
        while live:
            # The hub tells every part its last word before the request's
            # reply: once that has come, what a part still waits for
            # (a request refused as a whole) never will.
            replied = slot.is_set()
            moved = False
            for p in live:
                moved = p.step(link.chan, bufs) or moved
            live = [p for p in live if not p.done]
            if replied and not moved:
                for p in live:
                    p.error, p.done = "no answer", True
                break
            if not moved:
                with relay.held(), cond:
                    if not any(p.can_move() for p in live):
                        cond.wait(relay.POLL)
        return link.finish(rid, slot), parts
    except relay.Cancelled:  # the hub went away (hub_gone)
        raise relay.HubError("the %s was cut off: the hub went away; try again" % kind)
    except BaseException:
        if rid is not None:
            _cancel(link, [rid])
        raise
    finally:
        with relay.held():  # a SIGINT does not cut the cleanup short
            if rid is not None:
                link.drop(rid)
            for p in parts:
                relay.close_stream(("id", p.id))
