# replhub worker: one session's Python process.
#
# This file owns the session loop and the frame protocol with the hub, as
# DESIGN.md lays them out:
#
# * frames travel on private duplicates of the original fds 0 (hub -> worker)
#   and 1 (worker -> hub), made before any user code runs;
# * fds 1 and 2 then point at two pipes that a pump thread forwards to the
#   original stderr, which the hub reads as the session's output: stdout and
#   stderr apart (stdout runs bracketed by markers built from a token the
#   ready frame tells, none written before it), print(), subprocesses and C
#   code in the order they were written (see Pump); fd 0 becomes /dev/null so
#   input() sees EOF;
# * a frame is one line of UTF-8 JSON, under 1 MiB, followed by exactly "len"
#   raw bytes when the header has that key;
# * after each cell the worker flushes, writes the cell's fence token to its
#   stdout and sends "done": the hub needs both before it calls the cell
#   finished. When nothing at all went out since the last fence, it writes
#   none, and says so in done's "quiet" (see Pump.fence).
#
# Frames, protocol 2 (hub -> worker):
#   exec {cell, code, fence, names?}  run a cell (names: list them in its
#                                     done frame, changed or not)
#   serve {sid, kind, from, py, ...}  put/get/call (blob in len), read/write a file
#   chunk {sid|id, seq, eof?, len}    ack {sid|id, seq}     a transfer's data
#   reply {id, ok, error?, ...}       the answer to one of our req frames
#   interrupt {cell}  -> interrupted {cell, how}: "delivered" (KeyboardInterrupt
#                     raised in the running cell), "parked" (the cell has not
#                     started its code: it ends with KeyboardInterrupt instead),
#                     "none" (the cell is not running)
#   cancel {sid}      stop what is served for sid (a transfer between chunks,
#                     put/get/call by KeyboardInterrupt, a queued one at once)
#   ping {id} -> pong {id}
#   exit              end now (a durable worker outlives its frame stream)
#   adopt             a new hub's first frame on a durable worker's socket
#                     -> ready {adopted, cell, running, fence, streams, names?},
#                     then the last done frame and the output that waited
#                     for a hub
#   detach {fence}    the hub hands us over: output to it ends with fence,
#                     then detached; the rest waits for the next hub
#   swap {sid, path?, force?} -> [chunk...] swapped {sid, ok, ...}     see replhub_toolkit/swap.py
#   restore {sid, path?} -> [ack -1, chunks in] restored {sid, ok, ...}
#   query {id, kind, expr?, text?, all?, keep_imports?, limit?, wait?}
#                     -> answer {id, ok, error?, busy?, cell?, waited?, ...}:
#                     vars, inspect, complete or reset (names: the list
#                     after it), between cells, on a thread of its own; see
#                     replhub_toolkit/query.py
# Worker -> hub: ready, done {cell, status, value, error, duration, names?
# (when they changed, or to a new hub: Names), rss?, display?: [{mime,
# size}], dropped?, quiet?, len?} (the display items' bytes, one after
# another, are its payload: replhub_toolkit/display.py), served
# {sid, ok, error?, py, ...}, req {id, kind, py, ...}, chunk, ack,
# interrupted, pong, answer, out (output, once adopted), detached, error
# {id?, error}.
#
# A cell that awaits at top level (3.8+) runs on the session's event loop,
# which the main thread also runs between cells (Session._await, _spin).
#
# SIGINT (see Sigint) is raised as KeyboardInterrupt only while user code runs,
# and never inside a frame write, so no frame is ever torn.  A session whose
# code replaces the SIGINT handler with its own gives that guarantee up; one
# that puts back signal.default_int_handler gets ours again at the next cell.
#
# If the worker leads its process group, a reaper process kills the group
# when the worker dies, however it dies (see _start_reaper).
#
# Standard library only; runs on Python 3.6 through 3.13.  Keep it small.

import builtins
import io
import os
import sys

# The worker's own copies of the builtins and of os's names: a cell that
# rebinds or deletes one (builtins.str = None, a mock of os.write) changes
# its own, not the worker's.
__builtins__ = dict(builtins.__dict__)
os = type(sys)("os")
os.__dict__.update(sys.modules["os"].__dict__)

PROTO = 2
PY = "%d.%d" % sys.version_info[:2]
_WORKER_FILE = __file__ if "__file__" in globals() else "<replhub-worker>"
IMPORTER = None  # boot.py's, on a host: it asks for late modules through fetch
BYTECODE = ""    # boot.py's word on its bytecode cache, which ready tells

# What the worker reports is capped before a frame is built: the hub ends a
# session whose frame header is 1 MiB or more.
MAX_HEADER = 1 << 20
VALUE_CAP = 10000       # a cell's value (its repr)
MESSAGE_CAP = 10000     # an exception's message
TRACEBACK_CAP = 30000   # a formatted traceback
NAME_CAP = 100          # a name in "names" (longer ones are left out)
NAMES_MAX = 200
READY_NAMES_BYTES = 32 << 10  # of names in a ready frame, which the hub reads within 64 KiB
ERROR_CAP = 2000        # the text of an error frame
ANSWER_OF = {"serve": "served", "swap": "swapped", "restore": "restored"}  # a frame served for a sid, its answer's op
QUERIES_MAX = 4         # query frames answered at once
PID = os.getpid()       # the worker's; a process a cell forks has its own

# What the main thread is doing (Session.phase).
IDLE, PARSING, RUNNING, TRANSFER, FINISHING = "idle", "parsing", "running", "transfer", "finishing"


