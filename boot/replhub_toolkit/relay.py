"""replhub toolkit: how code in a session reaches other sessions.

session(name, host=None, sudo=None, python=None, jump=None) opens (or
attaches to) a session through the hub and returns a handle; sessions()
lists them; sessions_on(hosts, name) opens NAME@HOST on many hosts at once
(replhub_toolkit.group).  Objects cross by copy: the sender pickles (cloudpickle where it
loaded, else pickle; protocol 4, which every Python 3.6+ reads) and tags the
blob with its Python major.minor; the hub relays it untouched.  A receiver
of another version loads with GuardedUnpickler, which refuses every code
reconstructor: data crosses, code does not load into an interpreter it was
not made for.

This module also serves the other side: Server runs put/get/call on the
session's main thread, like a cell.  Standard library only, Python 3.6+.
"""

import _thread
import copyreg
import io
import os
import pickle
import stat
import sys
import threading
import types

from replhub_toolkit import guard as _toolkit_guard, held as _toolkit_held

PROTOCOL = 4
PY = "%d.%d" % sys.version_info[:2]

cloudpickle = None
CLOUDPICKLE_DIR = None  # set by the worker: where the hub found cloudpickle
_cp_tried = False


def _objstream():
    """replhub_toolkit.objstream, at its first use: on a host it is a late
    module, which the relay's own link brings."""
    from replhub_toolkit import objstream
    return objstream


def streams_with(py):
    """Whether objects to or from a session of Python py (its version)
    stream their buffers (objstream): both 3.8+ and of the same version."""
    return sys.version_info >= (3, 8) and ".".join(str(py or "").split(".")[:2]) == PY


def _ensure_cloudpickle():
    global _cp_tried
    if not _cp_tried:
        load_cloudpickle(CLOUDPICKLE_DIR)
        _cp_tried = True  # after: a load cut by KeyboardInterrupt is tried again


def load_cloudpickle(path=None):
    """Use cloudpickle where it can move code: Python 3.8+ only. It is
    loaded at the first copy, not at start: a session that never copies
    pays nothing for it."""
    global cloudpickle
    if sys.version_info < (3, 8):
        return False
    try:
        import cloudpickle as cp
    except ImportError:
        cp = None
        if path and os.path.isfile(os.path.join(path, "__init__.py")):
            import importlib.util
            spec = importlib.util.spec_from_file_location(
                "cloudpickle", os.path.join(path, "__init__.py"), submodule_search_locations=[path])
            cp = importlib.util.module_from_spec(spec)
            sys.modules["cloudpickle"] = cp
            try:
                spec.loader.exec_module(cp)
            except BaseException as e:
                sys.modules.pop("cloudpickle", None)  # never half loaded
                if not isinstance(e, Exception):
                    raise  # KeyboardInterrupt: the next copy tries again
                cp = None
    cloudpickle = cp
    return cp is not None


class HubError(Exception):
    """A request another session or the hub refused."""


class CopyError(HubError):
    """An object that cannot be copied to another session."""


class Cancelled(Exception):
    """The hub cancelled the transfer this session was serving."""


HubError.__module__ = CopyError.__module__ = "replhub"

# What a call takes along for the other session's transcript and tracebacks
# is capped, so that its frame stays well under the hub's limit of 1 MiB.
SRC_CAP = 64 << 10
CELLS_CAP = 256 << 10


def _cap(text, limit):
    """Keep head and tail of text within limit characters."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return text[:keep] + "\n[... %d characters left out ...]\n" % (len(text) - 2 * keep) + text[-keep:]


def _cap_cells(cells):
    """Whole cells, as many as fit in CELLS_CAP characters."""
    out, total = {}, 0
    for name, src in cells.items():
        total += len(name) + len(src)
        if total > CELLS_CAP:
            break
        out[name] = src
    return out


# -- pickling -------------------------------------------------------------

def _text_file_contents(f):
    # An open text file crosses as what it holds.
    pos = None
    try:
        pos = f.tell()
        f.seek(0)
    except Exception:
        pass
    data = f.read()
    if pos is not None:
        try:
            f.seek(pos)
        except Exception:
            pass
    return str, (data,)


_dispatch = copyreg.dispatch_table.copy()
_dispatch[io.TextIOWrapper] = _text_file_contents


def _refuse_main_code(obj):
    """Without cloudpickle a function of __main__ would go by reference and
    run the receiver's own function of that name: refuse instead."""
    if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == "__main__":
        why = "this is Python %s, where replhub moves data only" % PY if sys.version_info < (3, 8) \
            else "cloudpickle is not installed here"
        raise CopyError("cannot send %r: moving code needs cloudpickle (%s); "
                        "call a function by its name in the other session instead" % (obj, why))
    return None


class _DataPickler(pickle.Pickler):
    """pickle's Pickler, refusing code of __main__ (a method: Python 3.13
    no longer lets an instance's persistent_id be set)."""

    def persistent_id(self, obj):
        return _refuse_main_code(obj)


_Pickler = None


