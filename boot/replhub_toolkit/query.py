"""replhub query: a session asked about its names without running a cell.

The worker (boot/worker.py, Session.query) hands each query frame to
answer() on a thread of its own. This file owns the four questions:

  vars      each user name with its type and a short repr
  inspect   one expression: type, repr, len, shape/dtype, signature and
            doc of a callable, public attributes
  complete  completions of a prefix: names, attributes, dict keys, import
            paths (what rlcompleter gives, and more)
  reset     the user's names cleared; the process, the toolkit and the
            session helpers (Session.base_values) stay, and, if asked, the
            modules the user imported
  check     whether a text is a whole statement, as Python's own REPL
            decides (codeop): replhub attach asks it at each Enter; it
            touches no name, so it does not wait for a running cell

No cell is counted, _ does not change, nothing goes to the transcript.

When it runs: only between cells. A query waits for the main thread to be
idle (a cell, a put/get/call served, a swap) for at most "wait" seconds,
and holds the next cell back while it runs (Session.querying), so user
code never runs on two threads at once because of a query. reset never
waits: a busy session refuses it.

Bounds: a repr, a len, an attribute or an eval is user code and may hang.
It runs on a thread of its own, and the answering thread raises Timeout in
it at its deadline (Deadline): Python code is stopped, loops with no call
in them too; a C call that does not return (time.sleep(30)) is not, so the
answer says so once the query's budget has passed, the call gets Timeout
when it returns, and the worker lets the next cell go once the budget and
its grace have passed (Session.query_until). Every text is capped, and
every list, with a count of what was left out.

Standard library only; runs on Python 3.6 through 3.13.
"""

import os
import re
import sys
import threading
import time
import types

VARS_LIMIT = 500        # names in a vars answer, by default
VARS_MAX = 5000         # and at most
VAR_REPR = 100          # characters of one name's repr in vars
VARS_TEXT = 200000      # characters of a whole vars answer
INSPECT_REPR = 4000     # characters of an inspected repr
DOC_LINES = 12
DOC_CAP = 2000
ATTRS_MAX = 300
KEPT_MAX = 500          # names of modules a reset lists as kept
COMPLETE_LIMIT = 200    # completions, by default
COMPLETE_MAX = 2000
KEYS_SCAN = 20000       # dict keys looked at for a completion
SHORT_TIME = 0.2        # seconds for one repr in vars
EXEC_WAIT = 1.0         # for an exec frame the hub sent before the query
LONG_TIME = 2.0         # seconds for an eval, a repr, a len in inspect
BUDGET = 5.0            # seconds for a whole query
GRACE = 5.0             # and past it, before the next cell goes anyway
QUIT = 1.0              # past the budget, before the answer says a runner is stuck
SOURCE_CAP = 2 << 20    # bytes of a module's source parsed for its names
FINISHING_WAIT = 2.0    # seconds any query waits for a cell that is ending


class Timeout(BaseException):
    """A bounded call ran out of time (a BaseException, so that user code's
    except Exception does not swallow it)."""


def _now():
    return time.monotonic()