def _grow_pipe(fd):
    """Before the first big frame each way: a 1 MiB pipe moves a file chunk
    in a few wakeups, not one per 64 KiB. Linux only, best effort
    (F_SETPIPE_SZ is 1031); a socket pair's end (a local worker's stdout)
    takes a 1 MiB send buffer instead, as far as the kernel lets it; a
    terminal just says no."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except Exception:
        try:
            import socket
            s = socket.socket(fileno=fd)
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            finally:
                s.detach()
        except Exception:
            pass


_MSG_DONTWAIT = 0x40  # Linux's; socket.MSG_DONTWAIT where the module has it


_KEPT = []  # files on a number a cell took over (Session.read_loop)


def _fd_id(fd):
    """What fd refers to: a cell's os.closerange and a later open may put a
    file of its own under a number the channel had."""
    try:
        st = os.fstat(fd)
        return st.st_dev, st.st_ino
    except (OSError, ValueError):
        return None


def _nonblocking(fd):
    try:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    except (ImportError, OSError):
        pass


def _monotonic():
    import time
    return time.monotonic()


def _cap(text, limit):
    """Keep head and tail of text within limit characters."""
    if len(text) <= limit:
        return text, 0
    keep = limit // 2
    dropped = len(text) - 2 * keep
    return (text[:keep] + "\n[... %d characters left out ...]\n" % dropped + text[-keep:]), dropped


def _not_json(o):
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)


class _Scanning(object):
    """What _json's scanner reads of a JSONDecoder: json.loads's defaults."""
    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = staticmethod({"NaN": float("nan"), "Infinity": float("inf"),
                                   "-Infinity": float("-inf")}.__getitem__)


def _frame_codec():
    """(loads, dumps) for frame headers, as json.loads and json.dumps with
    separators=(",", ":") and ensure_ascii=False do them, on _json's C
    scanner and encoder straight: the package json (and re, which it
    imports) costs a session's start some 3 ms. Where _json is missing,
    json's own."""
    try:
        import _json
        scan = _json.make_scanner(_Scanning())
        encode = _json.make_encoder(None, _not_json, _json.encode_basestring, None, ":", ",",
                                    False, False, True)
    except (ImportError, AttributeError, TypeError):
        import json
        return json.loads, lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False)

    def loads(text):
        text = text.strip(" \t\r\n")
        try:
            value, end = scan(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            raise ValueError("not one JSON value")
        return value

    def dumps(o):
        return "".join(encode(o, 0))
    return loads, dumps


_loads, _dumps = _frame_codec()


class Sigint(object):
    """When SIGINT becomes KeyboardInterrupt on the main thread (Python runs
    signal handlers there only).

    It is raised only while user code runs (live), and never inside a frame
    write: a write is a critical section (this object is its context
    manager, entered before the channel's lock is taken), and a SIGINT that
    lands in one is kept pending and raised when the outermost one ends.
    So is every taking of a lock that the reader thread takes too, on the
    main thread while live (Session._run and _stop, relay.held): raised
    there, it could keep the lock taken for good.
    At any other time (between cells, while a cell parses or finishes, while
    a file is served) it is dropped. sent says that the reader thread sent
    one that has not been raised yet: the cell then ends with
    KeyboardInterrupt even if its code finished first.

    Nor is it raised in the worker's own code around user code (guarded:
    the code of the functions that enter and leave it, and this object's
    own, a handler included that a second SIGINT interrupts), where user
    code is not running: raised as a cell's end goes into that
    bookkeeping, or as a section is entered, it would escape the cell and
    end the worker. The toolkit adds the code of its helpers whose
    cleanups must run whole (replhub_toolkit.guard). It is kept pending there, as in a
    section; an interrupt the reader sent is sent again until raised
    (Session._nudge)."""

    def __init__(self):
        import threading
        self._ident = threading.get_ident
        self.main = threading.get_ident()
        self.live = False
        self.sent = False
        self.depth = 0
        self.pending = False
        self.extra = 0  # SIGINTs sent again for the one sent (Session._nudge)
        # A set that guard() and _guard_loops update in one call (update
        # with a tuple), which neither another thread nor a signal cuts.
        self.guarded = set(f.__code__ for f in (
            Sigint.__enter__, Sigint.__exit__, Sigint.handler, Sigint._fire))
        # cancel() -> bool: a cell that awaits is interrupted by cancelling
        # its task (Session._cancel_await), not by raising in the loop.
        self.cancel = None

    def handler(self, signum, frame):
        if not self.live:
            return
        if self.extra and not self.sent:
            # Sent again (Session._nudge) as the first was being raised:
            # not a second interrupt.
            self.extra = 0
            return
        if self.depth or (frame is not None and frame.f_code in self.guarded):
            self.pending = True
            return
        self._fire()

    def _fire(self):
        # One interrupt, one KeyboardInterrupt: a SIGINT kept pending (in a
        # guarded frame) and the one sent again that raises are the same.
        self.sent = self.pending = False
        if self.cancel is not None and self.cancel():
            return
        raise KeyboardInterrupt

    def __enter__(self):
        if self._ident() == self.main:
            self.depth += 1
        return self

    def __exit__(self, etype, value, tb):
        if self._ident() != self.main:
            return False
        if self.depth == 1 and self.pending:
            self.pending = False
            self.depth = 0
            if self.live and etype is None:
                self._fire()
            return False
        self.depth -= 1
        return False


class _PoolBuffer(bytearray):
    """A chunk buffer of Channel's pool: only these go back to it."""


class Channel(object):
    """Frames over two file descriptors; send() may be called from any thread."""

    def __init__(self, rfd, wfd, sigint=None):
        import threading
        self._r = os.fdopen(rfd, "rb", 1 << 16)
        self._w = wfd
        self._lock = threading.Lock()
        self.sigint = sigint or Sigint()
        self._big = False
        self._big_in = False
        self._pool = []
        # into(header, n): where a chunk's n bytes are read, if not into a
        # buffer of the pool (a streamed object's, see objstream.py).
        self.into = None
        # A durable worker outlives its hub: a frame that finds the hub gone
        # is dropped (down), but a cell's done frame is held for the next
        # hub (held: its header line and payload).
        self.durable = False
        self.down = False
        self.down_at = 0.0
        self.held = None
        # Each hub connection is a generation, read by its own reader
        # thread; last_done is the last done frame sent, which a new hub
        # is sent again (it may have been lost with the link).
        self.gen = 0
        self.last_done = None
        # A link can die without a word (a frozen VPN): writes to it wait
        # a bounded time in turn (_await_writable), and give up once a new
        # hub is taking over (_superseding), instead of blocking for ever
        # with the lock held. The first link's pipe is made non-blocking;
        # a socket link is written with MSG_DONTWAIT (its reader shares the
        # socket's blocking mode).
        self._superseding = False
        self._wsock = None
        self._ids = _fd_id(rfd), _fd_id(wfd)
        # A copy of the first link's write end, for the one frame that
        # says the cell closed the channel (_say_closed_locked); a later
        # link's is its socket object's own descriptor.
        self._spare = os.dup(wfd)
        _nonblocking(wfd)

    def _line(self, header, n):
        """header's line, announcing n bytes to follow (None: no payload);
        the pipe grows before the first big payload. Raises ValueError for
        a header of 1 MiB or more: the hub would end the session."""
        if n is not None:
            header["len"] = n
            if n > (1 << 20) and not self._big:
                self._grow_pipe()
        # Text goes as UTF-8 (a character is at most 6 bytes, not 12); a
        # lone surrogate becomes its JSON escape.
        line = _dumps(header).encode("utf-8", "backslashreplace") + b"\n"
        if len(line) >= MAX_HEADER:
            raise ValueError("replhub: a %s frame of %d bytes is over the hub's limit of 1 MiB"
                             % (header.get("op"), len(line)))
        return line

    def send(self, header, data=None):
        line = self._line(header, None if data is None else len(data))
        with self.sigint:
            with self._lock:
                if not self.down:
                    try:
                        self._write(line)
                        if data:
                            self._write(data)
                        if header.get("op") == "done":
                            self.last_done = line + bytes(data or b"")
                        return
                    except OSError:
                        if not self.durable:
                            raise
                        self._lost_locked()
                if header.get("op") == "done":
                    self.held = self.last_done = line + bytes(data or b"")
                    return
        raise OSError(32, "the hub went away")

    def cut(self, gen):
        """Close generation gen's write side, while it is still ours and
        current (see read_loop)."""
        with self._lock:
            if gen == self.gen:
                self._say_closed_locked()
                if _fd_id(self._w) == self._ids[1]:
                    _shut(self._w)
                    _close(self._w)
                self._lost_locked()

    def _say_closed_locked(self):
        """Tell the hub that the session's own code closed the channel
        (the closed frame), on a copy of its write end the code left alone,
        then let go of the copy. The end of the stream would say as much,
        but where another process holds a copy of it (sudo holds a root
        worker's), that end never comes, and the hub would wait on the
        running cell for good."""
        line = b'{"op":"closed"}\n'
        spare, self._spare = self._spare, None
        try:
            if self._wsock is not None:
                if _fd_id(self._wsock.fileno()) == self._ids[1]:
                    self._wsock.send(line, _MSG_DONTWAIT)
            elif spare is not None and _fd_id(spare) == self._ids[1]:
                os.write(spare, line)
        except OSError:
            pass  # a full or broken link: its end says it, where it can
        if spare is not None and _fd_id(spare) == self._ids[1]:
            _shut(spare)
            _close(spare)

    def check_closed(self):
        """Say closed (see _say_closed_locked) where a cell's code closed
        the write end and the worker has written nothing since: the copy
        kept for it would keep the stream's end from the hub until the
        next frame, and a quiet cell would look running. Called about
        each second (accept_loop); between frames only."""
        if self.down or not self._lock.acquire(False):
            return
        try:
            if not self.down and _fd_id(self._w) != self._ids[1]:
                self._say_closed_locked()
                self._lost_locked()
        finally:
            self._lock.release()

    def _lost_locked(self):
        if not self.down:
            self.down, self.down_at = True, _monotonic()

    def detach(self):
        """Send detached as the last frame to this hub, and keep what
        follows for the next one (see Session._detach)."""
        line = self._line({"op": "detached"}, None)
        with self._lock:
            if not self.down:
                try:
                    self._write(line)
                except OSError:
                    pass
            self._lost_locked()

    def lost(self, gen):
        """The reader of generation gen met the end of its stream: the
        channel is down, unless a newer hub has taken it over already.
        Returns whether gen was the current one."""
        with self._lock:
            if gen != self.gen:
                return False
            self._lost_locked()
            return True

    @staticmethod
    def copies(fd):
        """What attach takes beside fd: its reader file and its socket
        for sends; where one cannot be made (EMFILE), none is kept."""
        r = os.fdopen(os.dup(fd), "rb", 1 << 16)
        try:
            return r, _socket_on(fd)
        except BaseException:
            r.close()
            raise

    def attach(self, fd, first, copies):
        """Take a new hub's connection fd for frames both ways, and send it
        the lines first, then the done frame held for it (or, again, the
        last one sent, which the old link may have lost: a hub ignores a
        done frame it has), before any other frame. The old connection is
        shut, which ends its reader (a pipe's only when its writer goes);
        each reader closes its own file. copies: copies(fd).
        Returns the new generation's reader file and number."""
        import socket
        global _MSG_DONTWAIT
        _MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", _MSG_DONTWAIT)
        r, wsock = copies
        self._superseding = True  # a writer stuck on the old link gives up
        with self._lock:
            self._superseding = False
            old_w, old_sock, old_id = self._w, self._wsock, self._ids[1]
            spare, self._spare = self._spare, None
            self._r, self._w, self._wsock = r, fd, wsock
            self._ids = (_fd_id(fd),) * 2
            self.gen += 1
            self._big = self._big_in = False
            self.down = False
            try:
                self._write(first)
                if self.held is not None:
                    self._write(self.held)
                    self.held = None
                elif self.last_done is not None:
                    self._write(self.last_done)
            except OSError:
                self._lost_locked()
            r, gen = self._r, self.gen
        # Nothing below raises: fd and its copies are the channel's now,
        # which a caller that closes them on an error (_adopt) relies on.
        if old_sock is not None:
            try:
                old_sock.close()
            except OSError:
                pass
        if spare is not None and _fd_id(spare) == old_id:
            _close(spare)
        if old_w != fd and _fd_id(old_w) == old_id:  # not a cell's file since
            _shut(old_w)  # a pipe ends when its hub (or sshd) goes
            _close(old_w)
        return r, gen

    def send_file(self, header, f, offset, n):
        """Send a frame of n bytes of file f from offset, copied by the kernel
        (sendfile(2)) rather than through this process: a pull then costs
        the session a fraction of the CPU. Returns False, having sent
        nothing, where sendfile cannot be used. If the file gives fewer
        bytes (it shrank) or fails, the frame is completed with zeros, so the
        stream stays whole, and OSError says why; the transfer then fails
        and its partial file is removed."""
        sendfile = getattr(os, "sendfile", None)
        if sendfile is None or not sys.platform.startswith("linux") or self._wsock is not None:
            return False
        line = self._line(header, n)
        failure = None
        with self.sigint:
            with self._lock:
                self._write(line)
                done = 0
                while done < n:
                    try:
                        k = sendfile(self._w, f.fileno(), offset + done, n - done)
                    except (BlockingIOError, InterruptedError):
                        self._await_writable()
                        continue
                    except OSError as e:
                        k, failure = 0, e
                    if not k:
                        failure = failure or OSError("the file shrank while it was being sent")
                        zeros = bytes(1 << 16)
                        while done < n:
                            m = min(n - done, len(zeros))
                            self._write(zeros[:m])
                            done += m
                        break
                    done += k
        if failure is not None:
            raise failure
        return True

    def _grow_pipe(self):
        self._big = True
        _grow_pipe(self._w)

    def send_raw(self, line):
        with self.sigint:
            with self._lock:
                if self.down:
                    raise OSError(32, "the hub went away")
                self._write(line)

    def _write(self, buf):
        if _fd_id(self._w) != self._ids[1]:
            # Closed by a cell's code: the number may be a file of its own.
            self._say_closed_locked()
            raise OSError(9, "the channel to the hub was closed")
        view = memoryview(buf)
        while view:
            try:
                if self._wsock is not None:
                    n = self._wsock.send(view, _MSG_DONTWAIT)
                else:
                    n = os.write(self._w, view)
            except (BlockingIOError, InterruptedError):
                n = 0
            if n:
                view = view[n:]
            else:
                self._await_writable()

    def _await_writable(self):
        """Wait, half a second at a time, until the link takes more; give
        up on a link that a new hub is taking over (attach waits for us)."""
        import select
        if self._superseding:
            raise OSError(32, "a new hub took the session over")
        try:
            select.select([], [self._w], [], 0.5)
        except (OSError, ValueError):
            pass

    def recv(self, r=None):
        """Return (header, data) from r (the current generation's reader by
        default); None at EOF.  Raises ValueError on a bad frame."""
        r = r or self._r
        if r is self._r and _fd_id(r.fileno()) != self._ids[0]:
            return None  # closed, as in _write
        line = r.readline()
        if not line:
            return None
        header = _header(line)
        data = None
        n = header.get("len")
        if n:
            if header["op"] == "chunk" and n > (1 << 20) and not self._big_in:
                self._big_in = True
                _grow_pipe(r.fileno())
            into = self.into(header, n) if header["op"] == "chunk" and self.into is not None else None
            if into is None and header["op"] == "chunk" and n > (1 << 20):
                # A file chunk goes into a reused buffer (see release): fresh
                # 8 MiB objects cost page faults every time.
                buf = self._pool.pop() if self._pool else _PoolBuffer(8 << 20)
                into = memoryview(buf)[:n]
            if into is not None:
                got = 0
                while got < n:
                    k = r.readinto(into[got:])
                    if not k:
                        return None
                    got += k
                data = into
            else:
                data = r.read(n)
                if len(data) != n:
                    return None
        return header, data

    def release(self, data):
        """Give back a chunk's buffer once it is written."""
        if isinstance(data, memoryview) and type(data.obj) is _PoolBuffer and len(self._pool) < 8:
            self._pool.append(data.obj)


# A frame's header line, parsed; ValueError if it is none.
def _header(line):
    try:
        header = _loads(line.decode("utf-8"))
    except ValueError as e:
        raise ValueError("malformed frame (%s): %r" % (e, line[:80]))
    if not isinstance(header, dict) or not isinstance(header.get("op"), str):
        raise ValueError("malformed frame (no op): %r" % (line[:80],))
    n = header.get("len")
    if n and (not isinstance(n, int) or n < 0):
        raise ValueError("malformed frame (bad len): %r" % (line[:80],))
    return header


class _CellPipe(object):
    # A local worker's exec frames come on a pipe of their own (--cells),
    # which the main thread reads itself while it has nothing to run: a
    # cell's frame then wakes the thread that runs it, and not the reader
    # first, which then had to wake the main thread (on a busy machine a
    # fifth of a round trip). The hub sends it one exec frame at a time
    # (it refuses an exec while the worker is busy), and everything else on
    # the channel, which the reader reads as before. The pipe is read
    # without blocking (fill), under Session.cells_lock, into a buffer of
    # its own, which take() cuts into whole frames: the main thread waits
    # for it in select, and any thread may take what it holds now
    # (Session.drain_cells).

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.scanned = 0   # bytes of buf known to hold no newline
        self.head = None   # the parsed header of the frame under way
        self.eof = False
        self.id = _fd_id(fd)
        _nonblocking(fd)

    # Read what the pipe holds; whether it may hold more (a read that
    # filled its buffer: a pipe gives what it has, up to that).
    def fill(self):
        import errno
        try:
            if _fd_id(self.fd) != self.id:
                raise OSError(errno.EBADF, "closed")  # as in Channel._write
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError as e:
            # A link whose hub closed it with our answer unread is reset.
            if e.errno not in (errno.EBADF, errno.EIO, errno.ECONNRESET):
                raise
            data = b""
        if not data:
            self.eof = True
        self.buf += data
        return len(data) == 1 << 16

    # The next whole frame in the buffer, (header, data), or None; raises
    # EOFError when none will come, ValueError for a bad header (dropped).
    def take(self):
        if self.head is None:
            i = self.buf.find(b"\n", self.scanned)
            if i < 0:
                self.scanned = len(self.buf)
                if self.eof:
                    raise EOFError
                return None
            line = bytes(self.buf[:i + 1])
            del self.buf[:i + 1]
            self.scanned = 0
            self.head = _header(line)
        n = self.head.get("len") or 0
        if len(self.buf) < n:
            if self.eof:
                raise EOFError
            return None
        header, data, self.head = self.head, None, None
        if n:
            data = bytes(self.buf[:n])
            del self.buf[:n]
        return header, data

    # Whether a frame may be whole in the buffer (take need not wait for
    # the pipe).
    def pending(self):
        if self.head is None:
            return self.eof or self.buf.find(b"\n", self.scanned) >= 0
        return self.eof or len(self.buf) >= (self.head.get("len") or 0)


def _ours(filename):
    """Whether a traceback's frame is replhub's own (the worker, the relay,
    the toolkit), which a session's traceback leaves out."""
    return (filename.startswith("<replhub>/") or filename == _WORKER_FILE
            or filename.startswith(os.path.dirname(os.path.abspath(_WORKER_FILE)) + os.sep))


def _error_dict(etype, value, tb):
    """An exception as a done frame's error, without replhub's own frames
    and within the caps. Never raises: when the traceback cannot be
    formatted (no memory, no stack), the type and message still go."""
    name = getattr(etype, "__name__", "Exception")[:200]
    try:
        import traceback
        te = traceback.TracebackException(etype, value, tb)
        message, seen, t = None, set(), te
        while t is not None and id(t) not in seen:
            seen.add(id(t))
            t.stack = traceback.StackSummary.from_list([f for f in t.stack if not _ours(f.filename)])
            if not t.stack and hasattr(t, "exc_traceback"):
                t.exc_traceback = None  # 3.6-3.8 would print a header with no frames
            # The message once, capped before it is formatted: a KeyError of
            # a 9 MB key is a 9 MB message.
            t._str = _cap(getattr(t, "_str", ""), MESSAGE_CAP)[0]
            if message is None:
                message = t._str
            t = t.__cause__ or t.__context__
        pieces = [_cap(p, TRACEBACK_CAP)[0] for p in te.format()]
        return {"type": name, "message": message or "",
                "traceback": _cap("".join(pieces), TRACEBACK_CAP)[0]}
    except BaseException:
        pass
    try:
        message = _cap(str(value), MESSAGE_CAP)[0]
    except BaseException:
        message = "<unprintable %s>" % name
    return {"type": name, "message": message,
            "traceback": "%s: %s\n(replhub could not format its traceback)\n" % (name, message)}


def _forked_exit(status, error, exit_code):
    """End a child a cell forked, at its cell's end, as Python ends at a
    script's: sys.exit's code (other than an int or None: its text on
    stderr, and 1), or the traceback on stderr and 1 after an exception."""
    code = 0
    try:
        if exit_code is not None:
            code = exit_code[0]
            if code is None:
                code = 0
            elif not isinstance(code, int):
                sys.stderr.write("%s\n" % (code,))
                code = 1
        elif status != "ok":
            sys.stderr.write(error["traceback"])
            code = 1
    except BaseException:
        code = 1
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    os._exit(code & 0xff)


_PARKED = {"type": "KeyboardInterrupt", "message": "interrupted before it started",
           "traceback": "KeyboardInterrupt: interrupted before it started\n"}


def _compile(code, fname):
    """The cell's code and, if it ends with an expression, that expression's
    code apart, so that its value can be shown: (body, last, named); body
    is None for a cell that is one expression.

    Python 3.6-3.10 crash in C (the stack overflows) on a tree some 60,000
    levels deep, a chain like 1+1+...+1, in ast.parse or in compiling the
    tree; 3.11 and later raise RecursionError. Such a tree needs at least two
    characters of source a level, so a cell that could hold one is parsed on
    a thread with a stack big enough for any tree its length allows.

    Where Python allows it (3.8+), a cell may await at top level: its code
    then has CO_COROUTINE set, and runs whole on the session's event loop,
    its last expression's value assigned to VALUE_NAME (named is True)."""
    def work():
        import _ast as ast  # ast's node types, without the package's 1 ms
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        if "\\" not in code:
            # A cell that is one expression ("x", "f(1)") compiles as one,
            # at a third of the cost of the tree's two compiles; any other
            # fails at once, in the parser. (A backslash may make the
            # tokenizer warn, which the second parse would warn again.)
            try:
                last = compile(code, fname, "eval", flags)
            except SyntaxError:
                pass
            else:
                if not last.co_flags & CO_COROUTINE:
                    return None, last, False
        tree = compile(code, fname, "exec", ast.PyCF_ONLY_AST)  # ast.parse
        last = expr = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            expr = tree.body.pop()
            last = compile(ast.Expression(expr.value), fname, "eval", flags)
        body = compile(tree, fname, "exec", flags)
        if expr is None or not (body.co_flags | last.co_flags) & CO_COROUTINE:
            return body, last, False
        import ast
        store = ast.Assign(targets=[ast.Name(id=VALUE_NAME, ctx=ast.Store())], value=expr.value)
        tree.body.append(ast.fix_missing_locations(ast.copy_location(store, expr)))
        return compile(tree, fname, "exec", flags), None, True
    if sys.version_info >= (3, 11) or len(code) < 100000:
        return work()
    return _on_big_stack(work, min(160 * len(code), 4 << 30))


CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
VALUE_NAME = "__replhub_value__"


def _await_too_old(e, code):
    """A cell's SyntaxError on Python 3.6 or 3.7 at a line that awaits: the
    one-line error that says why."""
    import re
    if sys.version_info >= (3, 8) or not isinstance(e, SyntaxError):
        return None
    text = e.text
    if not text and isinstance(e.lineno, int) and 0 < e.lineno <= code.count("\n") + 1:
        text = code.splitlines()[e.lineno - 1]
    if not re.search(r"\bawait\b", text or ""):
        return None
    msg = ("top-level await needs Python 3.8 or newer and this session runs %s: put the code in an "
           "async def main() and run asyncio.get_event_loop().run_until_complete(main())" % PY)
    return {"type": "SyntaxError", "message": msg, "traceback": "SyntaxError: %s\n" % msg}


def _from_cell(tb):
    """tb from the first frame of a cell's: without the event loop's frames
    that lead there, or none at all (an interrupt in the loop's select)."""
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    return tb


def _noop():
    pass


def _guard_loops(sigint, asyncio):
    """Keep a SIGINT pending (Sigint.guarded) in an event loop's own start
    and end of a run: raised there, as a cell's run began or ended, it
    left the loop marked as running, and every later cell that awaited
    failed ("This event loop is already running"). Raised in the loop's
    select or in a task's step, it ends the run as before."""
    base = asyncio.base_events.BaseEventLoop
    sigint.guarded.update(tuple(
        getattr(base, name).__code__ for name in
        ("run_forever", "run_until_complete", "_run_forever_setup", "_run_forever_cleanup")
        if hasattr(base, name)))


def _on_big_stack(fn, size):
    """fn() on a thread with a stack of size bytes (only the pages it uses
    cost memory); on this thread where no such thread can start."""
    import threading
    out = []

    def run():
        try:
            out.append((True, fn()))
        except BaseException as e:
            out.append((False, e))
    _started()
    try:
        old = threading.stack_size()
        try:
            threading.stack_size((size + 0xfffff) & ~0xfffff)
            t = threading.Thread(target=run, name="replhub-compile")
            t.start()
        finally:
            threading.stack_size(old)
    except (ValueError, RuntimeError, MemoryError):
        return fn()
    t.join()
    ok, result = out[0]
    if not ok:
        raise result
    return result


def _start_thread(target, name, args=()):
    """Start a daemon thread that runs target(*args); the exception when
    none could be started (a cell took every thread the limit allows)."""
    import threading
    t = threading.Thread(target=target, name=name, args=args)
    t.daemon = True
    try:
        t.start()
    except Exception as e:
        return e
    return None


def _rss():
    """Resident memory of the worker and of the processes its cells started
    (Linux /proc; at most 1000 processes), else the worker's peak."""
    try:
        with open("/proc/self/statm") as f:
            total = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return total + _children_rss(os.getpid())
    except Exception:
        try:
            import resource
            r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return r if sys.platform == "darwin" else r * 1024
        except Exception:
            return 0


def _children_rss(pid):
    page, total, seen = os.sysconf("SC_PAGE_SIZE"), 0, set()
    todo = _children(pid)
    while todo and len(seen) < 1000:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open("/proc/%d/statm" % p) as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        todo.extend(_children(p))
    return total


def _children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out.extend(int(c) for c in f.read().split())
    except (OSError, ValueError):
        pass
    return out


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


OUT_KEEP = 2000000  # output kept while no hub is attached (the hub's unread cap)
SETTLE_MAX = 1.0    # seconds a write waits for the pump to read fd 1's pipe
PUMP_NAP = 0.0005   # seconds the pump rests after a round (see Pump.run)


def _markers(token):
    """The markers that begin and end a run of stdout in the output stream
    (see proto/streams.go)."""
    t = token.encode("ascii")
    return b"\x1e\x1f" + t + b"1\x1f\x1e", b"\x1e\x1f" + t + b"2\x1f\x1e"


def _streams_token(argv):
    """The session's token of the stream markers: one of our own, or the
    one given with --streams (tests)."""
    if "--streams" in argv:
        t = argv[argv.index("--streams") + 1]
        if 8 <= len(t) <= 64 and len(t) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in t):
            return t
    import binascii
    return binascii.hexlify(os.urandom(8)).decode("ascii")


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Stream(io.RawIOBase):
    """The raw file under sys.stdout (fd 1) or sys.stderr (fd 2): Python's
    own writes to either, kept in the order they are made (see Pump).
    fileno() is still 1 or 2, for a child process handed sys.stdout.

    stdout's go into the pump's pipe E even when user code points fd 1
    elsewhere (os.dup2), as in a Jupyter kernel: looking at fd 1 at every
    write would cost each print a third of its time. stderr's go to fd 2,
    wherever it points. This is every print's path: it makes as few calls
    as it can."""

    def __init__(self, fd, pump):
        import functools
        self._fd = fd
        self._pump = pump
        # fd 1's pipe holds bytes the pump has not read (4 bytes, not 0).
        self._o_full = functools.partial(pump._ioctl, pump.o, pump._fionread, _ZERO)
        self._ew, self._piece = pump.ew, pump.piece
        self._open, self._close = pump.open, pump.close

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, b):
        n = len(b)
        if self._o_full() != _ZERO:
            self._pump.settle()
        if self._fd == 2:
            _write_all(2, b)
        elif n <= self._piece:
            if n:
                os.write(self._ew, self._open + b + self._close)  # whole: n is below PIPE_BUF
        else:
            self._pump.stdout(b)
        return n


