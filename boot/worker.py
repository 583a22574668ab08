"""replhub worker: one session's Python process.

This file owns the session loop and the frame protocol with the hub, as
DESIGN.md lays them out:

* frames travel on private duplicates of the original fds 0 (hub -> worker)
  and 1 (worker -> hub), made before any user code runs;
* fds 1 and 2 then both point at the original stderr, which the hub reads as
  the session's output, so print(), subprocesses and C code all land there in
  the order they were written; fd 0 becomes /dev/null so input() sees EOF;
* a frame is one line of UTF-8 JSON, followed by exactly "len" raw bytes when
  the header has that key;
* after each cell the worker flushes, writes the cell's fence token to fd 1
  and sends "done": the hub needs both before it calls the cell finished.

Standard library only; runs on Python 3.6 through 3.13.  Keep it small.
"""

import os
import sys

PROTO = 2
_WORKER_FILE = __file__ if "__file__" in globals() else "<replhub-worker>"


def _grow_pipe(fd):
    """Before the first big frame each way: a 1 MiB pipe moves a file chunk
    in a few wakeups, not one per 64 KiB. Linux only, best effort
    (F_SETPIPE_SZ is 1031); a socket or a terminal just says no."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except Exception:
        pass


class Channel(object):
    """Frames over two file descriptors; send() may be called from any thread."""

    def __init__(self, rfd, wfd):
        import threading
        self._r = os.fdopen(rfd, "rb", 1 << 16)
        self._w = wfd
        self._lock = threading.Lock()
        self._big = False
        self._big_in = False
        self._pool = []

    def _line(self, header, n):
        """header's line, announcing n bytes to follow (None: no payload);
        the pipe grows before the first big payload."""
        import json
        if n is not None:
            header["len"] = n
            if n > (1 << 20) and not self._big:
                self._grow_pipe()
        return json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n"

    def send(self, header, data=None):
        line = self._line(header, None if data is None else len(data))
        with self._lock:
            self._write(line)
            if data:
                self._write(data)

    def send_file(self, header, f, offset, n):
        """Send a frame of n bytes of file f from offset, copied by the kernel
        (sendfile(2)) rather than through this process: a pull then costs
        the session a fraction of the CPU. Returns False, having sent
        nothing, where sendfile cannot be used. If the file gives fewer
        bytes (it shrank) or fails, the frame is completed with zeros, so the
        stream stays whole, and OSError says why; the transfer then fails
        and its partial file is removed."""
        sendfile = getattr(os, "sendfile", None)
        if sendfile is None or not sys.platform.startswith("linux"):
            return False
        line = self._line(header, n)
        failure = None
        with self._lock:
            self._write(line)
            done = 0
            while done < n:
                try:
                    k = sendfile(self._w, f.fileno(), offset + done, n - done)
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
        with self._lock:
            self._write(line)

    def _write(self, buf):
        view = memoryview(buf)
        while view:
            n = os.write(self._w, view)
            view = view[n:]

    def recv(self):
        """Return (header, data); None at EOF.  Raises ValueError on a bad frame."""
        import json
        line = self._r.readline()
        if not line:
            return None
        try:
            header = json.loads(line.decode("utf-8"))
        except ValueError as e:
            raise ValueError("malformed frame (%s): %r" % (e, line[:80]))
        if not isinstance(header, dict) or not isinstance(header.get("op"), str):
            raise ValueError("malformed frame (no op): %r" % (line[:80],))
        data = None
        n = header.get("len")
        if n:
            if not isinstance(n, int) or n < 0:
                raise ValueError("malformed frame (bad len): %r" % (line[:80],))
            if header["op"] == "chunk" and n > (1 << 20):
                if not self._big_in:
                    self._big_in = True
                    _grow_pipe(self._r.fileno())
                # A file chunk goes into a reused buffer (see release): fresh
                # 8 MiB objects cost page faults every time.
                buf = self._pool.pop() if self._pool else bytearray(8 << 20)
                data = memoryview(buf)[:n]
                got = 0
                while got < n:
                    k = self._r.readinto(data[got:])
                    if not k:
                        return None
                    got += k
            else:
                data = self._r.read(n)
                if len(data) != n:
                    return None
        return header, data

    def release(self, data):
        """Give back a chunk's buffer once it is written."""
        if isinstance(data, memoryview) and len(data.obj) == 8 << 20 and len(self._pool) < 8:
            self._pool.append(data.obj)


def _cap(text, limit):
    """Keep head and tail of text within limit characters."""
    if len(text) <= limit:
        return text, 0
    keep = limit // 2
    dropped = len(text) - 2 * keep
    return (text[:keep] + "\n[... %d characters left out ...]\n" % dropped + text[-keep:]), dropped


