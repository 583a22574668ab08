"""replhub swap: a session's namespace to a file and back.

The hub swaps a session nobody has used for a while: the worker pickles its
namespace here and the hub ends it; the next exec under that name starts a
worker with the same Python, which loads the file (restore).

Pickling goes name by name, so that one name that cannot be pickled (a
socket, a lock, an open file) costs only itself. One pickler (cloudpickle's
where it loaded, else pickle's) with one memo serves every name, so that
objects shared between names stay shared, and one unpickler reads them back.
Before each name a small marker object is pickled: when a name fails, the
pickler's memo is cut back to before the marker and the name's bytes are
dropped, so the stream stays what an unpickler can follow. Functions defined
in cells keep the session's namespace as their globals (the namespace
itself is a reference: memo index 0, see PROLOGUE). Without cloudpickle
(Python 3.6 and 3.7, or none installed) functions and classes defined in
cells are refused with a reason, and data is kept.

The file, written only by the same user and loaded only by the Python
version that wrote it:

    b"REPLHUB-SWAP 1\n"
    one line of JSON: python, cwd, sys_path, pickler, protocol
    PROLOGUE (a pickle of the reference "ns", memoized)
    per name: b"R", name length (<H), name (UTF-8), length (<Q), then the
              marker's pickle and the value's pickle
    b"E"

Locally the worker writes the file at the path the hub gives (created
0600, never following a link) and reads it back the same way, after
checking that it is a regular file of this user with no group or other
bits. For a remote session the same bytes travel as chunk frames to the hub
and back: nothing is written on the host.

Standard library only; Python 3.6 through 3.13.
"""

import io
import json
import os
import pickle
import struct
import sys
import threading
import time
import types

MAGIC = b"REPLHUB-SWAP 1\n"
PY = "%d.%d" % sys.version_info[:2]
CHUNK = 8 << 20
WHY_CAP = 300
# TAPE_CAP bounds a streamed record kept in memory while it loads (see
# StreamIn.mark): a bigger one that fails to load costs the names after it.
TAPE_CAP = 256 << 20


class SwapError(Exception):
    """A swap or a restore that cannot go on at all."""


def _why(e):
    text = "%s: %s" % (type(e).__name__, e)
    return text if len(text) <= WHY_CAP else text[:WHY_CAP] + "..."


# -- what runs beside the main thread --------------------------------------

def threads():
    """(name, daemon) of the threads alive other than the main thread and
    replhub's own."""
    main = threading.main_thread()
    out = []
    for t in threading.enumerate():
        if t is main or t.name.startswith("replhub-") or not t.is_alive():
            continue
        out.append((t.name, t.daemon))
    return out


def children():
    """The worker's child processes that still run, as "pid N: command";
    read from /proc (elsewhere none are found)."""
    me = os.getpid()
    out = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for p in pids:
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            if int(fields[1]) != me or fields[0] in (b"Z", b"X"):
                continue
            cmd = _command(p)
        except (OSError, ValueError, IndexError):
            continue
        out.append("pid %s: %s" % (p, cmd[:200]))
    return sorted(out)


def _command(pid):
    """A process's command line. A child read while it execs shows none
    (Popen returns once the exec is past closing its descriptors, before the
    kernel sets the new command line): it is read again, a few times over
    20 ms, then its name in brackets stands in."""
    for _ in range(5):
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").strip()
        if cmd:
            return cmd.decode("utf-8", "replace")
        time.sleep(0.004)
    with open("/proc/%s/comm" % pid, "rb") as f:
        return "[%s]" % f.read().strip().decode("utf-8", "replace")


def tasks(loop):
    """The asyncio tasks not done on loop (the session's, where a cell
    awaited), as "asyncio task NAME"."""
    if loop is None or loop.is_closed():
        return []
    import asyncio
    return sorted("asyncio task %r" % (t.get_name() if hasattr(t, "get_name") else "?")
                  for t in asyncio.all_tasks(loop) if not t.done())


def background_job(loop=None):
    """What would keep a script from exiting: a thread that is not a daemon,
    a child process still running, or a task on the session's event loop
    (loop); "" when there is none."""
    jobs = ["thread %r" % name for name, daemon in threads() if not daemon] + children() + tasks(loop)
    return ", ".join(jobs)


# -- pickling --------------------------------------------------------------

def _refuse_file(obj):
    """An open file stays where it was opened: its contents may have
    changed by the time the session comes back."""
    name = getattr(obj, "name", None)
    raise TypeError("an open file%s cannot be swapped: open it again after the restore"
                    % (" (%s)" % name if isinstance(name, str) else ""))