_ZERO = b"\0\0\0\0"


class Pump(object):
    """The worker's output. fds 1 and 2 point at two pipes, O and E, that
    this thread reads and forwards, as one stream: raw to the output
    stream of the hub that started the worker; once that hub is gone, as
    out frames to a hub that adopted it; while no hub is attached it is
    kept, the last OUT_KEEP bytes of it. print() and a cell's children so
    never meet a closed pipe when the hub goes away.

    The two streams travel apart (proto/streams.go): the pump brackets
    what it read from O with the stdout markers; bytes outside a bracket
    are stderr, so a crash's traceback, written straight to the hub's
    stream, is too.

    Order: Python's own writes to both streams (Stream, under sys.stdout
    and sys.stderr) go into E, stdout's bracketed, each bracket in one piece
    that a pipe writes whole: one pipe keeps them in the order made. What
    C code and child processes write to fd 1 goes into O; Stream first waits
    (SETTLE_MAX at most) until the pump has read O, and the pump reads E
    before O, so that each stream is exact in order, and the two are in
    the order they arrived where C code or a child wrote them."""

    def __init__(self, token, errfd):
        import select
        import threading
        self.token = token  # the reaper brackets O's last bytes too
        self.open, self.close = _markers(token)
        self.joint = self.close + self.open
        self.o, self.ow = os.pipe()
        self.e, self.ew = os.pipe()
        _nonblocking(self.e)
        _nonblocking(self.o)
        self.live = [self.e, self.o]  # the pipes not at their end
        # Nothing went out since the last fence (see fence); a hub that
        # takes the worker over gets one at its first cell.
        self.quiet = False
        # A bracket and its contents, written in one piece.
        self.piece = getattr(select, "PIPE_BUF", 512) - 2 * len(self.open)
        self.o_reads = 0    # reads of O so far (settle waits for two)
        self.errfd = errfd  # the first hub's output stream; None once gone
        _nonblocking(errfd)  # see Channel._write: a frozen link must not wedge us
        self.superseded = False
        self.chan = None    # an adopting hub's channel
        self.kept = []
        self.size = 0
        self.dropped = 0
        self.lock = threading.Lock()
        import fcntl
        import termios
        self._ioctl, self._fionread = fcntl.ioctl, termios.FIONREAD
        # Whether either pipe holds anything, in one system call: at most
        # cells' end neither does (see fence).
        self.poll = None
        if hasattr(select, "poll"):
            self.poll = select.poll()
            self.poll.register(self.e, select.POLLIN)
            self.poll.register(self.o, select.POLLIN)

    # -- the writers' side (any thread, or a forked child) ---------------
    def stdout(self, data):
        """Write data into E as stdout, in pieces a pipe writes whole."""
        for i in range(0, len(data), self.piece):
            _write_all(self.ew, self.open + data[i:i + self.piece] + self.close)

    def settle(self):
        """Wait until the pump has read what O held (two reads, should it
        fill up again meanwhile), SETTLE_MAX at most."""
        z = _ZERO
        try:
            if self._ioctl(self.o, self._fionread, z) == z:
                return
            import time
            reads, deadline = self.o_reads, time.time() + SETTLE_MAX
            while self._ioctl(self.o, self._fionread, z) != z and self.o_reads < reads + 2:
                if time.time() > deadline:
                    return
                time.sleep(0.0002)
        except OSError:
            pass

    def fence(self, fence):
        """Forward what the pipes hold, then fence as stdout, from the
        calling thread (a cell's end): the cell's reply need not wait for
        the pump's next round. Under the lock no round of the pump's is
        half done, so nothing the cell wrote can come after its fence.
        Returns False, having written nothing, when nothing at all went
        out since the last fence: the hub, which has read up to that one,
        then needs none (a done frame's quiet)."""
        with self.lock:
            if self._empty():
                self.o_reads += 1  # as _round's read of nothing
                last = b""
            else:
                last = self._round(True)
            if not last and self.quiet:
                return False
            # The cell's last output and its fence in one write.
            self._deliver((last + self.open + fence + self.close).replace(self.joint, b""))
            self.quiet = True
            return True

    def _empty(self):
        """Whether neither pipe holds a byte now: one poll, where _round
        reads each pipe in vain (a read of an empty pipe raises, at twice a
        poll's cost). A pipe at its end, or closed, polls as not empty."""
        try:
            return self.poll is not None and not self.poll.poll(0)
        except (OSError, ValueError):
            return False

    # -- the pump thread -------------------------------------------------
    def run(self):
        import select
        import time
        _untraced()
        live = self.live
        while live:
            try:
                ready = select.select(live, [], [])[0]
            except (OSError, ValueError):
                # A pipe closed under us (user code): try again, gently.
                time.sleep(0.05)
                continue
            with self.lock:
                last = self._round(self.o in ready)
                if last:
                    self._deliver(last)
            # A round takes what came meanwhile: woken at every write, the
            # pump would fight a printing thread for the interpreter lock
            # at every print (it made a tight print loop 2.5 times slower).
            time.sleep(PUMP_NAP)

    def _round(self, o_ready):
        """Forward what E holds, then O's when o_ready, but for the last
        pieces, which are returned; the lock is held. E first, whatever
        select said: what it holds now was written before what O held
        when select looked."""
        live, last = self.live, b""
        for _ in range(16):
            data = self._read(self.e, live)
            if not data:
                break
            if len(data) == 1 << 16:
                data = self._whole(data, live)
            if last:
                self._deliver(last)
            # Back-to-back stdout pieces as one run: a print's pieces
            # cost the hub a tenth of the bytes.
            last = data.replace(self.joint, b"")
            if len(last) < 1 << 16:
                break
        if o_ready:
            # O whole, as far as a pipe can hold (a cell may grow fd 1's
            # pipe, and a 64 KiB page makes every pipe 1 MiB): at a cell's
            # end, what O holds is the cell's, and must precede its fence.
            for _ in range(16):
                data = self._read(self.o, live)
                self.o_reads += 1
                if data:
                    last += self.open + data + self.close
                if not data or len(data) < 1 << 16:
                    break
        return last

    @staticmethod
    def _read(fd, live):
        """Up to 64 KiB of fd; None when it has none now, b"" at its end
        (fd then leaves live)."""
        try:
            data = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data and fd in live:
            live.remove(fd)
        return data

    def _whole(self, data, live):
        """data, a full read of E, with the rest of a bracket it cut: a
        bracket is written in one piece, so the rest is in the pipe."""
        for _ in range(8):
            i = data.rfind(self.open)
            if not ((i >= 0 and data.find(self.close, i) < 0) or self._head_at_end(data)):
                break
            more = self._read(self.e, live)
            if not more:
                break
            data += more
        return data

    def _head_at_end(self, data):
        """Whether data ends with the start of a marker."""
        tail = data[-(len(self.open) - 1):]
        k = tail.find(b"\x1e")
        while k >= 0:
            if self.open.startswith(tail[k:]):
                return True
            k = tail.find(b"\x1e", k + 1)
        return False

    def _resume(self, data, n):
        """What of data the next hub gets when the first took its first n
        bytes: the rest, begun outside a marker and in its stream."""
        i = data.rfind(self.open, 0, n + len(self.open) - 1)
        j = data.rfind(self.close, 0, n + len(self.close) - 1)
        if i > j:
            return data[i:] if n < i + len(self.open) else self.open + data[n:]
        if j >= 0 and n < j + len(self.close):
            return data[j + len(self.close):]
        return data[n:]

    def exit_after_drain(self, real_exit):
        """os._exit, once what the process wrote has gone on (at most
        0.5 s): a cell's last words before os._exit would otherwise die
        with the pump. A crash's go another way (see main)."""
        def _exit(status):
            import time
            deadline = time.time() + 0.5
            empty = 0  # looks in a row that found nothing left
            z = b"\0\0\0\0"
            try:
                while time.time() < deadline and empty < 2:
                    left = True
                    if self.lock.acquire(False):
                        left = (self._ioctl(self.e, self._fionread, z) != z
                                or self._ioctl(self.o, self._fionread, z) != z)
                        self.lock.release()
                    empty = 0 if left else empty + 1
                    time.sleep(0.002)
            except Exception:
                pass
            real_exit(status)
        _exit.__name__ = _exit.__qualname__ = "_exit"
        _exit.__doc__ = real_exit.__doc__
        return _exit

    def _write_first(self, data):
        """Write data to the first hub's stream, waiting while it is full;
        returns how much was written: less than all when the hub is gone,
        or a new one is taking over."""
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(self.errfd, view):]
                except (BlockingIOError, InterruptedError):
                    if self.superseded:
                        raise OSError(32, "a new hub took the session over")
                    import select
                    select.select([], [self.errfd], [], 0.5)
        except OSError:
            pass
        return len(data) - len(view)

    def _deliver(self, data):
        self.quiet = False
        if self.errfd is not None:
            n = self._write_first(data)
            if n == len(data):
                return
            self._drop_first_hub()
            data = self._resume(data, n)
        if self.chan is not None:
            i = 0
            try:
                while i < len(data):
                    self.chan.send({"op": "out"}, data[i:i + (1 << 20)])
                    i += 1 << 20
                return
            except OSError:
                self.chan = None
                data = self._resume(data, i)
        self.kept.append(data)
        self.size += len(data)
        while self.size > OUT_KEEP and len(self.kept) > 1:
            gone = self.kept.pop(0)
            self.size -= len(gone)
            self.dropped += len(gone)

    def _drop_first_hub(self):
        """The hub that started the worker is gone: no more output goes to
        its stream, and a crash's traceback goes to fd 2 (the pump, then
        the reaper) instead."""
        if self.errfd is None:
            return
        try:
            import faulthandler
            faulthandler.enable()
        except Exception:
            pass
        _close(self.errfd)
        self.errfd = None

    def detach(self, fence):
        """The hub hands the worker over: end its output with fence, and
        keep what follows for the next hub."""
        with self.lock:
            self.quiet = False
            if self.errfd is not None:
                self._write_first(fence)
                self._drop_first_hub()
            elif self.chan is not None:
                try:
                    self.chan.send({"op": "out"}, fence)
                except OSError:
                    pass
                self.chan = None

    def attach(self, chan):
        """Send what was kept to a hub that adopted the worker, and go on
        sending there."""
        self.superseded = True  # a write stuck on the old link gives up
        with self.lock:
            self.superseded = False
            self.quiet = False
            self._drop_first_hub()
            kept, self.kept, self.size = self.kept, [], 0
            if self.dropped:
                kept.insert(0, ("[replhub: %d bytes of output were dropped while no hub was attached]\n"
                                % self.dropped).encode())
                self.dropped = 0
            self.chan = chan
            for data in kept:
                self._deliver(data)