def _exc_info_dict(etype, value, tb):
    """Format an exception raised by a cell, without replhub's own frames."""
    import traceback
    ours = (_WORKER_FILE, getattr(sys.modules.get("replhub_tk"), "__file__", _WORKER_FILE))
    te = traceback.TracebackException(etype, value, tb)
    seen = set()
    t = te
    while t is not None and id(t) not in seen:
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list([f for f in t.stack if f.filename not in ours])
        t = t.__cause__ or t.__context__
    try:
        message = str(value)
    except Exception:
        message = "<unprintable %s>" % etype.__name__
    return {"type": etype.__name__, "message": message, "traceback": "".join(te.format())}


def _rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        try:
            import resource
            r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return r if sys.platform == "darwin" else r * 1024
        except Exception:
            return 0


class Session(object):
    """The cell loop: runs exec frames one at a time in a real __main__."""

    RESULT_CAP = 10000

    def __init__(self, chan, load_tk):
        import threading
        import types
        self.chan = chan
        self._load_tk = load_tk
        self._tk = None
        self.main_ident = threading.current_thread().ident
        self.running = False
        self.queue = []
        self.cond = threading.Condition()
        self.closed = False
        self.rss_at = 0.0
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        self.ns["session"] = self._lazy("session")
        self.ns["sessions"] = self._lazy("sessions")
        self.base_names = set(self.ns)

    @property
    def tk(self):
        """The toolkit, loaded at its first use: a session that never talks
        to another pays nothing for it at start."""
        if self._tk is None:
            tk = self._load_tk()
            tk._link = tk.Link(self.chan)
            self.ns["session"], self.ns["sessions"] = tk.session, tk.sessions
            self._tk = tk
        return self._tk

    def _lazy(self, name):
        def call(*args, **kwargs):
            return getattr(self.tk, name)(*args, **kwargs)
        call.__name__ = call.__qualname__ = name
        call.__doc__ = "replhub: %s() (see help once it has run once)" % name
        return call

    # -- reader thread -------------------------------------------------
    def read_loop(self):
        import signal
        seen_frame = False
        while True:
            try:
                msg = self.chan.recv()
            except ValueError as e:
                # Before the first frame, a line that is not one may be a sudo
                # password that sudo did not read: drop it without a word.
                if seen_frame:
                    self.chan.send({"op": "error", "error": str(e)})
                continue
            except Exception:
                msg = None
            if msg is None:
                # The hub is gone (or the link is): nobody can see us now.
                if self._tk is not None:
                    try:
                        self._tk.abort_transfers()
                    except Exception:
                        pass
                os._exit(0)
            header, data = msg
            seen_frame = True
            op = header.get("op")
            if op == "error":
                continue
            if op == "interrupt":
                if self.running:
                    signal.pthread_kill(self.main_ident, signal.SIGINT)
                continue
            if op == "ping":
                self.chan.send({"op": "pong", "id": header.get("id")})
                continue
            if op == "reply" and self._tk is not None:
                self._tk._link.dispatch(header, data)
                continue
            if op in ("chunk", "ack") and self._tk is not None:
                self._tk.route(header, data)
                continue
            with self.cond:
                self.queue.append((header, data))
                self.cond.notify()

    # -- main thread ---------------------------------------------------
    def serve(self):
        while True:
            try:
                with self.cond:
                    while not self.queue:
                        self.cond.wait()
                    header, data = self.queue.pop(0)
                op = header.get("op")
                if op == "exec":
                    self.run_cell(header)
                elif op == "serve":
                    self.run_serve(header, data)
                else:
                    self.chan.send({"op": "error", "id": header.get("id"),
                                    "error": "unknown op %r" % (op,)})
            except KeyboardInterrupt:
                # An interrupt that arrived just after a cell ended.
                continue

    def run_cell(self, header):
        import ast
        import linecache
        import time
        cell = header.get("cell", 0)
        code = header.get("code", "")
        fence = header.get("fence", "").encode("ascii")
        fname = "<cell-%d>" % cell
        linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
        status, value, error = "ok", None, None
        t0 = time.time()
        try:
            tree = ast.parse(code, fname, "exec")
        except (SyntaxError, ValueError):
            # The cell does not parse: there are no frames worth showing.
            import traceback
            etype, evalue = sys.exc_info()[:2]
            tree, status = None, "error"
            error = {"type": etype.__name__, "message": str(evalue),
                     "traceback": "".join(traceback.format_exception_only(etype, evalue))}
        if tree is not None:
            try:
                self.running = True
                try:
                    last = None
                    if tree.body and isinstance(tree.body[-1], ast.Expr):
                        last = ast.Expression(tree.body.pop().value)
                    exec(compile(tree, fname, "exec"), self.ns)
                    if last is not None:
                        v = eval(compile(last, fname, "eval"), self.ns)
                        if v is not None:
                            self.ns["_"] = v
                            value = self.safe_repr(v)
                finally:
                    self.running = False
            except SystemExit as e:
                status = "error"
                error = {"type": "SystemExit",
                         "message": "sys.exit(%r) was caught; the session goes on" % (e.code,),
                         "traceback": ""}
            except BaseException:
                status = "error"
                error = _exc_info_dict(*sys.exc_info())
        done = {"op": "done", "cell": cell, "status": status, "value": value,
                "error": error, "duration": time.time() - t0}
        # A late interrupt must not lose the fence or the done frame.
        pending = [fence]
        for _ in range(3):
            try:
                self.finish(pending, done)
                return
            except KeyboardInterrupt:
                continue

    def finish(self, pending, done):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if pending:
            try:
                os.write(1, pending[0])
            except OSError:
                pass
            del pending[:]
        done["names"] = sorted(k for k in self.ns
                               if not k.startswith("_") and k not in self.base_names)[:200]
        # Memory is read at most once a second: a trivial cell's round trip
        # should not pay for a file read.
        import time
        now = time.time()
        if now - self.rss_at > 1.0:
            self.rss_at = now
            done["rss"] = _rss()
        self.chan.send(done)

    def run_serve(self, header, data):
        """Serve a put/get/call for another session, on the main thread."""
        try:
            try:
                self.running = True
                reply, blob = self.tk.serve(self.ns, header, data)
            finally:
                self.running = False
        except self.tk.HubError as e:
            reply, blob = {"ok": False, "error": str(e)}, None
        except BaseException:
            info = _exc_info_dict(*sys.exc_info())
            reply, blob = {"ok": False, "error": info["traceback"] or info["message"]}, None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        reply.update(op="served", sid=header.get("sid"), py=self.tk.PY)
        self.chan.send(reply, blob)

    def safe_repr(self, v):
        try:
            text = repr(v)
        except BaseException as e:
            return "<repr() failed: %s: %s>" % (type(e).__name__, e)
        return _cap(text, self.RESULT_CAP)[0]