def _module_reduce(m):
    import importlib
    if sys.modules.get(m.__name__) is not m:
        raise TypeError("module %s was not imported by its name" % m.__name__)
    return importlib.import_module, (m.__name__,)


# Every pickle stream opens with PROLOGUE: it makes the unpickler load the
# namespace (persistent id "ns") and memoize it at index 0, where _pickler
# puts it in the pickler's memo. A reference to the namespace (a function's
# globals) is then an ordinary memo get, with no Python call per object
# pickled, as a persistent_id method would cost.
PROLOGUE = b"\x80\x04\x8c\x02nsQ\x94."  # PROTO 4, "ns", BINPERSID, MEMOIZE, STOP

_FILE_TYPES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom,
               io.BufferedRWPair, io.FileIO)


def _refuse_cell_code(obj):
    if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == "__main__":
        why = "Python %s" % PY if sys.version_info < (3, 8) else "cloudpickle is not installed"
        raise TypeError("%s %s was defined in a cell, and without cloudpickle (%s) only data is swapped"
                        % ("class" if isinstance(obj, type) else "function", obj.__qualname__, why))


def _pickler(out, ns, tk):
    """A pickler writing to out that keeps ns as a reference (memo index 0,
    see PROLOGUE), refuses open files, and (without cloudpickle) refuses
    code defined in cells."""
    import copyreg
    tk._ensure_cloudpickle()
    cp = tk.cloudpickle
    refuse = dict((t, _refuse_file) for t in _FILE_TYPES)
    if cp is not None:
        from collections import ChainMap
        base = getattr(cp, "CloudPickler", None) or cp.Pickler

        class Pickler(base):
            # Before cloudpickle's own reducers, which would send an open
            # text file as a StringIO. A class attribute: the C pickler
            # reads it when it is made, and an instance's would not count.
            dispatch_table = ChainMap(refuse, base.dispatch_table)

        p = Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
        refs = getattr(p, "globals_ref", None)
        if isinstance(refs, dict):
            # A function of a cell gets ns itself as its globals: after the
            # restore it sees the session's names.
            refs[id(ns)] = ns
        kind = "cloudpickle"
    else:
        if sys.version_info >= (3, 8):
            class Pickler(pickle.Pickler):
                def reducer_override(self, obj):
                    _refuse_cell_code(obj)
                    return NotImplemented
        else:
            # No reducer_override before 3.8: a Python call per object.
            class Pickler(pickle.Pickler):
                def persistent_id(self, obj):
                    _refuse_cell_code(obj)
                    return None
        p = Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
        table = copyreg.dispatch_table.copy()
        table.update(refuse)
        table[types.ModuleType] = _module_reduce
        p.dispatch_table = table
        kind = "pickle"
    p.memo = {id(ns): (0, ns)}
    return p, kind