def _peer_ok(conn):
    """Whether the process at the other end of a unix socket is ours: our
    uid, or the user's whose sudo made us root. Where the kernel cannot
    say (not Linux), the socket's 0600 mode in a 0700 folder decides."""
    import socket
    import struct
    ok = set([os.getuid()])
    if os.getuid() == 0 and os.environ.get("SUDO_UID", "").isdigit():
        ok.add(int(os.environ["SUDO_UID"]))
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, getattr(socket, "SO_PEERCRED", 17), struct.calcsize("3i"))
    except (OSError, AttributeError):
        return not sys.platform.startswith("linux")
    return struct.unpack("3i", creds)[1] in ok


def _sock_owner():
    """The uid a durable worker's socket and folder belong to: ours, or
    for a root worker the user's whose sudo made us root."""
    if os.getuid() == 0 and os.environ.get("SUDO_UID", "").isdigit():
        return int(os.environ["SUDO_UID"])
    return os.getuid()


def _private_dir(path, create=False):
    """Whether path is a real folder (not a link) of the socket's owner,
    with no group or other bits; with create, a missing one is made so."""
    import stat
    owner = _sock_owner()
    try:
        st = os.lstat(path)
    except OSError:
        if not create:
            return False
        try:
            os.mkdir(path, 0o700)
            if os.getuid() != owner:
                os.chown(path, owner, -1)
        except OSError:
            return False
        return _private_dir(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == owner and st.st_mode & 0o077 == 0


def _linger_socket():
    """A remote worker's socket path, its fallback, and why there is none:
    in $XDG_RUNTIME_DIR when it is the owner's and private (not under
    sudo, which drops it), else in /tmp/replhub-UID, made 0700 if missing.
    Nothing else is written there."""
    import binascii
    owner = _sock_owner()
    name = "replhub-%s.sock" % binascii.hexlify(os.urandom(8)).decode()
    fallback = "/tmp/replhub-%d" % owner
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/") and owner == os.getuid() and _private_dir(xdg):
        return os.path.join(xdg, name), os.path.join(fallback, name), None
    if _private_dir(fallback, create=True):
        return os.path.join(fallback, name), None, None
    return None, None, "%s is not a private folder of uid %d (a real folder, mode 0700)" % (fallback, owner)


def _listen(path):
    """The durable worker's socket: 0600, owned by the user whose hub
    drives it (for a root worker, sudo's caller). It is a bare _socket
    socket: the module socket (enum, selectors) costs a start 3 ms, and
    only a connection needs it (_accept)."""
    import _socket
    # Bound beside path and renamed to it once it listens: a hub that finds
    # the file (after a move, _keep_socket) and connects at once is not
    # refused. A path too long for the extra byte is bound where it is.
    at = path + "~" if len(os.fsencode(path)) < 107 else path
    try:
        os.unlink(at)
    except OSError:
        pass
    ln = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        ln.bind(at)
    finally:
        os.umask(old)
    try:
        if os.getuid() == 0 and os.environ.get("SUDO_UID", "").isdigit():
            os.chown(at, int(os.environ["SUDO_UID"]), int(os.environ.get("SUDO_GID", "-1") or -1),
                     follow_symlinks=False)
        ln.listen(8)
        if at != path:
            os.rename(at, path)
    except BaseException:
        ln.close()
        try:
            os.unlink(at)
        except OSError:
            pass
        raise
    return ln


def _accept(ln):
    """A connection to listener ln, as a socket.socket."""
    import socket
    fd = ln._accept()[0]
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fd)


class ReplhubFinder(object):
    """Owns the package name replhub, first on sys.meta_path: replhub.NAME
    is a shipped module or the user's NAME.py, its source asked of the hub
    at every import and reload (fetch(name) -> (source, file)), so nothing
    on sys.path (a replhub.py in the cwd) stands in for it, and an edit or
    a new file is seen without a restart."""

    def __init__(self, request):
        self.request = request  # request(kind, **fields) -> (header, data)

    def find_spec(self, name, path=None, target=None):
        if name != "replhub" and not name.startswith("replhub."):
            return None
        from importlib.machinery import ModuleSpec
        if name == "replhub":
            return ModuleSpec(name, self, origin="<replhub>", is_package=True)
        spec = ModuleSpec(name, self, origin=None)
        spec.loader_state = self.fetch(name)
        spec.origin, spec.has_location = spec.loader_state[1], True
        return spec

    def fetch(self, name):
        """Module name's source and the file its tracebacks show."""
        try:
            header, data = self.request("module", name=name)
        except Exception as e:
            msg = "%s" % e
            cls = ModuleNotFoundError if msg.startswith("No module named") else ImportError
            raise cls(msg if name in msg else "%s: %s" % (name, msg), name=name) from None
        return bytes(data or b"").decode("utf-8"), header.get("message") or "<replhub>/%s.py" % name

    def replhub_names(self):
        """The names of replhub's modules, as the hub lists them (for
        completions)."""
        import json
        _, data = self.request("modules")
        return [m.get("name", "") for m in json.loads(bytes(data or b"[]").decode("utf-8"))]

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == "replhub":
            module.__doc__ = "replhub's modules: from replhub import NAME; modules() lists them."
            return
        import linecache
        src, fname = module.__spec__.loader_state
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        # The cells' builtins, as an import's: exec would give it the
        # worker's own copy, this frame's.
        module.__dict__["__builtins__"] = builtins
        exec(compile(src, fname, "exec", dont_inherit=True), module.__dict__)


class Names(object):
    """The session's names past its start's, as a done frame lists them
    (NAMES_MAX at most, sorted, none over NAME_CAP or starting with _),
    kept from cell to cell so that a cell pays for the names it added or
    removed, not for all of them: sorting every name at every cell cost a
    session of 5,000 names 1.3-2 ms a cell; one pass over its keys, in C,
    costs it 0.05-0.1 ms.

    A dict keeps its keys in the order they came. So when the first
    len(keys) keys of the namespace are all keys the hub was sent, no key
    went, and the rest are the new ones. Otherwise (a name deleted) the
    keys are compared as sets."""

    def __init__(self, base):
        import threading
        self.base = base
        self.keys = None    # the namespace's keys at the last done frame
        self.sorted = []    # every listable name in them, sorted
        self.sent = None    # the list the hub was sent last
        self.gen = -1       # on this hub connection
        self.lock = threading.Lock()  # see send

    def changed(self, ns, gen):
        """The list, when it differs from the one the hub on connection gen
        was sent (or the hub is a new one); else None, which the hub takes
        as no change."""
        import itertools
        old, gone = self.keys, ()
        try:
            it = iter(ns)
            if old is not None and len(ns) >= len(old) and _all_in(old, itertools.islice(it, len(old))):
                # Not in old: a key another thread deleted and bound again
                # meanwhile comes again (Python 3.6 and 3.7 do not see it).
                added = [k for k in it if k not in old]
                old.update(added)
            else:
                now = set(ns)
                if old is None:
                    self.sorted, self.sent = sorted(k for k in now - self.base if _listable(k)), None
                    added = ()
                else:
                    gone, added = old - now, now - old
                self.keys = now
        except RuntimeError:
            # Another thread's names came or went meanwhile: the next cell
            # sends them all.
            self.keys = None
            return None
        if not added and not gone and gen == self.gen and self.sent is not None:
            return None
        import bisect
        lst = self.sorted
        for k in gone:
            i = bisect.bisect_left(lst, k) if k not in self.base and _listable(k) else len(lst)
            if i < len(lst) and lst[i] == k:
                del lst[i]
        for k in added:
            if k not in self.base and _listable(k):
                bisect.insort(lst, k)
        out = lst[:NAMES_MAX]
        if gen == self.gen and out == self.sent:
            return None
        self.sent, self.gen = out, gen
        return out

    def forget(self):
        """Send the list with the next done frame (the hub's was set
        otherwise: a restore)."""
        self.keys = None

    def send(self, chan, ns, frame, data=None, anew=False):
        """Send frame with the list, when the hub lacks it (anew: always).
        Made and sent under one lock, so the hub gets the lists in the
        order they were made: a reset answers on a thread of its own, and
        a cell let go past the reset's budget may end beside it."""
        with self.lock:
            if anew:
                self.keys = None
            for _ in range(3 if anew else 1):
                names = self.changed(ns, chan.gen)
                if names is not None:
                    frame["names"] = names
                    break
            try:
                chan.send(frame, data)
            except BaseException:
                self.keys = None  # the hub may not have it: the next list goes whole
                raise


if sys.version_info >= (3, 11):
    def _all_in(s, it):
        return s.issuperset(it)
else:
    def _all_in(s, it):
        # Before 3.11, issuperset copies an iterator into a set first.
        return all(map(s.__contains__, it))


def _listable(k):
    return isinstance(k, str) and len(k) <= NAME_CAP and not k.startswith("_")