def _setup_fds():
    """Take fds 0 and 1 for frames; point 0 at /dev/null, 1 and 2 at output."""
    import io
    rfd = os.dup(0)
    wfd = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    # Unbuffered text streams, so Python's writes and a child's writes to the
    # same fd arrive in the order they were made.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.__stdout__, sys.__stderr__, sys.__stdin__ = sys.stdout, sys.stderr, sys.stdin
    return rfd, wfd


def _ready_frame(has_cloudpickle):
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
    return ('{"op":"ready","proto":%d,"python":"%d.%d.%d","pid":%d,"cwd":%s,"executable":%s,'
            '"cloudpickle":%s}\n' % (PROTO, v[0], v[1], v[2], os.getpid(), js(cwd),
                                     js(sys.executable or ""),
                                     "true" if has_cloudpickle else "false")).encode("utf-8")


def _load_tk(cloudpickle_dir):
    """The toolkit: replhub_tk.py beside this file, or served from memory."""
    here = os.path.join(os.path.dirname(os.path.abspath(_WORKER_FILE)), "replhub_tk.py")
    if os.path.isfile(here):
        import importlib.util
        spec = importlib.util.spec_from_file_location("replhub_tk", here)
        tk = importlib.util.module_from_spec(spec)
        sys.modules["replhub_tk"] = tk
        spec.loader.exec_module(tk)
    else:
        import replhub_tk as tk
    tk.CLOUDPICKLE_DIR = cloudpickle_dir
    return tk


def _has_cloudpickle(cloudpickle_dir):
    if sys.version_info < (3, 8):
        return False
    if cloudpickle_dir:
        return True
    import importlib.util
    try:
        return importlib.util.find_spec("cloudpickle") is not None
    except Exception:
        return False


def main(argv):
    cloudpickle_dir = None
    if "--cloudpickle" in argv:
        cloudpickle_dir = argv[argv.index("--cloudpickle") + 1]
    if "--modules" in argv:
        # The user's modules, after everything else on the path.
        sys.path.append(argv[argv.index("--modules") + 1])
    rfd, wfd = _setup_fds()
    sys.argv = [""]
    # A REPL's sys.path[0] is the current directory, not the worker's folder.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(_WORKER_FILE)):
        sys.path[0] = ""
    chan = Channel(rfd, wfd)
    chan.send_raw(_ready_frame(_has_cloudpickle(cloudpickle_dir)))
    # A crash in C code then leaves its Python traceback as the session's
    # last words, which the hub keeps in the death note.
    import faulthandler
    faulthandler.enable()
    import threading
    session = Session(chan, lambda: _load_tk(cloudpickle_dir))
    t = threading.Thread(target=session.read_loop, name="replhub-reader")
    t.daemon = True
    t.start()
    session.serve()


if __name__ == "__main__":
    main(sys.argv)