def _pickler_class():
    """cloudpickle's pickler, made to send open text files as their
    contents (cloudpickle alone would send a StringIO)."""
    global _Pickler
    if _Pickler is None:
        class Pickler(cloudpickle.CloudPickler):
            def reducer_override(self, obj):
                if isinstance(obj, io.TextIOWrapper):
                    return _text_file_contents(obj)
                return super(Pickler, self).reducer_override(obj)
        _Pickler = Pickler
    return _Pickler


def dumps(obj, bufs=None):
    """Pickle obj for another session. With bufs (a list, for a session of
    this same Python, 3.8+), protocol 5 with the big buffers appended to
    bufs instead of pickled (objstream)."""
    _ensure_cloudpickle()
    buf = io.BytesIO()
    try:
        base = _pickler_class() if cloudpickle is not None else _DataPickler
        if bufs is not None:
            p = _objstream().pickler(base, buf, bufs, obj)
        else:
            p = base(buf, protocol=PROTOCOL)
        p.dispatch_table = _dispatch
        p.dump(obj)
    except CopyError:
        raise
    except Exception as e:
        raise CopyError("cannot copy it to another session (%s: %s). A socket, a lock or an open "
                        "connection stays in the session that made it: create it there with "
                        "call(make_it, into='name') and use it there" % (type(e).__name__, e))
    return buf.getvalue()


_CODE = {("types", "CodeType"), ("types", "FunctionType"), ("types", "LambdaType"),
         ("types", "MethodType"), ("marshal", "loads"), ("builtins", "eval"),
         ("builtins", "exec"), ("builtins", "compile"), ("builtins", "getattr"),
         ("builtins", "__import__"), ("importlib", "import_module")}


class GuardedUnpickler(pickle.Unpickler):
    """Loads data made by another Python version and refuses code."""

    def __init__(self, f, sender, **kwargs):
        pickle.Unpickler.__init__(self, f, **kwargs)
        self.sender = sender

    def find_class(self, module, name):
        if module.split(".")[0] == "cloudpickle" or (module, name) in _CODE or module == "__main__":
            raise CopyError(
                "refused code (%s.%s) made by Python %s: this session runs Python %s, and code "
                "does not load into an interpreter it was not made for. Data crosses; run the "
                "function where its Python matches, or send its source" % (module, name, self.sender, PY))
        return pickle.Unpickler.find_class(self, module, name)


def loads(blob, sender, bufs=None):
    """Unpickle a blob from a session of Python sender (major.minor), with
    the out-of-band buffers bufs of a streamed object."""
    _ensure_cloudpickle()
    if bufs is not None:
        if sender == PY:
            return _objstream().loads(blob, bufs)
        return _objstream().loads(blob, bufs, GuardedUnpickler, sender=sender)
    if sender == PY:
        return pickle.loads(blob)
    return GuardedUnpickler(io.BytesIO(blob), sender).load()


def _retag(code, tag):
    """The code of a function from another session names its file after
    that session, so that a traceback never shows a line of this session's
    own cell of the same number."""
    if not code.co_filename.startswith("<cell-") or not hasattr(code, "replace"):
        return code
    consts = tuple(_retag(c, tag) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="<%s %s>" % (tag, code.co_filename[1:-1]), co_consts=consts)


def register_cells(tag, cells):
    """Make the sender's cell sources show in tracebacks here."""
    import linecache
    for fname, src in (cells or {}).items():
        name = "<%s %s>" % (tag, fname[1:-1])
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)


def cell_sources(fn):
    """The sources of the cells a function (and its helpers) came from."""
    import linecache
    out = {}
    for f in [fn] + [v for v in getattr(fn, "__globals__", {}).values() if isinstance(v, types.FunctionType)]:
        code = getattr(f, "__code__", None)
        if code is not None and code.co_filename.startswith("<cell-") and code.co_filename not in out:
            lines = linecache.getlines(code.co_filename)
            if lines:
                out[code.co_filename] = "".join(lines)
    return out