class Session(object):
    """The cell loop: runs exec and serve frames one at a time, on the main
    thread, in a real __main__; the reader thread queues them.

    cond guards the queue and what the main thread is doing (phase, on
    key: ("cell", N) or ("sid", S)), so that the reader's answer to an
    interrupt or a cancel is true: the main thread changes phase only with
    cond held, and the reader signals it only with cond held."""

    def __init__(self, chan, load_tk, toolkit=None):
        import threading
        import types
        self.chan = chan
        self.sigint = chan.sigint
        self.sigint.guarded.update(tuple(f.__code__ for f in (
            Session._run, Session._stop, Session.run_cell, Session.run_serve, Session.run_swap)))
        self._load_tk = load_tk
        self._tk = None
        self._tk_lock = threading.Lock()
        self.main_ident = threading.current_thread().ident
        self.queue = []
        # cond and idle_cond share one lock: the main thread waits on cond
        # for frames, queries (replhub_toolkit/query.py) on idle_cond for the main
        # thread to go idle. querying counts the queries running, which
        # hold the next frame back until query_until (monotonic) at most.
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.idle_cond = threading.Condition(lock)
        self.querying = 0
        self.query_until = 0.0
        self.queries = 0  # query threads alive (and runners left in a C call), bounded by QUERIES_MAX
        self.phase, self.key, self.stream = IDLE, None, None
        self.parked = set()  # keys interrupted or cancelled before they started
        # A local worker's exec frames (_CellPipe), which the main thread
        # reads while idle (selecting); a frame queued then writes a byte to
        # wake[1]. seen_cell is the last cell whose exec frame was read: an
        # interrupt may overtake a later one on the other pipe, and, once a
        # pipe or link was ours, on the channel (a hub sends a frame again
        # there when a host's server closed the link as it went).
        self.cells = None
        self.had_cells = False
        self.wake = None
        self.selecting = False
        self.seen_cell = 0
        import collections
        self.exec_fences = collections.deque(maxlen=8)  # each runs once
        self.cells_read = 0       # frames taken off it
        self.cells_thread = False  # read by a thread of its own, not main
        self.cells_look = None    # the loop's next look at it (_look_at_cells)
        self.cells_gone = []      # fds of ended ones, for the main thread to close
        self.cells_token = None   # what the hub's cell link shows (_adopt, main)
        self.after_done = []  # cells whose interrupt is answered after their done frame
        self.nudging = False  # a thread sends SIGINT again (_nudge)
        self.nudged, self.nudges = None, 0  # to which frame, how often so far
        self.nudge_cond = threading.Condition(lock)
        self.listener = None  # a durable worker's socket
        self.sock = None      # its path, and where it moves (_keep_socket)
        self.sock_alt = None
        self.linger = None    # seconds a remote worker waits for a hub
        self.pump = None
        self.streams = ""     # the token of the stream markers (see Pump)
        self.fence = ""       # the running cell's
        self.last_cell = 0
        self.cell_t0 = 0.0  # when the last cell started (time.time())
        self.has_cloudpickle = False
        self.rss_at = 0.0
        # The event loop of cells that await (_await), made at the first
        # one; spinning says that the main thread runs it between cells.
        self.aloop = None
        self.spinning = False
        self.cell_task = None
        self.await_cancelled = False
        self.sigint.cancel = self._cancel_await
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins  # the cells', not the worker's copy
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        for helper in RELAY_HELPERS:
            self.ns[helper] = self._lazy(helper)
        self.ns["display"] = _display
        if toolkit is not None:
            toolkit.preload(self.ns, self._sh_on_host, _reaper_group, self._hub_request, self.sigint)
        if IMPORTER is not None:
            IMPORTER.fetch = self._fetch_module
        sys.meta_path.insert(0, ReplhubFinder(self._hub_request))
        self.base_names = set(self.ns)
        self.names = Names(self.base_names)
        # What the namespace held at start, which reset puts back.
        self.base_values = dict(self.ns)

    @property
    def tk(self):
        """The toolkit, loaded at its first use: a session that never talks
        to another pays nothing for it at start."""
        if self._tk is None:
            # Once, whichever thread asks first: two Links would number
            # their requests alike, and one thread would wait for ever.
            with self._tk_lock:
                if self._tk is None:
                    tk = self._load_tk()
                    tk._link = tk.Link(self.chan)
                    self.chan.into = tk.chunk_into
                    for helper in RELAY_HELPERS:
                        self.ns[helper] = self.base_values[helper] = getattr(tk, helper)
                    self._tk = tk
        return self._tk

    def _fetch_module(self, name):
        """A late module's source, from the hub (see boot.py)."""
        try:
            _, data = self.tk._link.request("module", name=name)
        except Exception as e:
            raise ImportError("replhub: %s could not be fetched from the hub: %s" % (name, e))
        return bytes(data or b"").decode("utf-8")

    def _hub_request(self, kind, **fields):
        """One request to the hub: (header, data); HubError if refused."""
        return self.tk._link.request(kind, **fields)

    def _sh_on_host(self, host, argv, input=None, cwd=None, env=None, timeout=None):
        """sh(cmd, host=h): the hub runs argv on host h (see hub/shrun.go)
        and answers with its exit status, stdout and stderr."""
        if isinstance(input, str):
            input = input.encode("utf-8")
        header, data = self.tk._link.request("sh", blob=input, host=host, argv=list(argv), cwd=cwd,
                                             env=dict(env) if env else None, timeout=timeout)
        data = bytes(data or b"")
        n = header.get("size", 0)
        return header.get("code", 0), data[:n], data[n:]

    def _lazy(self, name):
        def call(*args, **kwargs):
            return getattr(self.tk, name)(*args, **kwargs)
        call.__name__ = call.__qualname__ = name
        call.__doc__ = "replhub: %s() (see help once it has run once)" % name
        return call

    # -- reader thread -------------------------------------------------
    def read_loop(self, r, gen, inline=False):
        """Read the frames of one hub connection (generation gen) until it
        ends. A durable worker then waits for the next hub (see accept),
        unless its first hub sent it no frame; any other exits: nobody can
        see it now. inline: on the thread that
        takes hubs, for want of one of its own (_adopt); after each frame
        it tries again to start one, and hands the reading over."""
        seen_frame = False
        rid = _fd_id(r.fileno())
        while True:
            if inline and seen_frame and self._read_on_a_thread(r, gen):
                return
            try:
                msg = self.chan.recv(r)
            except ValueError as e:
                # Before the first frame, a line that is not one may be a sudo
                # password that sudo did not read: drop it without a word.
                if seen_frame:
                    self._send_quietly({"op": "error", "error": _cap(str(e), ERROR_CAP)[0]})
                continue
            except Exception:
                msg = None
            if msg is None:
                break
            seen_frame = True
            try:
                self.dispatch(*msg)
            except Exception as e:
                self._send_quietly({"op": "error", "error": _cap("replhub: %s: %s" % (type(e).__name__, e), ERROR_CAP)[0]})
        if _fd_id(r.fileno()) != rid:
            # A cell closed it, and its number may be a file of the cell's
            # now: kept, never closed here. The write side goes, so that
            # the hub hears the channel's end.
            _KEPT.append(r)
            self.chan.cut(gen)
        else:
            try:
                r.close()
            except OSError:
                pass
        # The hub that started a durable worker sends a frame once the
        # worker is on its record (a ping): one that went before any came
        # left no record, and no hub could ever adopt the worker.
        if self.listener is None or (gen == 0 and not seen_frame and self.linger is None):
            if self._tk is not None:
                try:
                    self._tk.abort_transfers()
                except Exception:
                    pass
            os._exit(0)
        if self.chan.lost(gen):
            self._hub_gone()

    def _hub_gone(self):
        """What waited on the hub that went away ends now, with an error."""
        if self._tk is not None:
            try:
                self._tk.hub_gone()
            except Exception:
                pass

    def accept_loop(self):
        """A durable worker's socket, served for the worker's life: the
        next hub (after a restart, or over a new ssh link) connects, its
        peer checked, and sends adopt; it then takes the frame stream over
        from the last one, even one that still looks alive (a link that
        died without a word). A worker with a linger gives up that long
        after its hub went away, and exits."""
        _untraced()
        import select
        while True:
            if self.chan.down and self.linger is not None and _monotonic() - self.chan.down_at > self.linger:
                _flush()
                os._exit(0)
            self._keep_socket()
            self.chan.check_closed()
            try:
                if not select.select([self.listener], [], [], 1.0)[0]:
                    continue
                conn = _accept(self.listener)
            except (OSError, ValueError):
                continue
            fd = header = None
            try:
                header = _peer_ok(conn) and self._read_first(conn)
                if header:
                    fd = conn.detach()
            except OSError:
                pass
            finally:
                if fd is None:
                    conn.close()
            if fd is None:
                continue
            try:
                if header.get("op") == "adopt":
                    self._adopt(fd, header.get("cells") is True)
                else:
                    self._take_cell_link(fd, header.get("token"))
            except Exception:
                # This thread takes every next hub: it must not end (fd may
                # be the channel's already, or the link's).
                pass

    @staticmethod
    def _read_first(conn):
        """The first line, within 5 s in all (the socket is served by one
        thread: a peer that sends a byte now and then must not hold it),
        when it is an adopt or a cells frame; else None."""
        import json
        import select
        line, end = b"", _monotonic() + 5.0
        while not line.endswith(b"\n") and len(line) < 4096:
            left = end - _monotonic()
            if left <= 0 or not select.select([conn], [], [], left)[0]:
                return None
            got = conn.recv(1)
            if not got:
                return None
            line += got
        try:
            header = json.loads(line.decode("utf-8"))
        except ValueError:
            return None
        if isinstance(header, dict) and header.get("op") in ("adopt", "cells"):
            return header
        return None

    def _drop_cells(self):
        """Let the last hub's cell pipe or link go, at a new hub's adopt,
        once what it holds is queued (drain_cells): frames still on their
        way on it (a link through an ssh connection that froze) are never
        read, as those of the connection it replaces are not. A link is
        shut, which ends a select on it. Its fd is closed here where no
        thread selects on it (the main thread runs a cell, no thread of
        its own reads it); else the main thread closes it, once idle."""
        with self.cells_lock:
            cells, self.cells = self.cells, None
            if cells is None:
                return
            # Shut before the fd is closed: once it is, the number may be
            # another thread's socket.
            _shut(cells.fd)
        self._let_go(cells.fd)
        try:
            os.write(self.wake[1], b"!")
        except OSError:
            pass

    def _let_go(self, fd):
        """Close fd, a cell pipe or link that is no longer self.cells: at
        once where no thread selects on it (the main thread runs a cell,
        the loop does not spin, no thread of its own reads it), else the
        main thread closes it once idle. Whoever selects on it set one of
        those under cond, having read self.cells first; one that comes now
        finds it gone."""
        with self.cond:
            if self.selecting or self.spinning or self.cells_thread:
                self.cells_gone.append(fd)
            else:
                _close(fd)

    def _take_cell_link(self, fd, token):
        """A cells frame's connection, from the hub that adopted us or,
        for a worker without a cell pipe, the one that started it: its
        exec frames come on it as on a cell pipe (the main thread reads
        them while it waits), once its token is the one the last ready
        frame gave (one use). Answered with a cells frame;
        closed unanswered otherwise (the hub sends its exec frames with
        the rest)."""
        with self.cond:
            ok = self.cells_token is not None and token == self.cells_token
            if ok:
                self.cells_token = None
        if ok:
            try:
                ok = self.take_cells(fd)
            except Exception:  # no pipe for its wake (EMFILE): not taken
                ok = False
        if not ok:
            _close(fd)
            return
        try:
            os.write(fd, b'{"op":"cells"}\n')
        except OSError:
            pass  # gone already: its end comes as the pipe's does

    def _adopt(self, fd, cells=False):
        """Make the hub on fd ours: a ready frame that says where we are,
        what waited for a hub, then frames and output (as out frames).
        cells: the hub offers a link for exec frames (_take_cell_link)."""
        copies = ()
        try:
            # Made first: where they cannot be (EMFILE), nothing changed.
            copies = self.chan.copies(fd)
            r, gen = self._hand_over(fd, cells, copies)
        except BaseException:
            for f in copies:
                f.close()
            _close(fd)  # not taken: the hub hears the failure at once
            raise
        # Output goes to the new hub before any of its cells runs; a pump
        # stuck on the old link gives up at once (Pump.attach).
        self.pump.attach(self.chan)
        if not self._read_on_a_thread(r, gen):
            # No thread to spare (a cell took every one the limit allows):
            # this one reads the new hub's frames until one can be started,
            # or the link ends. Meanwhile no other hub is taken, and a link
            # that freezes without a word holds it.
            self.read_loop(r, gen, inline=True)

    def _hand_over(self, fd, cells, copies):
        """The frame stream, to the hub on fd (copies: its Channel.copies),
        its ready frame first: the new channel's reader file and
        generation."""
        import json
        if not self.chan.down:
            self._hub_gone()  # the old hub's requests die with its link
        if self.cells is not None:
            try:
                self.drain_cells()  # an exec frame sent before the old hub went
            except OSError:
                pass
            self._drop_cells()
        with self.cond:
            running = self.key is not None and self.key[0] == "cell" and self.phase != IDLE
            cell = self.key[1] if running else self.last_cell
            # A cell whose exec frame came but waits in the queue (the main
            # thread is busy) counts as running: it will run.
            queued = [h for h, _ in self.queue if h.get("op") == "exec" and isinstance(h.get("cell"), int)]
            if queued and queued[-1]["cell"] > cell:
                cell, running = queued[-1]["cell"], True
                self.fence = queued[-1].get("fence", "")
            held = self.chan.held is not None
            ready = json.loads(_ready_frame(self.has_cloudpickle, self.sock_fields).decode("utf-8"))
            ready.update(adopted=True, cell=cell, running=running or held,
                         fence=self.fence if running or held else "")
            # The names the last hub had, as many as fit the hub's bound on
            # a ready frame (READY_NAMES_BYTES); the next done frame sends
            # them all.
            names, room = [], READY_NAMES_BYTES
            for name in self.names.sent or ():
                room -= len(json.dumps(name)) + 1
                if room < 0:
                    break
                names.append(name)
            if names:
                ready["names"] = names
            self.cells_token = None
            if cells:
                self.cells_token = ready["cells_token"] = os.urandom(16).hex()
            if running:
                import time
                ready["elapsed"] = max(0.0, time.time() - self.cell_t0)
            first = (json.dumps(ready, separators=(",", ":")) + "\n").encode("utf-8")
            return self.chan.attach(fd, first, copies)

    def _read_on_a_thread(self, r, gen):
        """Start the reader of hub connection gen; False if no thread
        could be started."""
        return _start_thread(self.read_loop, "replhub-reader", (r, gen)) is None

    @property
    def sock_fields(self):
        """The ready frame's word on the streams token and a remote
        worker's socket."""
        if self.linger is None:
            return (("streams", self.streams),)
        return (("streams", self.streams), ("sock", self.sock), ("sock_alt", self.sock_alt))

    def _keep_socket(self):
        """A socket whose folder went (a runtime folder removed at logout)
        moves, once, to the fallback folder (made 0700 if it is missing,
        as after a reboot), where the hub looks next."""
        if not self.sock_alt or os.path.exists(self.sock):
            return
        try:
            if _private_dir(os.path.dirname(self.sock_alt), create=True):
                ln = _listen(self.sock_alt)
                old, self.listener = self.listener, ln
                old.close()
                self.sock, self.sock_alt = self.sock_alt, None
        except OSError:
            pass

    def _send_quietly(self, header):
        try:
            self.chan.send(header)
        except Exception:
            pass

    def dispatch(self, header, data):
        op = header.get("op")
        if op == "error":
            return
        if self.cells is not None and op in ("interrupt", "query", "detach"):
            self.drain_cells()
        if op == "interrupt":
            self.interrupt(header.get("cell"))
        elif op == "cancel":
            self.cancel(header.get("sid"))
        elif op == "ping":
            self.chan.send({"op": "pong", "id": header.get("id")})
        elif op == "query":
            self.query(header)
        elif op == "exit":
            _flush()
            os._exit(0)
        elif op == "detach":
            # Output up to the fence, then detached, are this hub's last;
            # the rest waits for the next hub.
            if self.pump is not None:
                _flush()
                self.pump.detach(str(header.get("fence", "")).encode("utf-8"))
                self.chan.detach()
        elif op == "reply" and self._tk is not None:
            self._tk._link.dispatch(header, data)
        elif op in ("chunk", "ack") and self._tk is not None:
            self._tk.route(header, data)
        elif op not in ("reply", "chunk", "ack"):
            self._enqueue(header, data)

    # Queue a frame for the main thread, and wake it.
    def _enqueue(self, header, data):
        with self.cond:
            if header.get("op") == "exec" and isinstance(header.get("cell"), int):
                fence = header.get("fence")
                if fence and fence in self.exec_fences:
                    # Sent again: the hub's cell link on a host ended as it
                    # went, and the frame may not have (Session.cellsLost);
                    # the next cell's may have come first.
                    return
                if fence:
                    self.exec_fences.append(fence)
                self.seen_cell = max(self.seen_cell, header["cell"])
            self.queue.append((header, data))
            self.cond.notify()
            if self.spinning:
                self.aloop.call_soon_threadsafe(self._stop_spin)
            if self.selecting:
                try:
                    os.write(self.wake[1], b"!")
                except OSError:
                    pass  # full: it wakes already

    # Read exec frames from fd too (see _CellPipe): the pipe the first hub
    # gave, or an adopting hub's cell link (_take_cell_link). False, fd
    # left alone, where the last hub's is still open.
    def take_cells(self, fd):
        if self.wake is None:
            import threading
            self.cells_lock = threading.Lock()
            wake = os.pipe()
            _nonblocking(wake[0])
            _nonblocking(wake[1])
            self.wake = wake
        with self.cells_lock:
            if self.cells is not None:
                return False
            self.cells, self.had_cells = _CellPipe(fd), True
        with self.cond:
            # A thread of its own read the last one, and ends with it: the
            # main thread reads this one, or hands it to a new one (_spin).
            self.cells_thread = False
            self.cond.notify_all()  # waiting for frames on the channel alone
            if self.spinning:
                self.aloop.call_soon_threadsafe(self._stop_spin)
        return True

    # Queue every whole frame the cell pipe holds now, from any thread: the
    # main thread's, once select says it holds some; the reader's before an
    # interrupt, a query or a detach, and the accept loop's before an adopt,
    # so that an exec frame sent before those is queued before them, as on
    # one pipe.
    def drain_cells(self):
        with self.cells_lock:
            cells, more = self.cells, True
            while cells is not None:
                try:
                    msg = cells.take()
                    if msg is None:
                        if not more:
                            return
                        more = cells.fill()
                        continue
                except EOFError:
                    # Its hub went: frames come on the channel.
                    self.cells = None
                    self._let_go(cells.fd)
                    return
                except ValueError as e:
                    self._send_quietly({"op": "error", "error": _cap(str(e), ERROR_CAP)[0]})
                    continue
                self.cells_read += 1
                self._enqueue(*msg)

    # On the main thread: wait until the cell pipe holds something, or a
    # wake (a frame queued), and queue what it holds.
    def _read_cells(self, block):
        cells = self.cells
        if block and not cells.pending():
            import select
            ready = select.select([cells.fd, self.wake[0]], [], [])[0]
            if self.wake[0] in ready:
                try:
                    os.read(self.wake[0], 512)
                except OSError:
                    pass
            if cells.fd not in ready:
                return
        self.selecting = False  # no wake for the frames it queues itself
        self.drain_cells()

    # Hand the cell pipe to a thread of its own, for good: a loop that
    # cannot watch it runs between cells (_spin). False when no thread
    # could be started (a cell took every one the limit allows).
    # The thread reads that pipe or link alone, and ends once it is let go:
    # a link is shut then, which wakes its select; a pipe whose hub still
    # holds it open (a new hub adopted us from one that froze) is seen
    # gone at the next second's look.
    def _cells_by_thread(self):
        # Called from _spin alone: spinning keeps the pipe's fd open
        # (_let_go) until cells_thread says a thread reads it.
        import select
        mine = self.cells

        def run():
            while self.cells is mine and mine is not None:
                try:
                    if not mine.pending():
                        select.select([mine.fd], [], [], 1.0)
                    if self.cells is mine:
                        self.drain_cells()
                except Exception:
                    return
        ok = _start_thread(run, "replhub-cells") is None
        with self.cond:
            # Not where a new pipe or link came meanwhile (take_cells):
            # the main thread reads that one, or hands it on.
            if self.cells is mine:
                self.cells_thread = ok
        return ok

    def _look_at_cells(self, cells):
        """On the loop, every 10 ms while it spins: stop it once the cell
        pipe has a frame (_spin, where the loop can watch no pipe and no
        thread could be started to read it)."""
        import select
        self.cells_look = None
        if not self.spinning or self.cells is not cells:
            return
        try:
            ready = cells.pending() or select.select([cells.fd], [], [], 0)[0]
        except (OSError, ValueError):
            ready = True
        if ready:
            self.aloop.stop()
        else:
            self.cells_look = self.aloop.call_later(0.01, self._look_at_cells, cells)

    def query(self, header):
        """Answer a query frame on a thread of its own (a repr may hang,
        and the reader must go on reading interrupts); the query module says
        when it may run and how it is bounded."""
        with self.cond:
            if self.queries >= QUERIES_MAX:
                self._send_quietly({"op": "answer", "id": header.get("id"), "ok": False,
                                    "error": "it is answering %d queries already: ask again in a moment" % QUERIES_MAX})
                return
            self.queries += 1
        e = _start_thread(self._answer, "replhub-query", (header,))
        if e is not None:
            # No thread to spare: say so, and give the query's place back.
            with self.cond:
                self.queries -= 1
            self._send_quietly({"op": "answer", "id": header.get("id"), "ok": False, "error": _cap(
                "replhub: no thread to answer on (%s: %s); try again once the cell ends"
                % (type(e).__name__, e), ERROR_CAP)[0]})

    def _answer(self, header):
        reply = None
        try:
            try:
                reply = _load_module("query").answer(self, header)
            except BaseException as e:
                reply = {"ok": False, "error": _cap("replhub: %s: %s" % (type(e).__name__, e), ERROR_CAP)[0]}
            reply.update(op="answer", id=header.get("id"))
            try:
                if header.get("kind") == "reset" and reply.get("ok"):
                    self.names.send(self.chan, self.ns, reply, anew=True)
                else:
                    self.chan.send(reply)
            except ValueError as e:
                self._send_quietly({"op": "answer", "id": header.get("id"), "ok": False,
                                    "error": _cap(str(e), ERROR_CAP)[0]})
            except OSError:
                pass
        finally:
            with self.cond:
                self.queries -= 1

    def _signal_main(self):
        """With cond held, in phase RUNNING: KeyboardInterrupt for the main
        thread. A SIGINT that lands after the main thread let go of the
        interpreter lock for a blocking call but before the call began is
        seen only once the call returns (time.sleep(3600) sleeps on; on a
        busy machine, some interrupts in a thousand): while none was raised,
        it is sent again (_nudge)."""
        import _signal as signal
        self.sigint.sent, self.sigint.extra = True, 0
        signal.pthread_kill(self.main_ident, signal.SIGINT)
        self.nudged, self.nudges = self.key, 0
        if self.nudging:
            self.nudge_cond.notify()  # this frame's intervals, from the first
            return
        # Without a thread to spare, one SIGINT it is.
        self.nudging = _start_thread(self._nudge, "replhub-sigint") is None

    def _nudge(self):
        """Send SIGINT again, at growing intervals (20 times, 15 s in all),
        while the one sent was not raised and the frame it was sent to runs,
        and our handler is SIGINT's (a handler of the user's hears one per
        interrupt). Sigint drops one that comes after the raise."""
        import _signal as signal
        try:
            with self.cond:
                while True:
                    key, n = self.nudged, self.nudges
                    self.nudge_cond.wait(min(0.02 * 2 ** n, 1.0))
                    if (key, n) != (self.nudged, self.nudges):
                        continue  # another interrupt: its own intervals
                    if n >= 20 or not self.sigint.sent or self.key != key or self.phase != RUNNING:
                        self.nudging = False
                        return
                    self.nudges = n + 1
                    if signal.getsignal(signal.SIGINT) == self.sigint.handler:
                        self.sigint.extra += 1
                        signal.pthread_kill(self.main_ident, signal.SIGINT)
        except BaseException:
            self.nudging = False

    def interrupt(self, cell):
        """Answer interrupt: the answer is sent with cond held, so it goes
        before the cell's done frame; but for a cell whose code has ended,
        whose done frame is being made: "none" then goes after it (_idle),
        for the hub takes "none" to mean that the done frame came first."""
        with self.cond:
            if self.key == ("cell", cell) and self.phase == FINISHING:
                self.after_done.append(cell)
                return
            if self.key == ("cell", cell) and self.phase == RUNNING:
                self._signal_main()
                how = "delivered"
            elif (self.key == ("cell", cell) and self.phase == PARSING) or any(
                    h.get("op") == "exec" and h.get("cell") == cell for h, _ in self.queue) or (
                    self.had_cells and isinstance(cell, int) and cell > self.seen_cell):
                self.parked.add(("cell", cell))
                how = "parked"
            else:
                how = "none"
            self.chan.send({"op": "interrupted", "cell": cell, "how": how})

    def cancel(self, sid):
        """Stop what is served for sid: a transfer stops between chunks
        (its Stream is cancelled), put/get/call by KeyboardInterrupt, and a
        serve, swap or restore still queued is dropped and answered here."""
        with self.cond:
            if self.key == ("sid", sid):
                if self.phase == PARSING:
                    self.parked.add(self.key)
                elif self.phase == TRANSFER and self.stream is not None:
                    self.stream.cancel()
                elif self.phase == RUNNING:
                    self._signal_main()
                return
            for i, (h, _) in enumerate(self.queue):
                op = h.get("op")
                if op in ANSWER_OF and h.get("sid") == sid:
                    del self.queue[i]
                    answer = {"op": ANSWER_OF[op], "sid": sid, "ok": False, "error": "cancelled"}
                    if op == "serve":
                        answer["py"] = PY
                    self.chan.send(answer)
                    return

    # -- main thread: phases -------------------------------------------
    def _begin(self, phase, stream=None):
        """Go on with the frame just taken (serve() set its key); False if
        it was interrupted or cancelled before this."""
        with self.cond:
            self.phase, self.stream = phase, stream
            return self.key not in self.parked

    # _run and _stop take cond inside sigint's critical section: a
    # KeyboardInterrupt raised while cond is taken or let go (in
    # threading's own code, between the lock's call and the with block)
    # would keep it taken for good, and the reader, which takes it for
    # every interrupt, cancel and query, would wait for ever. A SIGINT
    # that lands there waits until cond is let go.

    def _run(self):
        """Enter user code: SIGINT raises from here on; False if it was
        interrupted or cancelled before this."""
        with self.sigint, self.cond:
            if self.key in self.parked:
                return False
            self.phase = RUNNING
            self.sigint.live = True
        return True

    def _stop(self):
        """Leave user code (any phase, idempotent). True if an interrupt was
        sent that has not been raised, or a SIGINT from elsewhere (a
        script's kill -INT) was kept pending in a guarded frame and no
        SIGINT section ended after it: then it ends the cell."""
        if os.getpid() != PID:
            # A child the cell forked, which run_cell ends: a lock another
            # thread held at the fork (a frame's send, a query) stays held.
            return False
        with self.sigint, self.cond:
            late = self.sigint.live and (self.sigint.sent or self.sigint.pending)
            self.sigint.live = self.sigint.sent = self.sigint.pending = False
            self.phase = FINISHING
            self.parked.discard(self.key)
            self.stream = None
        return late

    def _idle(self):
        with self.cond:
            self.phase, self.key, self.stream = IDLE, None, None
            self.idle_cond.notify_all()
            for cell in self.after_done:
                self._send_quietly({"op": "interrupted", "cell": cell, "how": "none"})
            del self.after_done[:]

    def _own_sigint(self):
        """Put our SIGINT handler back if user code set Python's default one."""
        import _signal as signal  # not signal's enums: a start pays for them
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, self.sigint.handler)

    # -- main thread ---------------------------------------------------
    def serve(self):
        while True:
            try:
                self.serve_one()
            except BaseException:
                pass  # the loop ends only with the process

    def serve_one(self):
        """Take the next frame and answer it, whatever happens."""
        header = None
        try:
            self.cond.acquire()
            try:
                while True:
                    held = self.querying and _monotonic() < self.query_until
                    if self.queue and not held:
                        break
                    while self.cells_gone:
                        _close(self.cells_gone.pop())
                    cells = self.cells is not None and not self.cells_thread
                    if held or (self.aloop is None and not cells):
                        self.cond.wait(max(0.01, self.query_until - _monotonic()) if held else None)
                        continue
                    # Tasks of cells that awaited run on while we wait, and
                    # the cell pipe is read.
                    self.spinning = self.aloop is not None
                    self.selecting = cells
                    self.cond.release()
                    try:
                        if self.aloop is not None:
                            self._spin()
                        if self.cells is not None and not self.cells_thread:
                            self._read_cells(self.aloop is None)
                    finally:
                        self.cond.acquire()
                        if self.spinning:
                            self.idle_cond.notify_all()  # a query waits for it (query.py)
                        self.spinning = self.selecting = False
                header, data = self.queue.pop(0)
                op = header.get("op")
                # From here an interrupt or a cancel finds it taken.
                self.key = ("cell", header.get("cell", 0)) if op == "exec" else ("sid", header.get("sid"))
                self.phase = PARSING
                self.sigint.sent = self.sigint.pending = False
            finally:
                self.cond.release()
            if op == "exec":
                self.run_cell(header)
            elif op == "serve":
                self.run_serve(header, data)
            elif op in ("swap", "restore"):
                self.run_swap(header)
            else:
                self.chan.send({"op": "error", "id": header.get("id"),
                                "error": _cap("unknown op %r" % (op,), ERROR_CAP)[0]})
        except BaseException:
            # run_cell and run_serve answer for themselves; this answers
            # when even they fail (no memory, a handler of the user's).
            exc = sys.exc_info()[1]
            while True:
                try:
                    self._last_word(header, exc)
                    break
                except KeyboardInterrupt:
                    continue  # raised before SIGINT was off: once more
        finally:
            self._sweep()
            self._idle()

    def _sweep(self):
        """Cancel the requests the frame's code left without an end
        (relay.Link.sweep), once SIGINT no longer raises (after _stop): at
        its end, before its answer, and again once it is over, for the
        paths where something failed before that."""
        tk = self._tk
        if tk is not None and tk._link.open:
            try:
                tk._link.sweep(self.main_ident)
            except Exception:
                pass  # OSError: the hub went, and its requests with it

    def _last_word(self, header, exc):
        self.sigint.live = False
        try:
            self._stop()
            if header is None:
                return
            error = {"type": type(exc).__name__, "message": "replhub could not finish it",
                     "traceback": "%s (in replhub, not in the cell)\n" % type(exc).__name__}
            if header.get("op") == "exec":
                self._write_done(header.get("fence", ""), {
                    "op": "done", "cell": header.get("cell", 0), "status": "error", "value": None,
                    "error": error, "duration": 0.0})
            elif header.get("op") == "serve":
                self.chan.send({"op": "served", "sid": header.get("sid"), "ok": False,
                                "error": error["traceback"], "py": PY})
        except Exception:
            pass

    def run_cell(self, header):
        import time
        t0 = time.time()
        cell = header.get("cell", 0)
        code = header.get("code", "")
        fname = "<cell-%d>" % cell
        self.fence, self.last_cell, self.cell_t0 = header.get("fence", ""), cell, t0
        if header.get("names"):
            self.names.forget()  # the hub missed a list
        self._own_sigint()
        status, value, error = "ok", None, None
        exit_code = None  # sys.exit's, in a (code,)
        try:
            if not self._begin(PARSING):
                status, error = "error", _PARKED
            else:
                _remember_source(fname, code)
                try:
                    body, last, named = _compile(code, fname)
                except Exception:
                    # The cell does not compile (a syntax error, or a tree too
                    # deep or too big): there are no frames worth showing.
                    etype, evalue = sys.exc_info()[:2]
                    status, error = "error", _await_too_old(evalue, code) or _error_dict(etype, evalue, None)
                else:
                    if not self._run():
                        status, error = "error", _PARKED
                    else:
                        late = False
                        try:
                            if body is None:
                                pass  # the cell is its last expression
                            elif body.co_flags & CO_COROUTINE:
                                self._await(eval(body, self.ns))
                            else:
                                exec(body, self.ns)
                            if last is not None or named:
                                v = self.ns.pop(VALUE_NAME, None) if named else eval(last, self.ns)
                                if v is not None:
                                    self.ns["_"] = v
                                    value = self.show_value(v)
                            if "matplotlib.pyplot" in sys.modules:
                                _load_module("mplinline").flush()
                        finally:
                            late = self._stop()
                        if late:
                            status, value = "error", None
                            error = _error_dict(KeyboardInterrupt, KeyboardInterrupt(), None)
        except SystemExit as e:
            self._stop()
            status, value, exit_code = "error", None, (e.code,)
            error = {"type": "SystemExit", "traceback": "",
                     "message": _cap("sys.exit(%r) was caught; the session goes on" % (e.code,), MESSAGE_CAP)[0]}
        except BaseException:
            self._stop()
            status, value = "error", None
            error = _error_dict(*sys.exc_info())
        self._stop()
        if os.getpid() != PID:
            # A child the cell forked (os.fork, no exec), back here: its cell
            # is over, as a script's end would be. As a second worker it
            # would take the session's cells and answer for them.
            _forked_exit(status, error, exit_code)
        self._sweep()  # before the done frame: the next cell finds the targets free
        done = {"op": "done", "cell": cell, "status": status, "value": value,
                "error": error, "duration": time.time() - t0}
        self.finish(header.get("fence", ""), done, self.display_items(done))

    def show_value(self, v):
        """A cell's last value v as Out's text (None when it has none):
        the text its type shows as (printed), or its repr; its richest
        representation, if it has one, goes with the cell's display items
        (replhub_toolkit/display.py)."""
        shown = _shown(v)
        if shown is not None:
            sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
            return None
        if type(v) not in _PLAIN and ("matplotlib.figure" in sys.modules or any(
                hasattr(type(v), m) for m in _RICH_METHODS)):
            try:
                if _load_module("display").value(v):
                    return None
            except Exception as e:
                sys.stderr.write("[display: %s: %s]\n" % (type(e).__name__, str(e)[:200]))
        return self.safe_repr(v)

    def display_items(self, done):
        """The display items shown since the last cell, into done's header;
        their bytes, one after the other, are the frame's payload."""
        mod = sys.modules.get("replhub_toolkit.display")
        if mod is None or not (mod._items or mod._size[1]):
            return None
        items, dropped = mod.take()
        done["display"] = [{"mime": m, "size": len(d)} for m, d in items]
        if dropped:
            done["dropped"] = dropped
        return b"".join(d for _, d in items)

    def _await(self, coro):
        """Run a cell's coroutine to its end on the session's event loop,
        made at the first cell that awaits; between cells the loop runs on
        (serve_one), so tasks a cell starts keep running. An interrupt
        cancels the cell's task while it awaits (_cancel_await), and ends
        the cell with KeyboardInterrupt."""
        import asyncio
        loop = self.aloop
        if loop is None or loop.is_closed():
            _guard_loops(self.sigint, asyncio)
            loop = self.aloop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
        task = loop.create_task(coro)
        self.cell_task, self.await_cancelled = task, False
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if not self.await_cancelled:
                raise
        except BaseException as e:
            if not task.done():
                task.cancel()  # it unwinds as the loop runs on
            raise e.with_traceback(_from_cell(e.__traceback__))
        finally:
            self.cell_task = None
        raise KeyboardInterrupt  # the interrupt cancelled it

    def _cancel_await(self):
        """On SIGINT, with the main thread in user code: True if a cell's
        task awaits and was cancelled, even while another task's step runs
        (that task is not the cell: it goes on); False when the cell's own
        synchronous code runs, which KeyboardInterrupt then stops, and for a
        second interrupt (a task that ignored the cancel, or a step stuck in
        synchronous code), which KeyboardInterrupt stops wherever it is."""
        task, loop = self.cell_task, self.aloop
        if task is None or task.done() or self.await_cancelled:
            return False
        import asyncio
        if asyncio.current_task(loop) is task:
            return False
        self.await_cancelled = True
        task.cancel()
        loop.call_soon_threadsafe(_noop)  # wake the loop from its select
        return True

    def _stop_spin(self):
        # On the loop, from dispatch: a call that comes late (the main
        # thread left the loop already) must not stop a cell's run.
        if self.spinning:
            self.aloop.stop()

    def _spin(self):
        """Between cells, run the session's event loop until a frame comes
        (dispatch stops it, or the cell pipe's), so that tasks go on while
        no cell runs."""
        loop, cells, look = self.aloop, self.cells, False
        if loop.is_closed():
            self.aloop = None
            return
        if self.cells_thread:
            cells = None
        if cells is not None:
            if cells.pending():
                return
            try:
                loop.add_reader(cells.fd, self._stop_spin)
            except Exception:
                look = not self._cells_by_thread()
                cells = None
        try:
            if look:
                self._look_at_cells(self.cells)
            loop.run_forever()
        except BaseException:
            if loop.is_closed():
                self.aloop = None
        finally:
            if self.cells_look is not None:
                self.cells_look.cancel()
                self.cells_look = None
            if cells is not None:
                try:
                    loop.remove_reader(cells.fd)
                except Exception:
                    pass

    def finish(self, fence, done, data=None):
        """Flush, then the fence and the done frame. SIGINT is dropped from
        here on (phase FINISHING), so neither can be lost or doubled.
        Background jobs that ended are mentioned first."""
        _job_notes()
        _flush()
        # Memory is read at most once a second, and on this machine at the
        # first cell only: the hub reads a local session's from /proc as it
        # lists it. Walking the process tree costs a tenth of a millisecond,
        # which a trivial cell's round trip should not pay.
        import time
        now = time.time()
        if now - self.rss_at > 1.0 and (IMPORTER is not None or not self.rss_at):
            self.rss_at = now
            done["rss"] = _rss()
        try:
            self._write_done(fence, done, data, names=True)
        except ValueError:
            # A header over the bound (a display list too long): the items
            # go, the cell's end does not. So does the len the first try
            # gave the header: no payload follows now.
            done.pop("display", None)
            done.pop("len", None)
            done["dropped"] = done.get("dropped", 0) + 1
            self._write_done(None, done)  # the fence went, quiet is said

    def _write_done(self, fence, done, data=None, names=False):
        """Write the fence, then done (with the names, when the hub lacks
        them and names is set)."""
        with self.sigint:
            # In stdout, after all the cell wrote to either stream, even
            # with fd 1 pointed elsewhere.
            try:
                if fence is not None and not self.pump.fence(fence.encode("utf-8")):
                    done["quiet"] = True
            except OSError:
                pass
            if names:
                self.names.send(self.chan, self.ns, done, data)
            else:
                self.chan.send(done, data)

    def run_serve(self, header, data):
        """Serve a put/get/call or a file's read or write for another
        session, on the main thread."""
        sid, kind = header.get("sid"), header.get("kind")
        reply, blob = {"ok": False, "error": "replhub: the toolkit did not load"}, None
        tk = None
        try:
            tk = self.tk
            if kind in ("read", "write"):
                # No KeyboardInterrupt here: cancel stops a transfer between
                # chunks, and its part file is removed.
                stream = tk.open_stream(("sid", sid))
                try:
                    if not self._begin(TRANSFER, stream):
                        raise tk.Cancelled()
                    reply, blob = tk.serve(self.ns, header, data, stream)
                finally:
                    tk.close_stream(("sid", sid))
            else:
                # A streamed object's chunks and acks go through stream;
                # cancel raises KeyboardInterrupt, as in the call's code.
                stream = tk.open_stream(("sid", sid))
                try:
                    if not self._run():
                        raise tk.Cancelled()
                    late = False
                    try:
                        reply, blob = tk.serve(self.ns, header, data, stream)
                    finally:
                        late = self._stop()
                    if late:
                        raise KeyboardInterrupt
                finally:
                    tk.close_stream(("sid", sid))
        except BaseException:
            self._stop()
            etype, e = sys.exc_info()[:2]
            blob = None
            if tk is not None and isinstance(e, tk.Cancelled):
                reply = {"ok": False, "error": "cancelled"}
            elif tk is not None and isinstance(e, tk.HubError):
                reply = {"ok": False, "error": str(e)}
            else:
                info = _error_dict(etype, e, sys.exc_info()[2])
                reply = {"ok": False, "error": info["traceback"] or info["message"]}
        self._stop()
        self._sweep()
        _flush()
        if isinstance(reply.get("error"), str):
            reply["error"] = _cap(reply["error"], TRACEBACK_CAP)[0]
        reply.update(op="served", sid=sid, py=PY)
        self.chan.send(reply, blob)

    def run_swap(self, header):
        """Pickle the namespace for the hub (swap), or load it back
        (restore), on the main thread like a cell; the work is
        replhub_toolkit.swap's. A cancel interrupts either."""
        op, sid, stream = header.get("op"), header.get("sid"), None
        kind = ANSWER_OF[op]
        tk = None
        try:
            tk = self.tk
            sw = _load_swap()
            if not self._run():
                raise KeyboardInterrupt
            late = False
            try:
                if op == "swap":
                    _started()
                    reply = sw.swap(self, header, self.chan, tk)
                elif header.get("path"):
                    with sw.open_checked(header.get("path")) as f:
                        reply = sw.restore(self, sw.FileIn(f), tk)
                else:
                    stream = tk.open_stream(("sid", sid))
                    self.chan.send({"op": "ack", "sid": sid, "seq": -1})
                    reply = sw.restore(self, sw.StreamIn(stream, self.chan, sid), tk)
            finally:
                late = self._stop()
            if late:
                raise KeyboardInterrupt
        except BaseException:
            self._stop()
            etype, e = sys.exc_info()[:2]
            if isinstance(e, KeyboardInterrupt) or (tk is not None and isinstance(e, tk.Cancelled)):
                why = "cancelled"
            elif type(e).__name__ == "SwapError" or isinstance(e, OSError):
                why = str(e)
            else:
                info = _error_dict(etype, e, sys.exc_info()[2])
                why = info["traceback"] or info["message"]
            reply = {"op": kind, "ok": False, "error": _cap(why, ERROR_CAP)[0]}
        finally:
            if stream is not None:
                tk.close_stream(("sid", sid))
        if op != "swap":
            self.names.forget()  # the hub takes the restore's names
        _flush()
        reply["sid"] = sid
        self.chan.send(reply)

    def safe_repr(self, v):
        try:
            text = repr(v)
        except BaseException as e:
            return _cap("<repr() failed: %s: %s>" % (type(e).__name__, e), VALUE_CAP)[0]
        return _cap(text, VALUE_CAP)[0]