def _async_raiser():
    """f(ident, exc): PyThreadState_SetAsyncExc, which has thread ident
    raise exc at its next check (exc None takes back one not raised yet);
    None where ctypes or CPython's C API is missing. A function object of
    its own: ctypes.pythonapi's is the user's too, with their argtypes."""
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes
        ident = ctypes.c_ulong if sys.version_info >= (3, 7) else ctypes.c_long
        f = ctypes.PYFUNCTYPE(ctypes.c_int, ident, ctypes.c_void_p)(
            ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
    except Exception:
        return None
    return lambda ident, exc: f(ident, None if exc is None else id(exc))


def _checkpoint():
    """A Python call and a loop: where the interpreter raises an
    asynchronous exception set for this thread, at the latest."""
    for _ in range(2):
        pass


class Deadline(object):
    """Runs user code (run) on the query's runner thread with a time limit,
    kept by the thread that answers (watch).

    Where ctypes reaches the C API, the watcher raises Timeout in the runner
    with PyThreadState_SetAsyncExc: the interpreter checks for it at every
    call and backward jump, so a loop with no Python call in it (a
    comprehension, while True: pass) is stopped too. A C call that does not
    return (time.sleep(30)) gets it only when it returns: the watcher
    answers at the budget all the same (_run_bounded).

    Elsewhere (no ctypes) a trace function raises Timeout at the next line
    or call of Python code past the deadline; a loop on one line may give
    it none (on 3.6 and 3.11, while True: pass), and then only the budget
    bounds the answer.

    A Timeout lands only in the run it was set for: it is set only for a
    run still in self.live, which the watcher and the run's end each pop
    (atomic under the GIL, no lock: the Timeout may land at any step of
    the end); a run that finds its entry gone waits there for its Timeout
    (_end)."""

    def __init__(self, budget, raiser=None):
        self.end = _now() + budget
        self.raise_in = raiser
        self.cond = threading.Condition(threading.Lock())
        self.live = {}       # a run under way: its deadline
        self.firing = None   # the run the watcher takes, until its Timeout is set
        self.closed = False  # the watcher left: no run starts
        self.ident = None
        self.at = None

    def left(self):
        return self.end - _now()

    def run(self, fn, seconds):
        at = min(_now() + seconds, self.end)
        if self.raise_in is None:
            if at <= _now():
                raise Timeout()
            self.at = at
            sys.settrace(self._trace)
            try:
                return fn()
            finally:
                sys.settrace(None)
                self.at = None
        key = object()
        with self.cond:
            if self.closed or at <= _now():
                raise Timeout()
            self.ident = threading.get_ident()
            self.live[key] = at
            self.cond.notify_all()
        try:
            return fn()
        finally:
            self._end(key)

    def _trace(self, frame, event, arg):
        # Python drops a trace function that raised: each run sets it again.
        if self.at is not None and _now() > self.at:
            raise Timeout()
        return self._trace

    def _end(self, key):
        # The watcher took this run if its entry is gone: then its Timeout
        # landed in the run, or is set (once firing lets go of the run) and
        # lands at the next check here, a call. Taking it back instead
        # (PyThreadState_SetAsyncExc with NULL) would leave 3.11's eval
        # breaker set for good, and line events lost to sys.settrace.
        try:
            if self.live.pop(key, None) is None:
                while self.firing is key:
                    time.sleep(0.0005)
                _checkpoint()
        except Timeout:
            pass

    def watch(self, done, most):
        """On the answering thread: raise Timeout in each run past its
        deadline, until done() (called with self.cond held; the runner
        notifies it) or most seconds past the budget. Whether done."""
        quit = self.end + most
        with self.cond:
            while not done():
                now = _now()
                if now >= quit:
                    self.closed = True
                    return False
                for key, at in list(self.live.items()):
                    if at <= now:
                        self.firing = key
                        if self.live.pop(key, None) is not None:
                            self.raise_in(self.ident, Timeout)
                        self.firing = None
                wake = min([quit] + list(self.live.values()))
                self.cond.wait(max(0.001, wake - now))
        return True


def _cap(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit - 1] + "\u2026"


def _type_name(v):
    t = type(v)
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", None) or t.__name__
    return name if mod == "builtins" else "%s.%s" % (mod, name)


def _reprer(size, items):
    import reprlib
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = size
    r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = items
    r.maxdict = items
    r.maxlevel = 3
    return r


def _repr(d, v, size, items, seconds):
    """v's repr within size characters (containers show their first items)
    and seconds; what failed says so instead."""
    try:
        text = d.run(lambda: _reprer(size, items).repr(v), seconds)
    except Timeout:
        return "<repr() took over %gs>" % seconds
    except BaseException as e:
        return "<repr() failed: %s>" % _cap("%s: %s" % (type(e).__name__, e), 200)
    return _cap(text, size)


def _error(e):
    return _cap("%s: %s" % (type(e).__name__, e), 2000)


# -- when to run ------------------------------------------------------------

def _idle(sess):
    """With sess.cond held: nothing runs on the main thread, nothing waits."""
    return sess.phase == "idle" and not sess.queue


def _await_exec(sess, cell, until):
    """Wait, until then, for the exec frame of cell, the last the hub sent
    before the query, where it may come after it: on a host, sshd writes
    the session's channel and its cell link to their sockets in its own
    order. A query that waits for the running cell then waits for that
    one."""
    if not isinstance(cell, int) or isinstance(cell, bool):
        return
    while sess.seen_cell < cell and sess.cells is not None and _now() < until:
        try:
            sess.drain_cells()
        except Exception:
            return
        if sess.seen_cell < cell:
            time.sleep(0.005)


def _busy_cell(sess):
    if sess.key is not None and sess.key[0] == "cell":
        return sess.key[1]
    for h, _ in sess.queue:
        if h.get("op") == "exec":
            return h.get("cell", 0)
    return 0


def answer(sess, header):
    """The answer frame's fields (op and id are the caller's) for query
    frame header, asked of Session sess."""
    kind = header.get("kind")
    fn = KINDS.get(kind)
    if fn is None:
        return {"ok": False, "error": "unknown query %r" % (kind,)}
    if kind == "check":
        return q_check(sess, header, None)
    wait = header.get("wait") or 0.0
    if kind == "reset" or not isinstance(wait, (int, float)) or wait < 0:
        wait = 0.0
    t0 = _now()
    _await_exec(sess, header.get("cell"), t0 + min(wait, EXEC_WAIT))
    waited_for = 0
    with sess.cond:
        while not _idle(sess):
            # A cell whose done frame went (finishing) is over for the hub:
            # even a query that does not wait waits for its last steps.
            if sess.phase == "finishing":
                wait = max(wait, FINISHING_WAIT)
            else:
                waited_for = waited_for or _busy_cell(sess)
            left = t0 + wait - _now()
            if left <= 0:
                return {"ok": False, "busy": True, "cell": _busy_cell(sess), "waited": _now() - t0}
            sess.idle_cond.wait(left)
        sess.querying += 1
        sess.query_until = max(sess.query_until, _now() + BUDGET + GRACE)
        _pause_loop(sess)
    waited = _now() - t0
    out = _run_bounded(sess, fn, header)
    out.setdefault("ok", True)
    if waited_for:
        out["cell"], out["waited"] = waited_for, waited
    return out


def _run_bounded(sess, fn, header):
    """fn's answer, run on a thread of its own (the runner) that this one
    watches (Deadline.watch); with sess.querying taken, which the runner
    gives back when it ends. A runner still in a C call QUIT seconds past
    the budget is left to end when the call returns (its Timeout is set),
    in one of the worker's QUERIES_MAX places, and the answer says so."""
    if _raiser[0] is False:
        _raiser[0] = _async_raiser()
    d = Deadline(BUDGET, _raiser[0])
    state = {}

    def runner():
        out = None
        try:
            out = fn(sess, header, d)
        except BaseException as e:
            out = {"ok": False, "error": "replhub: %s" % _error(e)}
        finally:
            state["out"] = out
            with sess.cond:
                sess.querying -= 1
                sess.queries -= state.get("left", 0)
                state["ended"] = True
                sess.cond.notify_all()
            with d.cond:
                d.cond.notify_all()

    try:
        t = threading.Thread(target=runner, name="replhub-query-run")
        t.daemon = True
        t.start()
    except Exception:
        # No thread to spare: run it here, bounded by the trace function.
        d.raise_in = None
        runner()
        return state["out"]
    if not d.watch(lambda: "out" in state, QUIT):
        with sess.cond:
            if not state.get("ended"):
                state["left"] = 1
                sess.queries += 1
                return {"ok": False, "error": (
                    "%s did not end within its %gs: user code is in a C call that cannot be stopped"
                    " (such as time.sleep); it gets Timeout when that call returns, and the next cell"
                    " waits for it up to %gs after the query began" % (header.get("kind"), BUDGET, BUDGET + GRACE))}
    t.join()
    return state["out"]


_raiser = [False]  # _async_raiser(), once made


def _pause_loop(sess, most=1.0):
    """With sess.cond held: stop the event loop that the main thread runs
    between cells (tasks of cells that awaited), so that no task's step runs
    beside the query; a step that holds on past most seconds is let be."""
    if not getattr(sess, "spinning", False):
        return
    sess.aloop.call_soon_threadsafe(sess._stop_spin)
    until = _now() + most
    while sess.spinning and _now() < until:
        sess.idle_cond.wait(until - _now())


# -- vars -------------------------------------------------------------------

def user_names(sess):
    """The names the user made or rebound: not the ones the worker had at
    start (the toolkit, session helpers, __builtins__ ...)."""
    base = sess.base_values
    out = []
    for k, v in list(sess.ns.items()):
        if not isinstance(k, str):
            continue
        if k in base and v is base[k]:
            continue
        out.append(k)
    return sorted(out)


def _one_line(text):
    return text.replace("\r", "\\r").replace("\n", "\\n")


def q_vars(sess, header, d):
    names = user_names(sess)
    hidden = 0
    if not header.get("all"):
        shown = [k for k in names if not k.startswith("_")]
        hidden = len(names) - len(shown)
        names = shown
    limit = header.get("limit") or VARS_LIMIT
    limit = max(1, min(int(limit), VARS_MAX))
    out, size, note = [], 0, None
    ns = sess.ns
    for k in names[:limit]:
        if d.left() <= 0:
            note = "the query's %gs ran out" % BUDGET
            break
        try:
            v = ns[k]
        except KeyError:
            continue  # a thread of the user's removed it
        r = _one_line(_repr(d, v, VAR_REPR, 6, SHORT_TIME))
        t = _cap(_type_name(v), 200)
        size += len(k) + len(t) + len(r) + 40
        if size > VARS_TEXT:
            note = "the answer reached its cap of %d characters" % VARS_TEXT
            break
        out.append({"name": _cap(k, 200), "type": t, "repr": r})
    res = {"vars": out, "total": len(names), "left": len(names) - len(out)}
    if hidden:
        res["hidden"] = hidden
    if note:
        res["note"] = note
    return res


# -- inspect ----------------------------------------------------------------

def _kind(v):
    import inspect
    if isinstance(v, types.ModuleType):
        return "module"
    if inspect.isclass(v):
        return "class"
    if inspect.isfunction(v) or inspect.ismethod(v):
        return "function"
    if inspect.isbuiltin(v) or inspect.ismethoddescriptor(v):
        return "builtin"
    if callable(v):
        return "callable"
    return "object"


def _doc(v):
    import inspect
    try:
        doc = inspect.getdoc(v) or ""
    except Exception:
        return ""
    lines = doc.strip().splitlines()
    more = len(lines) > DOC_LINES
    text = "\n".join(lines[:DOC_LINES])
    if more:
        text += "\n[... %d more lines]" % (len(lines) - DOC_LINES)
    return _cap(text, DOC_CAP)


def _attrs(d, v, kind):
    """v's public attribute names, callables marked with (); properties are
    not run (getattr_static), except a module's plain entries."""
    import inspect
    if kind == "module":
        entries = dict(vars(v))
        names = sorted(k for k in entries if isinstance(k, str) and not k.startswith("_"))
        look = lambda k: entries[k]
    else:
        names = d.run(lambda: sorted(k for k in dir(v) if isinstance(k, str) and not k.startswith("_")), LONG_TIME)
        look = lambda k: inspect.getattr_static(v, k, None)
    out = []
    for k in names[:ATTRS_MAX]:
        try:
            a = look(k)
            call = callable(a) or isinstance(a, (staticmethod, classmethod))
        except Exception:
            call = False
        out.append(k + "()" if call and not isinstance(a, property) else k)
    return out, max(0, len(names) - ATTRS_MAX)


def q_inspect(sess, header, d):
    import inspect
    expr = header.get("expr") or ""
    try:
        code = compile(expr, "<inspect>", "eval")
    except SyntaxError as e:
        return {"ok": False, "error": "not an expression: %s" % _error(e)}
    try:
        v = d.run(lambda: eval(code, sess.ns), LONG_TIME)
    except Timeout:
        return {"ok": False, "error": "evaluating %s took over %gs" % (_cap(expr, 200), LONG_TIME)}
    except BaseException as e:
        return {"ok": False, "error": "evaluating it raised %s" % _error(e)}
    kind = _kind(v)
    info = {"expr": _cap(expr, 1000), "type": _cap(_type_name(v), 300), "kind": kind,
            "repr": _repr(d, v, INSPECT_REPR, 50, LONG_TIME)}
    if kind == "object" and hasattr(type(v), "__len__"):
        try:
            info["len"] = int(d.run(lambda: len(v), LONG_TIME))
        except BaseException:
            pass
    if kind == "object":
        for k in ("shape", "dtype"):
            try:
                a = d.run(lambda: getattr(v, k, None), LONG_TIME)
                if a is not None and not callable(a):
                    info[k] = _cap(d.run(lambda: str(a), LONG_TIME), 300)
            except BaseException:
                pass
    if kind in ("function", "builtin", "class", "callable"):
        try:
            info["signature"] = _cap(d.run(lambda: str(inspect.signature(v)), LONG_TIME), 2000)
        except BaseException:
            pass
    if kind != "object":
        info["doc"] = _doc(v)
        try:
            f = inspect.getsourcefile(v) if kind != "module" else getattr(v, "__file__", None)
            if not f and kind != "module":
                f = inspect.getfile(v)
            if f:
                info["file"] = _cap(str(f), 1000)
                if kind in ("function", "class"):
                    info["line"] = d.run(lambda: inspect.getsourcelines(v)[1], LONG_TIME)
        except BaseException:
            pass
    if kind in ("module", "class") or (kind in ("object", "callable") and type(v).__module__ != "builtins"):
        try:
            info["attrs"], left = _attrs(d, v, kind)
            if left:
                info["attrs_left"] = left
        except BaseException:
            pass
    return {"inspect": dict((k, x) for k, x in info.items() if x not in ("", None))}


# -- complete ---------------------------------------------------------------

_IMPORT = re.compile(r"^\s*import\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*([\w.]*)$")
_FROM = re.compile(r"^\s*from\s+([\w.]*)$")
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+\(?\s*(?:\w+(?:\s+as\s+\w+)?\s*,\s*)*(\w*)$")
_KEY = re.compile(r"([A-Za-z_][\w.]*(?:\[[^\[\]]*\])*)\[\s*(['\"]?)([^'\"\[\]]*)$")
_TOKEN = re.compile(r"[\w.]*$")

_modules_cache = [None, 0.0, None]  # sys.path it was made for, when, names


def _top_modules():
    import pkgutil
    key = tuple(sys.path)
    if _modules_cache[0] == key and _now() - _modules_cache[1] < 60:
        return _modules_cache[2]
    names = set(sys.builtin_module_names)
    try:
        for m in pkgutil.iter_modules():
            names.add(m.name)
    except Exception:
        pass
    names.update(k for k in sys.modules if "." not in k)
    names = sorted(n for n in names if n.isidentifier())
    _modules_cache[:] = [key, _now(), names]
    return names


def _spec(name):
    """Module name's spec, found without importing anything: a package's
    submodule is looked for in its folders (PathFinder), not through its
    parent's import."""
    import importlib.machinery
    import importlib.util
    mod = sys.modules.get(name)
    if mod is not None:
        return getattr(mod, "__spec__", None)
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            locations = getattr(spec, "submodule_search_locations", None)
            if not locations:
                return None
            full = ".".join(parts[:i + 1])
            mod = sys.modules.get(full)
            if mod is not None:
                spec = getattr(mod, "__spec__", None)
            else:
                spec = importlib.machinery.PathFinder.find_spec(full, list(locations))
        return spec
    except Exception:
        return None


def _submodules(parent):
    """The submodules of package parent (imported or not), without
    importing anything."""
    import pkgutil
    names = set(k[len(parent) + 1:] for k in list(sys.modules) if k.startswith(parent + ".")
                and "." not in k[len(parent) + 1:])
    if parent == "replhub":  # served by the worker's finder, from the hub
        for finder in sys.meta_path:
            try:
                names.update(finder.replhub_names())
            except Exception:
                pass
    mod = sys.modules.get(parent)
    paths = getattr(mod, "__path__", None) if mod is not None else None
    if paths is None:
        paths = getattr(_spec(parent), "submodule_search_locations", None)
    if paths:
        try:
            for m in pkgutil.iter_modules(list(paths)):
                names.add(m.name)
        except Exception:
            pass
    return names


def _module_names(name):
    """The names module name defines: its attributes if it is imported,
    else its source's top-level names (read, not run), and its
    submodules."""
    names = _submodules(name)
    mod = sys.modules.get(name)
    if mod is not None:
        names.update(k for k in vars(mod) if isinstance(k, str))
        return names
    origin = getattr(_spec(name), "origin", None) or ""
    if origin.endswith(".py"):
        try:
            if os.path.getsize(origin) <= SOURCE_CAP:
                names.update(_source_names(origin))
        except (OSError, SyntaxError, ValueError):
            pass
    return names


def _source_names(path):
    import ast
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.add(t.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name != "*":
                    out.add((a.asname or a.name).split(".")[0])
    return out


def _safe_path(expr):
    """Whether expr is only names, attributes and constant subscripts
    (d, a.b, d["k"][0]): evaluating it calls nothing but properties and
    __getitem__."""
    import ast
    try:
        tree = ast.parse(expr, "<complete>", "eval")
    except SyntaxError:
        return False
    ok = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Load, ast.UnaryOp, ast.USub)
    ok += tuple(getattr(ast, n) for n in ("Constant", "Str", "Num", "Index") if hasattr(ast, n))
    return all(isinstance(n, ok) for n in ast.walk(tree))


def _pick(prefix, names):
    """names that start with prefix; _ names only when prefix starts with _."""
    return sorted(set(n for n in names if n.startswith(prefix) and (prefix.startswith("_") or not n.startswith("_"))))


def _key_matches(sess, d, expr, quote, prefix):
    if not _safe_path(expr):
        return []
    obj = d.run(lambda: eval(expr, sess.ns), LONG_TIME)
    keys = getattr(obj, "keys", None)
    if not callable(keys):
        return []

    def scan():
        out = []
        for i, k in enumerate(keys()):
            if i >= KEYS_SCAN:
                break
            if isinstance(k, str) and k.startswith(prefix):
                out.append((quote or '"') + k + (quote or '"') + "]")
            elif not quote and isinstance(k, (int, bytes)) and repr(k).startswith(prefix):
                out.append(repr(k) + "]")
        return out
    return sorted(set(d.run(scan, LONG_TIME)))


def q_complete(sess, header, d):
    import rlcompleter
    text = header.get("text") or ""
    limit = max(1, min(int(header.get("limit") or COMPLETE_LIMIT), COMPLETE_MAX))
    matches, start = [], len(text)
    m = _IMPORT.match(text) or _FROM.match(text)
    fm = _FROM_IMPORT.match(text)
    km = _KEY.search(text)
    try:
        if m:
            word = m.group(1)
            start = m.start(1)
            if "." in word:
                parent, prefix = word.rsplit(".", 1)
                matches = [parent + "." + n for n in _pick(prefix, _submodules(parent))]
            else:
                matches = _pick(word, _top_modules())
        elif fm:
            start = fm.start(2)
            matches = _pick(fm.group(2), _module_names(fm.group(1)))
        elif km:
            start = km.start(3) - len(km.group(2))
            matches = _key_matches(sess, d, km.group(1), km.group(2), km.group(3))
        else:
            token = _TOKEN.search(text).group(0)
            start = len(text) - len(token)
            c = rlcompleter.Completer(sess.ns)
            if "." in token:
                matches = d.run(lambda: c.attr_matches(token), LONG_TIME)
            else:
                matches = c.global_matches(token)
                if not token.startswith("_"):
                    matches = [x for x in matches if not x.startswith("_")]
            matches = sorted(set(matches))
    except Timeout:
        return {"ok": False, "error": "completing took over %gs" % LONG_TIME}
    except BaseException as e:
        return {"ok": False, "error": "completing raised %s" % _error(e)}
    head = text[:start]
    out = [_cap(head + x, 2000) for x in matches[:limit]]
    return {"completions": out, "left": max(0, len(matches) - limit)}


# -- reset ------------------------------------------------------------------

def q_reset(sess, header, d):
    """Clear the user's names: every name the worker did not have at start
    goes (with keep_imports, modules stay); a start name the user rebound
    gets its start value back."""
    import gc
    base = sess.base_values
    ns = sess.ns
    keep = bool(header.get("keep_imports"))
    removed, kept, restored = 0, [], []
    for k in list(ns):
        v = ns.get(k)
        if k in base:
            if v is not base[k]:
                ns[k] = base[k]
                restored.append(k)
            continue
        if keep and isinstance(v, types.ModuleType):
            kept.append(k)
            continue
        try:
            del ns[k]
            removed += 1
        except KeyError:
            pass
    for k, v in base.items():
        if k not in ns:
            ns[k] = v
            restored.append(k)
    v = None
    gc.collect()
    # The names left go with the answer (Session._answer, Names.send).
    res = {"removed": removed}
    if kept:
        # Bounded, as every list here: the answer must fit in a frame.
        res["kept"] = sorted(_cap(k if isinstance(k, str) else repr(k), 200) for k in kept)[:KEPT_MAX]
        if len(kept) > KEPT_MAX:
            res["note"] = "%d more names of modules kept" % (len(kept) - KEPT_MAX)
    if restored:
        res["restored"] = sorted(restored)
    return res


# -- check ------------------------------------------------------------------

def q_check(sess, header, d):
    """complete, incomplete (more lines to come) or invalid, by the rules of
    code.InteractiveConsole: codeop.compile_command in "single" mode. The
    text is compiled, never run; its warnings are not shown (the cell shows
    them when it runs)."""
    import codeop
    import warnings
    text = header.get("text") or ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = codeop.compile_command(text, "<stdin>", "single")
    except (SyntaxError, OverflowError, ValueError, MemoryError, RecursionError):
        return {"ok": True, "check": "invalid"}
    return {"ok": True, "check": "complete" if code is not None else "incomplete"}


KINDS = {"check": q_check, "vars": q_vars, "inspect": q_inspect, "complete": q_complete, "reset": q_reset}
