"""replhub boot: starts a session on a host where nothing is installed.

The -c stub (stub.py) read this file and the module table after it from
stdin, byte-exact, and runs this file with PAYLOAD set to that table (JSON:
{"modules": {name: {"src": ..., "pkg": bool}}, "main": name, "bc": ...}).
Here the modules are served from memory by an import hook, their sources
registered with linecache so tracebacks show them, and the worker's main()
is run.  A late module ({"late": true}, no "src") is asked of the hub at its
first import, through the importer's fetch (set by the worker).

Bytecode: compiling the payload costs a start some 10 ms, so its code
objects are kept on the host, in the user's cache folder (see "the
bytecode cache" below).  Nothing else is written on the host.
Standard library only, Python 3.6+.
"""
import sys
from importlib.machinery import ModuleSpec

# Imported by nothing here: json (with re), linecache (with tokenize),
# importlib.abc and importlib.util (with pathlib, tempfile, typing) cost a
# start 15 ms on Python 3.11, before the worker even loads.


class MemoryImporter(object):
    """Finds and loads the payload's modules (a meta path finder and
    loader: the protocol, without importlib.abc's base classes)."""

    def __init__(self, modules, codes=None):
        self.modules = modules
        self.codes = codes or {}  # name -> code object, compiled already
        self.fetch = None  # fetch(name) -> source, for late modules
        # Sources for linecache until it is imported; the worker hands
        # them over then (and shares this dict from its start).
        self.sources = {}

    def find_spec(self, name, path=None, target=None):
        mod = self.modules.get(name)
        if mod is None:
            return None
        return ModuleSpec(name, self, origin=self.filename(name), is_package=bool(mod.get("pkg")))

    def filename(self, name):
        mod = self.modules[name]
        return "<replhub>/%s%s" % (name.replace(".", "/"), "/__init__.py" if mod.get("pkg") else ".py")

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        mod = self.modules[name]
        src = mod.get("src")
        if src is None:
            if self.fetch is None:
                raise ImportError("replhub: %s is sent at its first import, and the hub cannot be asked yet" % name)
            src = mod["src"] = self.fetch(name)
        fname = self.filename(name)
        module.__file__ = fname
        if self.modules[name].get("pkg"):
            module.__path__ = []
        entry = (len(src), None, src.splitlines(True), fname)
        cache = getattr(sys.modules.get("linecache"), "cache", None)
        if cache is None:
            self.sources[fname] = entry
        else:
            cache[fname] = entry
        code = self.codes.pop(name, None)
        exec(code or compile(src, fname, "exec"), module.__dict__)


# -- the bytecode cache ------------------------------------------------
#
# One file per payload, interpreter and optimization level:
# CACHE_DIR/ID-TAG-MAGIC[.opt-N].bc, ID the hub's digest of the payload's
# sources, TAG and MAGIC the interpreter's (sys.implementation.cache_tag,
# importlib's MAGIC_NUMBER), N its -O level (sys.flags.optimize).  It holds
# b"RHB1", a 32-byte MAC, then marshal data: (MAGIC, ID, {name: code}).
# The MAC is keyed BLAKE2b under a key the hub sends with the payload, so
# the host runs no bytes this hub did not make from this payload: not a
# file planted by another user, not a truncated one, not another Python's.
# The folder must be the effective user's, a real folder with no group or
# other bits, in folders that only the user and root can change (so not in
# the caller's home, for a root session whose sudo keeps HOME), and the
# file the user's, not writable by group or others;
# else, and on any doubt, the sources are compiled as they were sent, and
# the file is written anew where the folder allows.  A read-only home or a
# full disk only costs the compile.

BC_MAX = 64 << 20  # a larger file is not read
BC_KEEP_DAYS = 30


def _mac(key, data):
    try:
        from _blake2 import blake2b
        return blake2b(data, key=key, digest_size=32).digest()
    except ImportError:
        import hashlib
        import hmac
        return hmac.new(key, data, hashlib.sha256).digest()


def _cache_dir():
    """The cache folder, or None where there is no home to put it in."""
    import os
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base.startswith("/"):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    # Links resolved, for _way_ours.
    return os.path.join(os.path.realpath(base), "replhub") if base.startswith("/") else None


# Whether no one but the effective user and root can move or replace what
# is above path: each folder there that exists is no symbolic link, is the
# user's or root's, and others may not write to it (but for a sticky one,
# as /tmp), nor a group other than the user's own.  So a root session whose
# sudo keeps the caller's HOME keeps no cache in the caller's home: its
# files would be root's there, and the caller could move the folders under
# root's writes and its pruning.
def _way_ours(path):
    import os
    while path != "/":
        path = os.path.dirname(path)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        m = st.st_mode
        if m & 0o170000 == 0o120000 or st.st_uid not in (0, os.geteuid()) or \
                not m & 0o1000 and (m & 0o002 or m & 0o020 and st.st_gid != os.getegid()):
            return False
    return True