# A value of these types shows as its repr, without a look at richer forms.
_PLAIN = (type(None), bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset, range)
_RICH_METHODS = ("_repr_mimebundle_", "_repr_png_", "_repr_jpeg_", "_repr_svg_", "_repr_markdown_",
                 "_repr_html_", "_repr_json_")


def _display(*objs, **kwargs):
    return _load_module("display").display(*objs, **kwargs)


# The user's display(): its docstring is its help, which a remote start
# would blank (payload.blankDocstrings) were it one.
_display.__doc__ = """Show each object by its richest representation: an image, or
    Markdown, HTML or JSON text; else its repr. include= and exclude= (MIME
    types) choose among them; raw=True takes {mime: data} bundles."""


def _shown(v):
    """The text a value shows as, when its type says (__replhub_show__:
    the toolkit's results print as plain text and stay usable as values);
    None for repr()."""
    show = getattr(type(v), "__replhub_show__", None)
    if show is None:
        return None
    try:
        text = show(v)
    except Exception:
        return None
    return text if isinstance(text, str) else None


class _ImportHook(object):
    """First on sys.meta_path, it finds nothing itself: it only notices
    two imports, to act once the module has loaded (AFTER): matplotlib's,
    to make replhub's inline backend matplotlib's default
    (replhub_toolkit/mplinline.py); linecache's, to hand it the sources of
    the cells run so far (_remember_source). A session that imports
    neither pays one call per import."""

    def __init__(self):
        self.busy = set()  # names being looked up, by this hook's own find

    def find_spec(self, name, path=None, target=None):
        if name not in _AFTER_IMPORT or name in self.busy:
            return None
        self.busy.add(name)
        try:
            if name == "linecache":
                # The standard library's, found on sys.path: importlib.util
                # would cost the first traceback 3 ms on some Pythons.
                from importlib.machinery import PathFinder
                spec = PathFinder.find_spec(name)
            else:
                import importlib.util
                spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Then(spec.loader, _AFTER_IMPORT[name])
        return spec