class FileOut(object):
    """Records straight into a file descriptor: a failed name is cut off
    again. The pickler writes to target, which hands write(2) at most
    PIECE bytes at a time: on a VM whose host takes back freed memory,
    filling the page cache in big writes costs several times as much (see
    writePiece in hub/sink.go)."""

    PIECE = 256 << 10
    # The disk is looked at every CHECK bytes: the swap stops while RESERVE
    # (at most a twentieth of the disk) is still free, as the hub does for
    # a remote session's swap (diskRoom in hub/swap.go).
    CHECK = 16 << 20
    RESERVE = 1 << 30

    def __init__(self, fd):
        self.fd = fd
        self.target = self
        self.unchecked = self.CHECK

    def write(self, b):
        view = memoryview(b)
        n = len(view)
        self.unchecked += n
        try:
            if self.unchecked >= self.CHECK:
                self._room(n)
            while view:
                view = view[os.write(self.fd, view[:self.PIECE]):]
        except OSError as e:
            # The disk, not the name: the whole swap fails, the session goes on.
            raise SwapError("writing the swap: %s" % (e.strerror or e))
        return n

    def _room(self, n):
        self.unchecked = 0
        st = os.fstatvfs(self.fd)
        reserve = min(self.RESERVE, st.f_blocks * st.f_frsize // 20)
        if st.f_bavail * st.f_frsize - max(n, self.CHECK) < reserve:
            raise SwapError("writing the swap: the disk would have less than %d MB free: the swap stops"
                            % (reserve >> 20))

    def tell(self):
        return os.lseek(self.fd, 0, os.SEEK_CUR)

    def begin(self, name):
        self.start = self.tell()
        nb = name.encode("utf-8", "surrogatepass")
        self.write(b"R" + struct.pack("<H", len(nb)) + nb + b"\0" * 8)
        self.body = self.start + 11 + len(nb)

    def commit(self):
        end = self.tell()
        os.pwrite(self.fd, struct.pack("<Q", end - self.body), self.body - 8)

    def rollback(self):
        os.ftruncate(self.fd, self.start)
        os.lseek(self.fd, self.start, os.SEEK_SET)

    def raw(self, b):
        self.write(b)

    def finish(self):
        os.fsync(self.fd)
        return self.tell()


class StreamOut(object):
    """Records as chunk frames to the hub: each name is pickled into a
    buffer first, and only a whole one is sent."""

    def __init__(self, chan, sid):
        self.chan, self.sid = chan, sid
        self.buf = self.target = io.BytesIO()
        self.pending = bytearray()
        self.seq = 0
        self.size = 0

    def begin(self, name):
        self.buf.seek(0)
        self.buf.truncate()
        self.head = name.encode("utf-8", "surrogatepass")

    def commit(self):
        body = self.buf.getbuffer()
        self.raw(b"R" + struct.pack("<H", len(self.head)) + self.head + struct.pack("<Q", len(body)))
        self.raw(body)
        del body
        self.buf.seek(0)
        self.buf.truncate()

    def rollback(self):
        self.buf.seek(0)
        self.buf.truncate()

    def raw(self, b):
        view = memoryview(b)
        while view:
            room = CHUNK - len(self.pending)
            self.pending += view[:room]
            view = view[room:]
            if len(self.pending) >= CHUNK:
                self._send()

    def _send(self):
        self.chan.send({"op": "chunk", "sid": self.sid, "seq": self.seq}, bytes(self.pending))
        self.size += len(self.pending)
        self.seq += 1
        self.pending = bytearray()

    def finish(self):
        if self.pending:
            self._send()
        return self.size


def swap(session, header, chan, tk):
    """Pickle session's namespace to header["path"], or as chunks with
    header["sid"]; return the swapped frame's fields."""
    ns = session.ns
    force = bool(header.get("force"))
    job = background_job(getattr(session, "aloop", None))
    if job and not force:
        return {"op": "swapped", "ok": False, "job": job}
    path = header.get("path")
    fd = None
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        out = FileOut(fd)
    else:
        out = StreamOut(chan, header.get("sid"))
    try:
        p, kind = _pickler(out.target, ns, tk)
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = ""
        meta = {"python": "%d.%d.%d" % sys.version_info[:3], "py": PY, "cwd": cwd,
                "sys_path": [x for x in sys.path if isinstance(x, str)], "pickler": kind,
                "protocol": pickle.HIGHEST_PROTOCOL}
        out.raw(MAGIC + json.dumps(meta).encode("utf-8") + b"\n" + PROLOGUE)
        names, skipped, markers = [], [], []
        for name in list(ns):
            if not isinstance(name, str) or name in session.base_names:
                continue
            try:
                value = ns[name]
            except KeyError:
                continue  # a thread removed it meanwhile
            marker = []
            markers.append(marker)
            out.begin(name)
            p.dump(marker)
            try:
                p.dump(value)
            except SwapError:
                raise
            except MemoryError:
                raise SwapError("out of memory while pickling %s: the swap stops" % name)
            except Exception as e:
                out.rollback()
                memo = p.memo.copy()
                cut = memo[id(marker)][0]
                p.memo = dict((k, v) for k, v in memo.items() if v[0] < cut)
                skipped.append({"name": name, "why": _why(e)})
                continue
            out.commit()
            names.append(name)
        out.raw(b"E")
        size = out.finish()
    finally:
        if fd is not None:
            os.close(fd)
    running = ["%s%s" % (name, " (daemon)" if daemon else "") for name, daemon in threads()]
    return {"op": "swapped", "ok": True, "names": names, "skipped": skipped, "threads": running,
            "children": children(), "size": size, "cwd": meta["cwd"]}


# -- restoring ---------------------------------------------------------------

def open_checked(path):
    """Open a swap file for reading, only if it is a regular file of this
    user with no group or other bits (never following a link)."""
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SwapError("%s is not a regular file" % path)
        if st.st_uid != os.geteuid():
            raise SwapError("%s belongs to uid %d, not to this user" % (path, st.st_uid))
        if st.st_mode & 0o077:
            raise SwapError("%s has mode %04o: group or others may read or write it" % (path, st.st_mode & 0o7777))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", 1 << 16)


class FileIn(object):
    """Records from a file. The unpickler reads source: the file without
    peek, since an unpickler that can peek keeps what it peeked past a
    pickle's end for its next load, which here is the next record's head."""

    def __init__(self, f):
        self.f = f
        self.read, self.readline = f.read, f.readline
        self.source = _NoPeek(f)

    def tell(self):
        return self.f.tell()

    def skip_to(self, pos):
        self.f.seek(pos)

    def mark(self, n):
        pass

    def record(self, start, end):
        """A file positioned at start, to read the record up to end."""
        self.f.seek(start)
        return self.f


class _NoPeek(object):
    def __init__(self, f):
        self.read, self.readline, self.readinto = f.read, f.readline, f.readinto


class _Chain(object):
    """head's bytes, then f's: an unpickler made after a failed name reads
    the pickle that rebuilds its memo first (see _Realign)."""

    def __init__(self, head, f):
        self.head, self.f = io.BytesIO(head), f

    def read(self, n=-1):
        return self.head.read(n) or self.f.read(n)

    def readline(self, limit=-1):
        return self.head.readline(limit) or self.f.readline(limit)

    def readinto(self, b):
        return self.head.readinto(b) or self.f.readinto(b)


class StreamIn(object):
    """Records from the hub's chunk frames, acknowledged as they are used,
    so that at most a few are in flight."""

    def __init__(self, stream, chan, sid):
        self.stream, self.chan, self.sid = stream, chan, sid
        self.source = self
        self.cur = memoryview(b"")
        self.pos = 0
        self.eof = False
        self.tape = None  # what the current record has used so far (see mark)

    def _more(self):
        if self.eof:
            return False
        h, data = self.stream.get()
        if h.get("eof"):
            self.eof = True
            return False
        self.cur = memoryview(bytes(data))
        self.chan.release(data)
        self.chan.send({"op": "ack", "sid": self.sid, "seq": h["seq"]})
        return True

    def read(self, n=-1):
        parts = []
        while n != 0:
            if not self.cur and not self._more():
                break
            k = len(self.cur) if n < 0 else min(n, len(self.cur))
            parts.append(self.cur[:k])
            self.cur = self.cur[k:]
            self.pos += k
            n = n - k if n > 0 else n
        if self.tape is not None:
            self.tape.extend(parts)
        return b"".join(parts)

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readline(self, limit=-1):
        parts = []
        while True:
            if not self.cur and not self._more():
                break
            i = bytes(self.cur[:1 << 16]).find(b"\n")
            k = len(self.cur) if i < 0 else i + 1
            k = min(k, 1 << 16)
            parts.append(self.cur[:k])
            self.cur = self.cur[k:]
            self.pos += k
            if i >= 0:
                break
        if self.tape is not None:
            self.tape.extend(parts)
        return b"".join(parts)

    def tell(self):
        return self.pos

    def skip_to(self, pos):
        self.tape = None
        while self.pos < pos:
            if not self.read(min(pos - self.pos, CHUNK)):
                raise SwapError("the swap ended inside a name")

    def mark(self, n):
        """Keep what the next n bytes (a record) use, as views of the
        chunks, so that a name that fails to load can be read again; a
        record over TAPE_CAP is not kept."""
        self.tape = [] if n <= TAPE_CAP else None

    def record(self, start, end):
        """The record from start to end, or None when it was not kept."""
        if self.tape is None or start + sum(len(v) for v in self.tape) != self.pos:
            return None
        head = b"".join(self.tape)
        self.tape = None
        return io.BytesIO(head + self.read(end - self.pos))


def _exact(src, n):
    b = src.read(n)
    if len(b) != n:
        raise SwapError("the swap file ends early: it is damaged")
    return b


class Lost(object):
    """What a name that failed to load leaves in the objects it shared
    with later names (see _Realign)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "<lost in the swap with %s>" % self.name


_ATOMS = (str, bytes, int, float, complex, bool, type(None))


def _memoized(f):
    """The memo entries the two pickles of a record at f's position add."""
    import pickletools
    n = 0
    for _ in range(2):
        for op, arg, pos in pickletools.genops(f):
            if op.name == "MEMOIZE":
                n += 1
    return n


class _Realign(object):
    """Makes a new unpickler after a name failed to load. The old one may
    hold the rest of the failed record's frame, which it would read as the
    next record, and its memo has only the objects loaded before the
    failure, where the pickler's went on to the record's end.

    The new unpickler's memo is the old one's, cut or filled with Lost up
    to the pickler's count, which is read off the record's bytes. Setting
    memo does not carry the count of entries the C unpickler numbers the
    next MEMOIZE by (it keeps the count of the memo it replaces), so a memo
    of as many entries is set first, and the Lost ones are put in by a
    small pickle the new unpickler reads before the stream (_Chain)."""

    def __init__(self, make):
        self.make = make
        self.ok = None

    def __call__(self, u, source, marker, f, name):
        """The unpickler to go on with, or None when that cannot be done."""
        if f is None or not self.works():
            return None
        values = list(u.memo.copy().values())  # by index: no gaps
        have = base = len(values)
        if marker is not None:
            for i in range(have - 1, -1, -1):
                if values[i] is marker:
                    base = i
                    break
        # What the failed name loaded whole (a string, a number) is kept
        # for the names after it; a container may be half filled.
        lost = [i for i in range(base, have) if type(values[i]) not in _ATOMS]
        del values
        try:
            top = base + _memoized(f)
        except Exception:
            return None
        return self._renew(u, source, have, lost + list(range(have, top)), name)

    def _renew(self, u, source, have, lost, name):
        head = b"\x80\x04\x8c" + struct.pack("<B", len(b"lost")) + b"lostQ"
        puts = b"".join(b"r" + struct.pack("<I", i) for i in lost)
        v = self.make(_Chain(head + puts + b".", source), name)
        v.memo = dict.fromkeys(range(have))
        v.memo = u.memo
        v.load()
        return v

    def works(self):
        """Whether _renew gives the count this Python numbers by: tried
        once on a small stream."""
        if self.ok is None:
            try:
                u = self.make(io.BytesIO(pickle.dumps(["x", "y"], protocol=4)), "probe")
                u.load()  # memo 0..2
                # As if the last entry were a failed record's, which memoized 3.
                after = b"\x80\x04\x8c\x01z\x94h\x05h\x04\x86."
                v = self._renew(u, io.BytesIO(after), 3, [2, 3, 4], "probe")
                z, lost = v.load()
                self.ok = z == "z" and isinstance(lost, Lost) and v.memo.copy()[1] == "x"
            except Exception:
                self.ok = False
        return self.ok


def restore(session, src, tk):
    """Load the records of src into session's namespace; return the
    restored frame's fields. A name that fails to load costs only itself
    (see _Realign), unless it cannot be read again: then the names after
    it are not loaded either, and say so."""
    if src.readline() != MAGIC:
        raise SwapError("not a replhub swap file")
    meta = json.loads(src.readline().decode("utf-8"))
    if meta.get("py") != PY:
        raise SwapError("the swap was made by Python %s, and this is Python %s: a pickle loads only "
                        "into the version that made it" % (meta.get("python"), sys.version.split()[0]))
    notes = []
    cwd = meta.get("cwd")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as e:
            notes.append("its folder %s is gone (%s); it runs in %s" % (cwd, e.strerror or e, os.getcwd()))
    saved = meta.get("sys_path") or []
    sys.path[:] = saved + [x for x in sys.path if x not in saved]
    if meta.get("pickler") == "cloudpickle":
        tk._ensure_cloudpickle()
    ns = session.ns

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            if pid == "ns":
                return ns
            if pid == "lost":
                return self.lost
            raise pickle.UnpicklingError("unknown reference %r" % (pid,))

    def make(source, name):
        u = Unpickler(source)
        u.lost = Lost(name)
        return u

    realign = _Realign(make)
    u = make(src.source, "")
    if u.load() is not ns:  # PROLOGUE: ns is now memo index 0
        raise SwapError("the swap file is damaged (no prologue)")
    names, skipped = [], []
    lost = None  # why the names from here on are not loaded
    while True:
        tag = _exact(src, 1)
        if tag == b"E":
            break
        if tag != b"R":
            raise SwapError("the swap file is damaged (a record starts with %r)" % tag)
        (k,) = struct.unpack("<H", _exact(src, 2))
        name = _exact(src, k).decode("utf-8", "surrogatepass")
        (n,) = struct.unpack("<Q", _exact(src, 8))
        start = src.tell()
        end = start + n
        if lost is not None:
            skipped.append({"name": name, "why": lost})
            src.skip_to(end)
            continue
        src.mark(n)
        marker = None
        try:
            marker = u.load()
            value = u.load()
        except Exception as e:
            skipped.append({"name": name, "why": _why(e)})
            u = realign(u, src.source, marker, src.record(start, end), name)
            if u is None:
                lost = "not loaded: %s before it failed to load and could not be read past" % name
        else:
            if isinstance(value, Lost):
                skipped.append({"name": name, "why": "it was %s, which did not load" % value.name})
            else:
                ns[name] = value
                names.append(name)
        src.skip_to(end)
    return {"op": "restored", "ok": True, "names": names, "skipped": skipped, "note": "; ".join(notes)}