def _private(path):
    """Whether path is a real folder of ours with no group or other bits."""
    import os
    import stat
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0 and \
        _way_ours(path)


def _read_cache(path, key, ident, magic):
    """The cached {name: code}, or None with the reason."""
    import os
    import stat
    from _operator import _compare_digest
    import marshal
    if not _private(os.path.dirname(path)):
        return None, "cache folder not private" if os.path.lexists(os.path.dirname(path)) else "no cache"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None, "no cache"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None, "cache not ours"
        if st.st_size > BC_MAX:
            return None, "cache too big"
        chunks, n = [], 0
        while n < st.st_size:
            b = os.read(fd, st.st_size - n)
            if not b:
                break
            chunks.append(b)
            n += len(b)
        data = b"".join(chunks)
    except OSError:
        return None, "cache unreadable"
    finally:
        os.close(fd)
    if len(data) < 36 or data[:4] != b"RHB1" or not _compare_digest(_mac(key, data[36:]), data[4:36]):
        return None, "cache failed its check"
    try:
        m, i, codes = marshal.loads(data[36:])
    except Exception:
        return None, "cache failed its check"
    if m != magic or i != ident or not isinstance(codes, dict):
        return None, "cache failed its check"
    return codes, ""


def _write_cache(path, key, ident, magic, codes):
    """Write codes to path, whole or not at all; the reason when not."""
    import os
    import marshal
    d = os.path.dirname(path)
    if not _way_ours(d):
        return "cache folder not private"
    try:
        if not os.path.isdir(d):
            os.makedirs(d, 0o700)
    except OSError:
        return "cannot make the cache folder"
    if not _private(d):
        return "cache folder not private"
    body = marshal.dumps((magic, ident, codes))
    data = b"RHB1" + _mac(key, body) + body
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return "cache not writable"
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return "cache not writable"
    _prune(d, path)
    return ""


# Removes what older payloads (or a crash) left: files not written for
# BC_KEEP_DAYS; a host whose hub is upgraded so keeps no more than a month's.
# (A comment, not a docstring: the payload stays under its budget.)
def _prune(d, keep):
    import os
    import time
    try:
        for name in os.listdir(d):
            p = os.path.join(d, name)
            if p != keep and name.endswith((".bc", ".tmp")) and \
                    os.lstat(p).st_mtime < time.time() - BC_KEEP_DAYS * 86400:
                os.unlink(p)
    except OSError:
        pass


# The payload's code objects, from the host's cache or compiled now (and
# then kept there), and a word on the cache for the ready frame: "cached",
# "compiled, cached", or "compiled: REASON".  (A comment, not a docstring:
# the payload stays under its budget.)
def _codes(table, importer):
    bc = table.get("bc")
    if not bc:
        return {}, ""
    try:
        from _frozen_importlib_external import MAGIC_NUMBER
    except ImportError:
        from importlib.util import MAGIC_NUMBER
    key, ident, d = bytes.fromhex(bc["key"]), bc["id"], _cache_dir()
    # -O and -OO code (no asserts, no docstrings) apart, as Python's .opt-N.pyc
    opt = ".opt-%d" % sys.flags.optimize if sys.flags.optimize else ""
    path = "%s/%s-%s-%s%s.bc" % (d, ident, sys.implementation.cache_tag, MAGIC_NUMBER.hex(), opt)
    codes, why = _read_cache(path, key, ident, MAGIC_NUMBER) if d else (None, "no home folder")
    if codes is not None:
        return codes, "cached"
    codes = {}
    for name, mod in table["modules"].items():
        try:
            if mod.get("src") is not None:
                codes[name] = compile(mod["src"], importer.filename(name), "exec")
        except SyntaxError:
            return {}, "compiled: %s does not compile here" % name  # its import says why
    said = _write_cache(path, key, ident, MAGIC_NUMBER, codes) if d else "no home folder"
    return codes, "compiled, cached (%s)" % why if not said else "compiled: %s (%s)" % (said, why)


def _table(payload):
    """The module table: JSON that the hub wrote, read by _json's C scanner
    straight where it can be (see the worker's _frame_codec)."""
    text = payload.decode("utf-8")
    try:
        from _json import make_scanner
    except ImportError:
        import json
        return json.loads(text)

    class Decoding(object):
        strict, object_hook, object_pairs_hook = True, None, None
        parse_float, parse_int, parse_constant = float, int, float
    return make_scanner(Decoding())(text, 0)[0]


def run(payload):
    table = _table(payload)
    importer = MemoryImporter(table["modules"])
    importer.codes, said = _codes(table, importer)
    sys.meta_path.insert(0, importer)
    main = __import__(table["main"])
    main.IMPORTER = importer
    main.BYTECODE = said
    main.main(table.get("argv") or ["--stdio"])


run(PAYLOAD)  # noqa: F821 (set by the stub)