def rebind(fn, ns, seen=None, tag=None):
    """Make a function that travelled run in ns: names ns has win; names it
    lacks come along from the sender (helpers travel, and land in ns)."""
    if seen is None:
        seen = {}
    if not isinstance(fn, types.FunctionType) or fn.__module__ != "__main__" or fn.__globals__ is ns:
        return fn
    if id(fn) in seen:
        return seen[id(fn)]
    code = _retag(fn.__code__, tag) if tag else fn.__code__
    new = types.FunctionType(code, ns, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__dict__.update(fn.__dict__)
    seen[id(fn)] = new
    for k, v in list(fn.__globals__.items()):
        if k.startswith("__") or k in ns:
            continue
        ns[k] = rebind(v, ns, seen, tag)
    return new


# -- requests to the hub ---------------------------------------------------

# -- file streams --------------------------------------------------------

CHUNK = 8 << 20
WINDOW = 4
WRITE_PIECE = 256 << 10

_writeback = []  # [sync_file_range or None], looked up at the first file written


def _start_writeback(fd):
    """Ask the kernel to start writing fd's dirty pages to disk now, without
    waiting: the disk then works while chunks still arrive, and the fsync at
    the end finds little left. Python has no sync_file_range, so it is
    called through ctypes where libc has it; elsewhere the fsync does all."""
    if not _writeback:
        fn = None
        try:
            import ctypes
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
            fn.restype = ctypes.c_int
        except Exception:
            fn = None
        _writeback.append(fn)
    if _writeback[0] is not None:
        _writeback[0](fd, 0, 0, 2)  # SYNC_FILE_RANGE_WRITE, to the end of the file


# How long a wait on the main thread, in held(), keeps a SIGINT back.
POLL = 0.05


def held():
    """The worker's SIGINT critical section (its channel's Sigint), to take
    a lock in on the main thread that the reader thread takes too: a
    KeyboardInterrupt raised as a with statement takes or lets go of a
    lock can keep it taken for good (inside threading.Condition's own
    code; before 3.10, between a with block's end and its lock's release),
    and the reader would wait for it for ever, with every frame after. A
    SIGINT that lands inside is raised as the section ends; a wait inside
    it waits POLL at a time, so that the SIGINT is not held back longer."""
    link = _link
    return getattr(link, "sigint", None) or _toolkit_held()


_toolkit_guard(held)  # as the package's held (see guard)


class Stream(object):
    """Chunks of one transfer, put by the reader thread and taken by the
    main thread, with the acknowledgements that keep a window of at most
    WINDOW chunks in flight. Once cancelled (by the reader thread), get and
    wait_window raise Cancelled."""

    def __init__(self, cond=None):
        self.cond = cond or threading.Condition()
        self.items = []
        self.acked = -1
        self.cancelled = False
        # A streamed object's buffers, which chunks are read into (into);
        # at is where the next one goes: (buffer, offset).
        self.reply = None
        self.dest = self.objs = None
        self.dest_ids = ()
        self.at = (0, 0)
        self.error = None
        # The buffers' pages faulted in ahead of the chunks (Prefault);
        # taken is how many of their bytes into has handed out.
        self.prefault = None
        self.taken = 0

    def expect(self, header):
        """Make the buffers that a streamed object's chunks go into (the
        header's bufs and kinds); returns them (bytes and bytearrays).
        MemoryError is kept for expecting()."""
        ost = _objstream()
        self.stop_prefault()
        sizes, kinds = header.get("bufs"), header.get("kinds") or ""
        try:
            if not isinstance(sizes, list) or len(sizes) > ost.MAX_BUFS or \
                    any(not isinstance(n, int) or n < 0 for n in sizes) or \
                    not isinstance(kinds, str) or len(kinds) not in (0, len(sizes)):
                raise ost.StreamError("bad buffer sizes")
            made = [ost.allocate(n, kinds[i] if kinds else "a") for i, n in enumerate(sizes)]
        except Exception as e:  # MemoryError, a size past ssize_t, ...
            self.error = e
            return None
        self.objs = [m[0] for m in made]
        self.dest, self.at = [m[1] for m in made], (0, 0)
        self.dest_ids = set(id(d.obj) for d in self.dest)
        self.prefault, self.taken = ost.prefault(self.dest, self.objs), 0
        return self.objs

    def stop_prefault(self):
        """Stop faulting the buffers in, and wait until that has stopped:
        the prefault then holds none of them."""
        pf, self.prefault = self.prefault, None
        if pf is not None:
            pf.stop()

    def holds(self, data):
        """Whether data was read into the buffers (by into)."""
        return isinstance(data, memoryview) and id(data.obj) in self.dest_ids

    def expecting(self):
        """How many bytes the buffers take."""
        if self.error is not None:
            raise _objstream().StreamError("cannot take the object here: %s" % (
                "out of memory" if isinstance(self.error, MemoryError) else self.error))
        return sum(len(d) for d in self.dest or ())

    def into(self, n):
        """Reader thread: where the next chunk's n bytes go, or None when
        they do not fit the buffers. Their pages are faulted in first,
        unless the prefault has done it already."""
        dest = self.dest
        if dest is None:
            return None
        i, off = self.at
        while i < len(dest) and off == len(dest[i]):
            i, off = i + 1, 0
        if i == len(dest) or off + n > len(dest[i]):
            return None
        self.at = (i, off + n)
        view = dest[i][off:off + n]
        self.taken += n
        pf = self.prefault
        if pf is None or pf.ready < self.taken:
            _objstream().populate(view)
        if pf is not None:
            pf.took(self.taken)
        return view

    def cancel(self):
        self.stop_prefault()
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()

    def put(self, header, data):
        with self.cond:
            self.items.append((header, data))
            if header.get("op") == "reply":
                self.reply = header  # the request ended: stop sending
            self.cond.notify_all()

    def get(self):
        while True:
            with held(), self.cond:
                if self.cancelled:
                    raise Cancelled()
                if self.items:
                    return self.items.pop(0)
                self.cond.wait(POLL)

    def ack(self, seq):
        with self.cond:
            if seq > self.acked:
                self.acked = seq
            self.cond.notify_all()

    def wait_window(self, seq):
        while True:
            with held(), self.cond:
                self._over()
                if seq - self.acked <= WINDOW:
                    return
                self.cond.wait(POLL)

    def check(self):
        """Raise as wait_window does once the transfer is over."""
        with self.cond:
            self._over()

    def _over(self):
        if self.cancelled:
            raise Cancelled()
        if self.reply is not None:
            raise HubError(self.reply.get("error") or "the transfer ended before its end")


streams = {}
_streams_lock = threading.Lock()


def open_stream(key, cond=None):
    """A Stream for transfer key; streams that share cond (a group's
    parts) can be waited on together."""
    with held(), _streams_lock:
        st = streams[key] = Stream(cond)
    return st


def close_stream(key):
    with held():  # a SIGINT does not cut it short
        with _streams_lock:
            st = streams.pop(key, None)
        if st is not None:
            st.stop_prefault()


def _stream_of(header):
    key = ("sid", header["sid"]) if "sid" in header else ("id", header.get("id"))
    with held(), _streams_lock:
        return streams.get(key)


def route(header, data):
    """Reader thread: a chunk or an ack for a transfer, or a later reply to
    a streamed request."""
    st = _stream_of(header)
    if st is None:
        return
    if header.get("op") == "ack":
        st.ack(header.get("seq", -1))
        return
    if header.get("op") == "reply":
        _expect_bufs(header, st)
    st.put(header, data)


def _expect_bufs(header, st=None):
    """Reader thread: a reply that carries buffers tells st (else the
    stream header names) their sizes, before the chunks that follow it."""
    if not header.get("bufs"):
        return
    if st is None:
        st = _stream_of(header)
    if st is not None:
        st.expect(header)


def chunk_into(header, n):
    """Reader thread (Channel.into): where a chunk of a streamed object is
    read, or None."""
    st = _stream_of(header)
    return None if st is None else st.into(n)


def cancel_frame(rid):
    """The frame that cancels request rid."""
    return {"op": "req", "id": rid, "kind": "cancel", "py": PY}


class Reply(object):
    """The slot a request's reply lands in: set once, by the reader thread,
    and waited for by the thread that sent the request.

    Not a threading.Event: a KeyboardInterrupt raised inside Event.wait's
    own code (on the main thread, between its lock's acquire and the with
    block, or before its release) keeps the Event's lock taken for good,
    and the reader, setting the reply, waits for ever, with every frame
    after it. Here setting takes nothing that waiting holds: it releases
    a lock that the waiter only acquires."""

    __slots__ = ("_done", "header", "data")

    def __init__(self):
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self.header = self.data = None

    def set(self, header, data):
        """Reader thread, with the link's lock held: the reply, once."""
        if self.header is None:
            self.data = data
            self.header = header  # last: it says the reply is whole
            self._done.release()

    def is_set(self):
        return self.header is not None

    def wait(self):
        """Wait for the reply; SIGINT interrupts it (the acquire)."""
        if self.header is None:
            self._done.acquire()


class Link(object):
    """Requests from this session to the hub, answered on the reader thread."""

    def __init__(self, chan):
        self.chan = chan
        self.sigint = getattr(chan, "sigint", None)  # see held()
        self.lock = threading.Lock()
        self.next = 0
        self.waiting = {}
        # Requests not ended yet (no last reply, no cancel sent): id ->
        # (the thread that made it, whether its transfer lasts past its
        # reply: a pull's or push's; ended says when it is over). See sweep.
        self.open = {}

    def request(self, kind, blob=None, stream=None, **fields):
        """Send a request and wait for its reply. With stream (a list), a
        Stream for the transfer's chunks is opened first and appended."""
        def opens(rid):
            stream.extend([rid, open_stream(("id", rid))])
        return self.finish(*self.start(kind, blob, opens if stream is not None else None, **fields))

    def start(self, kind, blob=None, opens=None, **fields):
        """Send a request; return its id and the slot its reply lands in,
        for finish. opens(id), when given, opens the streams of its
        transfer before it goes."""
        rid = None
        try:
            with held(), self.lock:
                self.next += 1
                rid = self.next
                slot = Reply()
                self.waiting[rid] = slot
                self.open[rid] = (threading.get_ident(), kind in ("pull", "push"))
            if opens is not None:
                opens(rid)
            header = dict((k, v) for k, v in fields.items() if v is not None)
            header.update(op="req", id=rid, kind=kind, py=PY)
            self.chan.send(header, blob)
        except BaseException:
            if rid is not None:
                self.drop(rid)
                if threading.get_ident() != getattr(self.sigint, "main", None):
                    self.ended(rid)  # not sent: a sweep is for the main thread's
            raise
        return rid, slot

    def ended(self, rid):
        """Request rid is over (a pull's or a push's last chunk, or its
        cancel went): nothing is left to cancel."""
        with held(), self.lock:
            self.open.pop(rid, None)

    def cancel(self, rid):
        """Ask the hub to cancel request rid (the targets it reached are
        interrupted; its reply still comes)."""
        self.chan.send(cancel_frame(rid))
        self.ended(rid)

    def sweep(self, ident):
        """Cancel the requests that thread ident made and that have not
        ended: the worker's, for its main thread, once a cell or a serve
        is over, where no SIGINT raises. A synchronous request's caller
        has stopped waiting by then; its cancel, sent as a KeyboardInterrupt
        unwound the wait, can be lost to a second one (a second interrupt,
        a flood of SIGINTs) that lands first, and the target would wait for
        the rest of a transfer for ever."""
        with self.lock:
            rids = sorted(rid for rid, (who, _) in self.open.items() if who == ident)
            for rid in rids:
                del self.open[rid]
                self.waiting.pop(rid, None)  # its late reply is dropped
        for rid in rids:
            self.chan.send(cancel_frame(rid))

    def finish(self, rid, slot):
        """Wait for the reply of request rid (start); it must be ok."""
        try:
            try:
                slot.wait()
            except KeyboardInterrupt:
                # Interrupting a caller interrupts what it waits for.
                self.cancel(rid)
                raise
        finally:
            self.drop(rid)
        header, data = slot.header, slot.data
        if not header.get("ok"):
            raise HubError(header.get("error") or "refused")
        return header, data

    def drop(self, rid):
        """Stop waiting for request rid's reply."""
        with held(), self.lock:
            self.waiting.pop(rid, None)

    def fail(self, error):
        """Answer every waiting request with error."""
        with self.lock:
            self.open.clear()
            for slot in self.waiting.values():
                slot.set({"ok": False, "error": error}, None)

    def dispatch(self, header, data):
        with self.lock:
            rid = header.get("id")
            if not header.get("first") and not self.open.get(rid, (None, False))[1]:
                self.open.pop(rid, None)  # its last reply
            slot = self.waiting.get(header.get("id"))
            if slot is not None and not slot.is_set():
                _expect_bufs(header)
                slot.set(header, data)
                return
        route(header, data)  # a streamed request's later replies


_link = None


def _need_link():
    if _link is None:
        raise HubError("this session is not connected to a hub")
    return _link


class SessionHandle(object):
    """A session seen from another one. Methods copy; nothing is shared."""

    def __init__(self, info):
        self._info = info
        self.name = info["name"]

    def __repr__(self):
        i = self._info
        where = "here" if i.get("host") in (None, "", "local") else "on " + (i.get("route") or i["host"])
        root = " as root" if i.get("root") else ""
        return "<session %r %s%s, python %s>" % (self.name, where, root, i.get("python"))

    def _streams(self):
        return streams_with(self._info.get("python"))

    def put(self, **names):
        """Copy names into the session's namespace."""
        bufs = _objstream().Buffers() if self._streams() else None
        _ask("put", dumps(names, bufs), bufs, target=self.name, names=sorted(names))

    def get(self, *names):
        """Copies of names from the session; several give a tuple."""
        if not names:
            raise TypeError("get() needs at least one name")
        values = _ask("get", None, None, self._streams(), target=self.name, names=list(names))[0]
        return values[0] if len(names) == 1 else tuple(values)

    def call(self, f_or_name, *args, **kwargs):
        """Run f (a function, which travels, or the name of one there) in the
        session; return a copy of its value, or keep it there with into=."""
        into = kwargs.pop("into", None)
        bufs = _objstream().Buffers() if self._streams() else None
        blob, src, cells = _call_parts(f_or_name, args, kwargs, bufs)
        value, _ = _ask("call", blob, bufs, bufs is not None and into is None,
                        target=self.name, into=into, src=src, cells=cells)
        return None if into is not None else value

    def sudo(self):
        """This session's root twin on the same host (named NAME.root)."""
        i = self._info
        host = i.get("host")
        return session(self.name + ".root", host=None if host in (None, "", "local") else host, sudo=True)

    def kill(self):
        """End the session and free its name."""
        _need_link().request("kill", target=self.name)

    def pull(self, path, dest=None):
        """Copy a file from the session: its bytes, or, with dest, into a
        file here (whole or not at all). Paths are as each side sees them."""
        link = _need_link()
        _need_path(path)
        if dest is not None:
            _sink_target(dest)  # refused before the session serves it
        st = []
        try:
            header, _ = link.request("pull", stream=st, target=self.name, path=path)
            rid, stream = st
            sink = _Sink(dest, header.get("mode", 0o600)) if dest is not None else None
            buf = []
            got = 0
            while True:
                h, data = stream.get()
                if h.get("eof"):
                    link.ended(rid)
                    if h.get("error"):
                        raise HubError(h["error"])
                    _check_size(path, got, header.get("size"))
                    break
                got += len(data)
                if sink is not None:
                    sink.write(data)
                    link.chan.release(data)
                else:
                    buf.append(bytes(data))
                    link.chan.release(data)
                link.chan.send({"op": "ack", "id": rid, "seq": h["seq"]})
            if sink is not None:
                sink.finish()
                return None
            return b"".join(buf)
        except BaseException:
            if st:
                link.cancel(st[0])
            if "sink" in locals() and sink is not None:
                sink.abort()
            raise
        finally:
            if st:
                close_stream(("id", st[0]))

    def push(self, src, dest):
        """Copy a file here (a path) or bytes to dest in the session."""
        link = _need_link()
        if isinstance(src, (bytes, bytearray, memoryview)):
            data, f, size, mode = bytes(src), None, len(src), 0o600
        else:
            f = _open_regular(os.path.expanduser(_need_path(src)), src, "push")
            try:
                fst = os.fstat(f.fileno())
                size, mode = fst.st_size, fst.st_mode & 0o7777
                data = _whole_if_small(f, size)  # serve_read's reason
            except BaseException:
                f.close()
                raise
            if data is not None:
                f.close()
                f, size = None, len(data)
        st = []
        try:
            link.request("push", stream=st, target=self.name, path=dest, size=size, mode=mode)
            rid, stream = st
            seq, off = 0, 0
            while True:
                stream.wait_window(seq)
                if f is not None:
                    chunk = _waiting(f, f.read, CHUNK, stream)
                else:
                    chunk, off = data[off:off + CHUNK], off + CHUNK
                if not chunk:
                    break
                link.chan.send({"op": "chunk", "id": rid, "seq": seq}, chunk)
                seq += 1
            link.chan.send({"op": "chunk", "id": rid, "seq": seq, "eof": True})
            while True:
                h, _ = stream.get()
                if h.get("done"):
                    link.ended(rid)
                    if not h.get("ok"):
                        raise HubError(h.get("error") or "push failed")
                    return None
        except BaseException:
            if st:
                link.cancel(st[0])
            raise
        finally:
            if f is not None:
                f.close()
            if st:
                close_stream(("id", st[0]))


def _call_parts(f_or_name, args, kwargs, bufs=None):
    """A call's blob, the source its target's transcript records, and the
    cell sources its tracebacks show."""
    return (_call_blob(f_or_name, args, kwargs, bufs),) + _call_notes(f_or_name)


def _call_blob(f_or_name, args, kwargs, bufs=None):
    what = "name" if isinstance(f_or_name, str) else "func"
    return dumps((what, f_or_name, args, kwargs), bufs)


def _call_notes(f_or_name):
    if isinstance(f_or_name, str):
        return f_or_name, None
    return _cap(_source(f_or_name), SRC_CAP), _cap_cells(cell_sources(f_or_name))


def _ask(kind, blob, bufs, oob=False, **fields):
    """A put, get or call: send blob, and bufs (its out-of-band buffers) as
    chunks once the target is ready for them; with oob, take the value's
    buffers the same way (objstream.ask). Returns (the value, the last
    reply)."""
    link = _need_link()
    if bufs or oob:
        return _objstream().ask(link, kind, blob, bufs, oob, fields)
    header, data = link.request(kind, blob, **fields)
    return reply_value(header, data)


def reply_value(header, data):
    """The value a reply to a put, get or call carries (None without one),
    and the reply."""
    return (loads(data, header.get("py")) if data is not None else None), header


def _source(f):
    try:
        import inspect
        return inspect.getsource(f)
    except Exception:
        return repr(f)


def session(name, host=None, sudo=None, python=None, jump=None):
    """Open session name (or attach to the live one). host and sudo, when
    given, insist on where and how it runs."""
    header, _ = _need_link().request("open", name=name, host=host, sudo=sudo, python=python,
                                     jump=list(jump) if jump is not None else None)
    if header.get("message"):
        # What became of a session of that name before (it died, or was
        # lost with a hub) is news to the caller: say it where they look.
        sys.stderr.write("[%s]\n" % header["message"])
    return SessionHandle(header["info"])


def sessions_on(hosts, name, sudo=None, python=None, jump=None):
    """Open (or attach to) session NAME@HOST on every host at once: hosts is
    a list of hosts or node sets ("lab-[1-4]", "@group"), or one string.
    Returns a group whose put, get and call the hub runs on all of them
    concurrently (replhub_toolkit.group, loaded at first use)."""
    from replhub_toolkit import group
    return group.sessions_on(hosts, name, sudo=sudo, python=python, jump=jump)


def sessions():
    """The sessions the hub has, as a list of dicts."""
    header, _ = _need_link().request("sessions")
    return header.get("sessions", [])


# -- serving requests from other sessions -----------------------------------

def serve(ns, header, data, stream=None):
    """Run one put/get/call for another session in namespace ns, or serve
    a file's read or write through stream (its chunks and acks); return
    (reply header, blob)."""
    kind = header.get("kind")
    sender = header.get("py")
    tag = "from %s:" % header.get("from", "?")
    register_cells(tag, header.get("cells"))
    if kind == "put":
        names = _take(header, data, stream)
        for k, v in names.items():
            ns[k] = rebind(v, ns, tag=tag)
        return {"ok": True}, None
    if kind == "get":
        missing = [n for n in header.get("names", []) if n not in ns]
        if missing:
            return {"ok": False, "error": "session has no name %s" % ", ".join(repr(n) for n in missing)}, None
        return _answer(header, [ns[n] for n in header["names"]], stream)
    if kind == "call":
        what, f, args, kwargs = _take(header, data, stream)
        if what == "name":
            import builtins
            fn = ns.get(f, getattr(builtins, f, None))
            if fn is None:
                return {"ok": False, "error": "session has no name %r to call" % f}, None
        else:
            fn = rebind(f, ns, tag=tag)
        result = fn(*args, **kwargs)
        into = header.get("into")
        if into is not None:
            ns[into] = result
            return {"ok": True, "kept": into}, None
        try:
            return _answer(header, result, stream)
        except CopyError as e:
            return {"ok": False, "error": "%s; or keep the value there: call(..., into='name')" % e}, None
    if kind == "read":
        return serve_read(header, stream)
    if kind == "write":
        return serve_write(header, stream)
    return {"ok": False, "error": "unknown request %r" % kind}, None


def _send(header, data=None):
    _need_link().chan.send(header, data)


def _take(header, data, stream):
    """The object of a put or call, its buffers streamed in when it has
    them (objstream.take)."""
    if not header.get("bufs"):
        return loads(data, header.get("py"))
    if stream is None or sys.version_info < (3, 8):
        raise HubError("Python %s cannot take an object streamed in protocol 5" % PY)
    return _objstream().take(header, data, stream)


def _answer(header, value, stream):
    """A get's or call's answer: the value's pickle, its big buffers
    streamed where the caller takes them (objstream.answer)."""
    if not (stream is not None and header.get("oob") and streams_with(header.get("py"))):
        return {"ok": True}, dumps(value)
    return _objstream().answer(header, value, stream)


def serve_read(header, stream):
    """Stream a file to the hub: a first answer with its size and mode, then
    chunks, at most WINDOW unacknowledged."""
    sid = header["sid"]
    path = header.get("path") or ""
    try:
        f = _open_regular(os.path.expanduser(_need_path(path)), path, "pull")
    except HubError as e:
        return {"ok": False, "error": str(e)}, None
    except OSError as e:
        return {"ok": False, "error": "cannot read %s: %s" % (path, e.strerror or e)}, None
    with f:
        try:
            st = os.fstat(f.fileno())
            # A regular file's size as it was when the pull began goes by
            # sendfile; whatever follows (a growing file, or one whose size
            # says nothing, as in /proc) is read through one reused buffer.
            # A small one is read whole first, as its size may not be what
            # it holds (sysfs says 4096 for a line).
            size = sized = st.st_size if stat.S_ISREG(st.st_mode) else 0
            whole = _whole_if_small(f, size, stream)
            if whole is not None:
                size = len(whole)
            _send({"op": "served", "sid": sid, "ok": True, "first": True, "py": PY,
                   "size": size, "mode": st.st_mode & 0o7777})
            if whole is not None:
                seq = 0
                if whole:
                    _send({"op": "chunk", "sid": sid, "seq": 0}, whole)
                    seq = 1
                _send({"op": "chunk", "sid": sid, "seq": seq, "eof": True})
            else:
                _stream_file(f, sid, stream, _need_link().chan, sized)
        except OSError as e:
            return {"ok": False, "error": "reading %s: %s" % (header.get("path"), e.strerror or e)}, None
    return {"ok": True}, None


SMALL_WHOLE = 64 << 10


def _whole_if_small(f, size, stream=None):
    """The bytes of f, whose size says size, if it has at most SMALL_WHOLE
    of them (then its size need not be right); else None, f at its start
    again. Read to its end: a file that waits gives part, then more."""
    if not 0 < size <= SMALL_WHOLE:
        return None
    got = b""
    while len(got) <= SMALL_WHOLE:
        b = _waiting(f, f.read, SMALL_WHOLE + 1 - len(got), stream)
        if not b:
            return got
        got += b
    f.seek(0)
    return None


def _waiting(f, read, arg, stream):
    """read(arg), of f, which _open_regular left nonblocking: a file that
    waits for what it gives (/proc/kmsg, a tracing pipe) answers None
    until it has some. The wait is made here, in rounds of POLL, so that
    the transfer's end (stream, when given) or an interrupt ends it, where
    a blocking read held the session until the file gave something. (poll,
    not select: a session may hold descriptors past 1023; and a file that
    says it has data and has none is waited for all the same.)"""
    import select
    import time
    poller, ready = None, False
    while True:
        got = read(arg)
        if got is not None:
            return got
        if stream is not None:
            stream.check()
        if ready:
            time.sleep(POLL)
        if poller is None:
            poller = select.poll()
            poller.register(f, select.POLLIN)
        ready = bool(poller.poll(int(POLL * 1000)))


def _stream_file(f, sid, stream, chan, sized):
    """Send f as a pull's chunks, then its end: the first sized bytes by
    sendfile where the channel can, the rest read."""
    seq, offset = 0, 0
    buf = view = None
    while True:
        stream.wait_window(seq)
        n = min(CHUNK, sized - offset)
        if n > 0 and chan.send_file({"op": "chunk", "sid": sid, "seq": seq}, f, offset, n):
            offset += n
            seq += 1
            continue
        sized = 0
        if buf is None:
            # One buffer, reused: send() has written a chunk out before it
            # returns, and fresh 8 MiB objects cost page faults each time.
            f.seek(offset)
            buf = bytearray(CHUNK)
            view = memoryview(buf)
        n = _waiting(f, f.readinto, buf, stream)
        if not n:
            break
        offset += n
        _send({"op": "chunk", "sid": sid, "seq": seq}, view[:n])
        seq += 1
    _send({"op": "chunk", "sid": sid, "seq": seq, "eof": True})


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(shown, mode, tail):
    """Why a transfer refuses shown, of mode: None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kind = [k for test, k in _KINDS if test(mode)] or ["not a file"]
    return "%s is %s, not a regular file: %s" % (shown, kind[0], tail)


def _need_path(path):
    if not path:
        raise HubError("the file's path is empty: give the file's path")
    return path


def _open_regular(path, shown, verb):
    """path (shown as shown) opened to read, if a regular file; else
    HubError. Checked before the open, so that no device is opened, and
    after it, on the fd: what took its place meanwhile (a FIFO) does not
    block the open (O_NONBLOCK), which would hold the session for good.
    It stays nonblocking: a regular file's reads ignore it, and one that
    only says it is regular is read through _waiting."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise HubError("%s is a folder: %s one file at a time (tar it first)" % (shown, verb))
    tail = "%s copies regular files only" % verb
    why = _not_regular(shown, mode, tail)
    if why is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        try:
            why = _not_regular(shown, os.fstat(fd).st_mode, tail)
            if why is None:
                return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise HubError(why)


def _check_size(shown, got, size):
    """A copy that ended short of the size its sender announced failed; a
    size that says nothing (/proc's files) is 0, and more is a file that
    grew meanwhile."""
    if size and got < size:
        raise HubError("the copy of %s ended at %d of its %d bytes (did it shrink meanwhile?)" % (shown, got, size))


def _sink_target(dest):
    """The file a _Sink for dest replaces, or HubError: renamed over, a
    FIFO or a device would be replaced by a file."""
    path = os.path.abspath(os.path.expanduser(_need_path(dest)))
    try:
        mode = os.stat(path).st_mode  # the file a link names
    except OSError:
        return os.path.realpath(path)
    if stat.S_ISDIR(mode):
        raise HubError("%s is a folder: give the file's own path" % dest)
    why = _not_regular(dest, mode, "only a regular file is replaced")
    if why:
        raise HubError(why)
    return os.path.realpath(path)


class _Sink(object):
    """Writes a file whole or not at all: NAME.replhub-part (0600) beside
    it, fsynced, renamed into place, the folder fsynced. Overwriting keeps
    the destination's mode (and owner, for root); a symlink stays a link to
    the replaced file; a new file takes mode."""

    def __init__(self, dest, mode):
        self.target = _sink_target(dest)
        self.part = self.target + ".replhub-part"
        self.mode = mode
        self.fd = os.open(self.part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(self.fd, 0o600)
        self.size = 0
        _sinks.add(self)

    def write(self, data):
        # A quarter megabyte per write(2): bigger writes fill the page cache
        # with large folios, which on a VM whose host takes back free memory
        # cost several times as much (see writePiece in hub/sink.go).
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view[:WRITE_PIECE])
            view = view[n:]
        self.size += len(data)
        _start_writeback(self.fd)

    def finish(self):
        os.fsync(self.fd)
        mode, owner = self.mode & 0o7777, None
        try:
            st = os.stat(self.target)
            mode, owner = st.st_mode & 0o7777, (st.st_uid, st.st_gid)
        except OSError:
            pass
        if owner is not None and os.geteuid() == 0:
            os.fchown(self.fd, owner[0], owner[1])
        os.fchmod(self.fd, mode)
        os.close(self.fd)
        self.fd = None
        os.rename(self.part, self.target)
        _sinks.discard(self)
        d = os.open(os.path.dirname(self.target), os.O_RDONLY)
        try:
            os.fsync(d)
        finally:
            os.close(d)

    def abort(self):
        _sinks.discard(self)
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        try:
            os.unlink(self.part)
        except OSError:
            pass


_sinks = set()


def abort_transfers():
    """The hub is gone: remove every partial file this session was writing."""
    for sink in list(_sinks):
        sink.abort()


def hub_gone():
    """The hub went away (a durable worker waits for the next one): what
    waited on it ends now, with an error, instead of waiting for ever."""
    abort_transfers()
    with _streams_lock:
        for stream in list(streams.values()):
            stream.cancel()
    if _link is not None:
        _link.fail("the hub went away while this waited on it; try again")


def serve_write(header, stream):
    """Receive a file from the hub into a _Sink, acknowledging each chunk;
    the part file goes when it fails or is cancelled."""
    sid = header["sid"]
    path = header.get("path") or ""
    sink = None
    try:
        try:
            sink = _Sink(path, header.get("mode", 0o600))
        except HubError as e:
            return {"ok": False, "error": str(e)}, None
        except OSError as e:
            return {"ok": False, "error": "cannot write %s: %s" % (path, e.strerror or e)}, None
        _send({"op": "served", "sid": sid, "ok": True, "first": True, "py": PY})
        while True:
            h, data = stream.get()
            if h.get("eof"):
                break
            sink.write(data)
            _need_link().chan.release(data)
            _send({"op": "ack", "sid": sid, "seq": h["seq"]})
        try:
            _check_size(path, sink.size, header.get("size"))
        except HubError as e:
            sink.abort()
            return {"ok": False, "error": str(e)}, None
        sink.finish()
        return {"ok": True, "size": sink.size}, None
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