class _Then(object):
    """A module's own loader, and then after(module)."""

    def __init__(self, loader, after):
        self.loader = loader
        self.after = after

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.after(module)
        except Exception:
            pass


# Cells' sources until linecache is imported: linecache (with tokenize and
# re) costs a session's start 4 ms, and only a traceback, or code that
# looks at sources, needs it.
_SOURCES = {}


def _remember_source(fname, src):
    """Register src as fname's lines with linecache, now or at its import."""
    entry = (len(src), None, src.splitlines(True), fname)
    lc = sys.modules.get("linecache")
    if lc is None:
        _SOURCES[fname] = entry
        lc = sys.modules.get("linecache")  # imported meanwhile, by a thread
    cache = getattr(lc, "cache", None)  # None while its import runs
    if cache is not None:
        cache[fname] = entry


def _sources_to(linecache):
    linecache.cache.update(_SOURCES)


_AFTER_IMPORT = {
    "matplotlib": lambda module: _load_module("mplinline").select(module),
    "linecache": _sources_to,
}


def _job_notes():
    """One line per toolkit background job that ended since the last cell."""
    shell = sys.modules.get("replhub_toolkit.shell")
    try:
        for line in getattr(shell, "finished_jobs", lambda: [])():
            sys.stdout.write("[%s]\n" % line)
    except Exception:
        pass


_LOAD_LOCK = __import__("threading").Lock()  # one thread loads the package
_LOADED = [None]  # the package, once its load ended


def _package(at_start=False):
    """The package replhub_toolkit (beside this file, or served from
    memory): the relay, swap and queries, and the helpers every session
    starts with. Beside this file and at_start, before any user code runs,
    its __init__'s bytecode is kept in __pycache__ there, as the worker's
    (see the hub's workerLauncher), whatever PYTHONDONTWRITEBYTECODE says."""
    pkg = _LOADED[0]
    if pkg is not None and sys.modules.get("replhub_toolkit") is pkg:
        # Without the lock, which user code takes through display() and
        # the helpers: a KeyboardInterrupt as its with block ends can keep
        # it taken, which then only a second load would wait for.
        return pkg
    with _LOAD_LOCK:
        pkg = sys.modules.get("replhub_toolkit")
        if pkg is not None:
            _LOADED[0] = pkg
            return pkg
        here = os.path.join(os.path.dirname(os.path.abspath(_WORKER_FILE)), "replhub_toolkit")
        init = os.path.join(here, "__init__.py")
        if os.path.isfile(init):
            # importlib.machinery, not importlib.util: that costs 3 ms on 3.11.
            from importlib.machinery import ModuleSpec, SourceFileLoader
            loader = SourceFileLoader("replhub_toolkit", init)
            spec = ModuleSpec("replhub_toolkit", loader, origin=init, is_package=True)
            spec.submodule_search_locations, spec.has_location = [here], True
            pkg = type(sys)("replhub_toolkit")
            pkg.__spec__, pkg.__loader__, pkg.__file__ = spec, loader, init
            pkg.__path__, pkg.__package__ = [here], "replhub_toolkit"
            sys.modules["replhub_toolkit"] = pkg
            keep = sys.dont_write_bytecode
            sys.dont_write_bytecode = keep and not at_start
            try:
                loader.exec_module(pkg)
            except BaseException:
                del sys.modules["replhub_toolkit"]
                raise
            finally:
                sys.dont_write_bytecode = keep
            _LOADED[0] = pkg
            return pkg
        import replhub_toolkit
        _LOADED[0] = replhub_toolkit
        return replhub_toolkit


def _load_toolkit(no_tk):
    """The package, whose helpers every session starts with; None when the
    caller asked for none (REPLHUB_NO_TK=1) or it is missing."""
    if no_tk:
        return None
    try:
        return _package(at_start=True)
    except Exception:
        return None


# Make the worker's death, however it comes (os._exit, a crash in C,
# SIGKILL from the OOM killer), take its process group with it: children
# a cell started (a subprocess, a background job) would otherwise run on.
#
# A reaper process blocks reading a pipe whose write end only the worker
# holds (it is not inheritable, and a fork of the worker closes it); at
# EOF the worker is gone, and the reaper ends it all (_REAPER_END): the
# groups told on the pipe, then the group, itself included. It holds no
# other fd than the Pump's read ends and the first hub's output stream,
# so the hub still sees the worker's pipes close. It is started twice
# removed, so that the worker has no child of its own for os.wait() to
# find. It works the same where nobody else could signal the group: as
# root under sudo, or on a remote host.
#
# The reaper is a /bin/sh that waits (_REAPER_SH), spawned without a
# fork of the worker (os.posix_spawn, 3.8+): a fork write-protects all of
# the worker's memory, and its next writes fault page by page, which
# cost a session's first cell a quarter of its start on a virtual
# machine; a forked reaper also holds ~5 MB of the worker's old pages.
# Only at the worker's death does it run Python, to end it all. Where it
# cannot be spawned (3.6, 3.7, no /bin/sh), it is a fork of the worker.
#
# Only a group the worker leads is killed, or sudo's when sudo started
# the worker: locally the hub starts the worker (or sudo) as a group
# leader, and on a host sshd makes the channel's shell a session leader
# that the stub's exec turns into Python (or sudo). Run by hand from a
# shell without job control, the worker is in the shell's group, which is
# not its to end: then there is no reaper.
def _start_reaper(drain=None, socks=()):
    try:
        pgid = os.getpgid(0)
        if pgid != os.getpid() and not (pgid == os.getppid() and _parent_is_sudo()):
            return
        r, w = os.pipe()
    except (AttributeError, OSError):
        return
    # The stdout markers, for the reaper's Python, which has no _markers.
    marks = [m.decode("ascii") for m in _markers(drain.token)] if drain is not None else ["", ""]
    fds = (r, drain.o, drain.e, drain.errfd) if drain is not None and drain.errfd is not None else (r,)
    pid = _spawn_reaper(fds, pgid, socks, marks)
    if pid is None:
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:
            try:
                if os.fork() == 0:
                    _reap(fds, pgid, socks, marks)
            finally:
                os._exit(0)
    os.close(r)
    _REAPER[0] = w
    if hasattr(os, "register_at_fork"):
        # A fork of the worker that never execs (multiprocessing) must not
        # keep the reaper waiting after the worker dies.
        os.register_at_fork(after_in_child=lambda: (_close(w), _REAPER.__setitem__(0, None)))
    # The first child exits as soon as it has started the reaper: it is
    # reaped on a thread (_start_later), not waited for here, which cost a
    # start some 2 ms (two forks and their scheduling) on a busy machine.
    return pid


# The reaper's sh: $1 the Python, $2 _REAPER_END, $3 the group, then the
# stdout markers and the sockets. The pipe is fd 3; fds 4-6 (the Pump's O and E,
# the output stream) pass to the Python. A background list's stdin is
# /dev/null, hence fd 3. Group numbers are digits and above 1, or dropped.
_REAPER_SH = """trap '' INT TERM HUP QUIT PIPE TSTP TTIN TTOU
(
cd / || :
g=
while IFS= read -r l <&3; do
  n=${l#?}
  case $n in ''|*[!0-9]*) continue ;; esac
  [ "$n" -gt 1 ] || continue
  case $l in
  +*) g="$g $n" ;;
  -*) k=; for x in $g; do [ "$x" = "$n" ] || k="$k $x"; done; g=$k ;;
  esac
done
exec 3<&-
p=$1 c=$2 pg=$3
shift 3
"$p" -I -S -c "$c" "$pg" "$g" "$@"
kill -9 -$pg
) &
"""

# The reaper's end, in Python: kill the groups the worker told (the
# toolkit's jobs, in sessions of their own), remove a durable worker's
# sockets, pass on what is left in the Pump's pipes (the dying worker's
# last words that its pump had no time to: E's as it is, O's as stdout),
# then kill the worker's group, the reaper included. argv: the group, the
# groups told, the opening and closing stdout markers (_markers), the
# sockets. fds 4, 5, 6 as in _REAPER_SH; the fork runs it with its own
# (FDS).
_REAPER_END = """import os, signal, sys
def end(argv, fds=(4, 5, 6)):
    pgid, groups, socks = int(argv[0]), argv[1].split(), argv[4:]
    opening, closing = argv[2].encode("ascii"), argv[3].encode("ascii")
    for g in groups:
        try:
            os.killpg(int(g), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    for sock in socks:
        try:
            os.unlink(sock)
        except OSError:
            pass
    o, e, out = fds
    for fd, wrap in ((e, False), (o, True)):
        try:
            os.set_blocking(fd, False)
            for _ in range(64):
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                if wrap:
                    data = opening + data + closing
                while data:
                    data = data[os.write(out, data):]
        except OSError:
            pass
    os.killpg(pgid, signal.SIGKILL)
if __name__ == "__main__":
    end(sys.argv[1:])
"""


def _spawn_reaper(fds, pgid, socks, marks):
    """Spawn the sh reaper (see _start_reaper) with fds (the pipe, and
    the Pump's O and E and the output stream, when given) as 3, 4, 5, 6,
    /dev/null as 0-2, no other fd; its pid (the sh that starts it in the
    background and exits), or None where it cannot be spawned."""
    if not hasattr(os, "posix_spawn") or not os.path.exists("/bin/sh") or not sys.executable:
        return None
    import fcntl
    high = []
    try:
        # Above 6 first, so that no dup2 below overwrites a source.
        for fd in fds:
            high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        actions = [(os.POSIX_SPAWN_DUP2, fd, 3 + i) for i, fd in enumerate(high)]
        actions += [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
        for fd in _open_fds():
            if fd > 6 and fd not in high and _inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        argv = ["/bin/sh", "-c", _REAPER_SH, "replhub-reaper", sys.executable,
                _REAPER_END, str(pgid)] + list(marks) + list(socks)
        return os.posix_spawn("/bin/sh", argv, {"PATH": "/usr/bin:/bin"}, file_actions=actions)
    except (OSError, ValueError, AttributeError):
        return None
    finally:
        for fd in high:
            _close(fd)


def _inheritable(fd):
    try:
        return os.get_inheritable(fd)
    except OSError:
        return False  # the listing's own fd, closed by now


def _open_fds():
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")]
    except (OSError, ValueError):
        return range(3, 1024)


_REAPER = [None]  # the write end of the reaper's pipe
_STARTED = [None]  # an Event, set by _start_later


# Wait (briefly) until the worker's threads are up and the reaper's
# first child is reaped (_start_later): until then, a swap would count
# that child as the user's background job, and a change of
# threading.stack_size would reach the threads still to start.
def _started():
    started = _STARTED[0]
    if started is not None:
        started.wait(5)


# Start the worker's threads, the reader first: the first cell runs
# while the others start. Then reap the reaper's first child (reaper:
# its pid, or None), and set started. Each thread is made daemon here: a
# thread that threading does not know of must not ask it for
# current_thread(), which would list it as the user's.
def _start_later(threads, reaper, started, errfd):
    import threading
    try:
        for target, name, args in threads:
            threading.Thread(target=target, name=name, args=args, daemon=True).start()
    except BaseException:
        # Without them the worker cannot serve: it ends as an exception
        # in main would, its traceback where a crash's goes (see main).
        import traceback
        try:
            os.write(errfd, traceback.format_exc().encode("utf-8", "replace"))
        except (OSError, TypeError):
            traceback.print_exc()
        os._exit(1)
    try:
        if reaper is not None:
            os.waitpid(reaper, 0)
    except OSError:
        pass
    started.set()


# Take off the trace and profile functions that threading gave the
# calling thread: a first cell that set them (threading.settrace) may
# run before the pump and the accept loop start (_start_later).
def _untraced():
    sys.settrace(None)
    sys.setprofile(None)


def _reaper_group(pgid, alive):
    """Tell the reaper of a process group a toolkit helper started in a
    session of its own (alive), or that ended: it kills the live ones too
    when the worker dies."""
    w = _REAPER[0]
    if w is not None:
        try:
            os.write(w, ("%s%d\n" % ("+" if alive else "-", pgid)).encode())
        except OSError:
            pass


def _close(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def _socket_on(fd):
    """A socket object on a copy of fd, which it owns (the copy is closed
    where the object cannot be made)."""
    import socket
    dup = os.dup(fd)
    try:
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, dup)
    except BaseException:
        _close(dup)
        raise


def _shut(fd):
    """Shut socket fd both ways, which ends a read or select on it in any
    thread; a pipe's is left as it is."""
    import socket
    try:
        s = _socket_on(fd)
    except OSError:
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not a socket
    finally:
        s.close()


def _parent_is_sudo():
    try:
        with open("/proc/%d/comm" % os.getppid()) as f:
            return f.read().strip() == "sudo"
    except (IOError, OSError):
        return "SUDO_UID" in os.environ  # no /proc (macOS): sudo sets it


def _reap(fds, pgid, socks, marks):
    """The forked reaper's life (see _start_reaper): wait for EOF on the
    pipe, fds[0], keeping the groups told on it ("+PGID" and "-PGID"
    lines, see _reaper_group), then end it all as the sh reaper does."""
    import signal
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGPIPE", "SIGTSTP", "SIGTTIN", "SIGTTOU"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    for fd in _open_fds():
        if fd not in fds:
            _close(fd)
    try:
        os.chdir("/")
    except OSError:
        pass
    groups, buf = set(), b""
    while True:
        try:
            data = os.read(fds[0], 4096)
        except OSError:
            break
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                n = int(line[1:])
            except ValueError:
                continue
            if n <= 1:
                continue
            if line[:1] == b"+":
                groups.add(n)
            else:
                groups.discard(n)
    ns = {"__name__": "replhub-reaper"}
    exec(_REAPER_END, ns)
    ns["end"]([str(pgid), " ".join(str(g) for g in groups)] + list(marks) + list(socks),
              tuple(fds[1:]) if len(fds) == 4 else (-1, -1, -1))


def _setup_fds(token):
    """Take fds 0 and 1 for frames; point 0 at /dev/null, 1 and 2 at the
    Pump's pipes, which forwards them to the original stderr (see Pump).
    Returns the frame fds and the Pump."""
    rfd = os.dup(0)
    wfd = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    pump = Pump(token, os.dup(2))
    os.dup2(pump.ow, 1)
    os.dup2(pump.ew, 2)
    os.close(pump.ow)
    # Unbuffered text streams, so Python's writes and a child's writes
    # arrive in the order they were made.
    sys.stdout = io.TextIOWrapper(Stream(1, pump), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stderr = io.TextIOWrapper(Stream(2, pump), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
    return rfd, wfd, pump


def _ready_frame(has_cloudpickle, extra=()):
    # Written by hand: importing json costs milliseconds that a session's start
    # should not pay before "ready".  repr() of a str is not JSON, so escape.
    def js(s):
        out = ['"']
        for ch in s:
            o = ord(ch)
            if ch in '"\\':
                out.append("\\" + ch)
            elif o < 0x20 or o > 0x7e:
                if o > 0xffff:
                    o -= 0x10000
                    out.append("\\u%04x\\u%04x" % (0xd800 + (o >> 10), 0xdc00 + (o & 0x3ff)))
                else:
                    out.append("\\u%04x" % o)
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    v = sys.version_info
    more = "".join(',"%s":%s' % (k, "true" if val is True else js(val)) for k, val in extra if val)
    return ('{"op":"ready","proto":%d,"python":"%d.%d.%d","pid":%d,"cwd":%s,"executable":%s,'
            '"cloudpickle":%s%s}\n' % (PROTO, v[0], v[1], v[2], os.getpid(), js(cwd),
                                       js(sys.executable or ""),
                                       "true" if has_cloudpickle else "false", more)).encode("utf-8")


# The relay's helpers every session starts with, loaded at first use.
RELAY_HELPERS = ("session", "sessions", "sessions_on")


def _load_tk(cloudpickle_dir):
    """The relay (session(), put/get/call, transfers): replhub_toolkit.relay,
    also known as replhub_tk."""
    tk = _load_module("relay")
    sys.modules.setdefault("replhub_tk", tk)
    tk.CLOUDPICKLE_DIR = cloudpickle_dir
    return tk


def _load_swap():
    """The swap module, loaded at the first swap or restore."""
    return _load_module("swap")


def _load_module(name):
    """Module replhub_toolkit.NAME (relay, swap, query), loaded at its
    first use."""
    import importlib
    _package()
    return importlib.import_module("replhub_toolkit." + name)


def _has_cloudpickle(cloudpickle_dir):
    if sys.version_info < (3, 8):
        return False
    if cloudpickle_dir:
        return True
    # sys.path's finder straight: importlib.util costs a start 3 ms on some
    # Pythons, and cloudpickle is a package on sys.path or nowhere.
    from importlib.machinery import PathFinder
    try:
        return "cloudpickle" in sys.modules or PathFinder.find_spec("cloudpickle") is not None
    except Exception:
        return False



def main(argv):
    if IMPORTER is not None:
        # boot.py's sources for linecache wait with the cells' (_SOURCES).
        _SOURCES.update(IMPORTER.sources)
        IMPORTER.sources = _SOURCES
    cloudpickle_dir = None
    if "--cloudpickle" in argv:
        cloudpickle_dir = argv[argv.index("--cloudpickle") + 1]
    sock = sock_alt = linger = None
    ready_extra = ()
    if "--durable" in argv:
        # Outlive the hub: serve a socket that the next hub adopts us on.
        sock = argv[argv.index("--durable") + 1]
    elif "--linger" in argv:
        # On a host: outlive the link for that many seconds.
        sock, sock_alt, why = _linger_socket()
        if sock is not None:
            linger = float(argv[argv.index("--linger") + 1])
            ready_extra = (("sock", sock), ("sock_alt", sock_alt))
        else:
            ready_extra = (("linger_error", why),)
    token = _streams_token(argv)
    ready_extra += (("streams", token), ("bytecode", BYTECODE))
    cells = None
    if "--cells" in argv:
        # The cell pipe (_CellPipe) moves out of the way of the frame fds
        # (3 and 4, as without it), where no child inherits it; ready says
        # that exec frames may come on it.
        import fcntl
        import stat
        try:
            fd = int(argv[argv.index("--cells") + 1])
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):  # a pipe, or a socket pair
                cells = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
                os.set_inheritable(cells, False)
                os.close(fd)
                ready_extra += (("cells", True),)
        except (OSError, ValueError, IndexError):
            pass  # not given (a wrapper closed it): exec frames come on stdin
    link_token = None
    if sock is not None and cells is None:
        # No cell pipe (sudo passes only fds 0 to 2; a host's hub has none
        # to give): the hub may open a cell link on the socket, as a hub
        # that adopts us does (_adopt).
        link_token = os.urandom(16).hex()
        ready_extra += (("cells_token", link_token),)
    rfd, wfd, pump = _setup_fds(token)
    sys.argv = [""]
    # A REPL's sys.path[0] is the current directory, not the worker's folder.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(_WORKER_FILE)):
        sys.path[0] = ""
    chan = Channel(rfd, wfd)
    # Before ready: a SIGINT from then on (kill -INT, while the start goes
    # on) is dropped between cells, not Python's KeyboardInterrupt that
    # would end the worker.
    import _signal as signal  # not signal's enums: a start pays for them
    signal.signal(signal.SIGINT, chan.sigint.handler)
    listener = None
    if sock is not None:
        chan.durable = True
        listener = _listen(sock)
    has_cloudpickle = _has_cloudpickle(cloudpickle_dir)
    chan.send_raw(_ready_frame(has_cloudpickle, ready_extra))
    # After "ready", so that the hub does not wait for its ~2 ms; before
    # any thread, so that the forks copy no lock another thread holds.
    reaper = _start_reaper(pump, [p for p in (sock, sock_alt) if p])
    # A crash in C code then leaves its Python traceback as the session's
    # last words, which the hub keeps in the death note. It goes straight
    # to the first hub's output stream (as stderr: unmarked), not through
    # the pump, which dies with the process.
    import faulthandler
    faulthandler.enable(file=pump.errfd)
    import threading
    session = Session(chan, lambda: _load_tk(cloudpickle_dir), _load_toolkit("--no-tk" in argv))
    session.has_cloudpickle = has_cloudpickle
    session.pump, session.streams = pump, token
    session.cells_token = link_token
    if cells is not None:
        session.take_cells(cells)
    # The threads are started by one that threading does not know of
    # (_start_later), which the main thread does not wait for: a
    # threading.Thread's start waits until the thread runs, 0.5-2 ms on a
    # busy machine, and four of them came before the first cell. The frames
    # and the output wait in their pipes until the reader and the pump run.
    threads = [(session.read_loop, "replhub-reader", (chan._r, chan.gen)), (pump.run, "replhub-output", ())]
    if sock is not None:
        session.listener = listener
        session.sock, session.sock_alt, session.linger = sock, sock_alt, linger
        threads.append((session.accept_loop, "replhub-accept", ()))
    os._exit = pump.exit_after_drain(os._exit)
    sys.meta_path.insert(0, _ImportHook())
    if "linecache" in sys.modules:  # imported before the hook could see it
        _sources_to(sys.modules["linecache"])
    _STARTED[0] = threading.Event()
    import _thread
    _thread.start_new_thread(_start_later, (threads, reaper, _STARTED[0], pump.errfd))
    session.serve()


if __name__ == "__main__":
    main(sys.argv)
