"""replhub._libsystemd: the machine's libsystemd through ctypes, for the
systemd module: sd-bus method calls with values marshalled by their D-Bus
signature, and sd-journal reading. Only functions that are not variadic
are bound, so ctypes calls them right on every ABI. Standard library only,
Python 3.6 through 3.13.
"""
import ctypes
import ctypes.util
import os
import threading

if __name__.startswith("replhub."):
    from replhub import _programs
else:  # imported from its folder, as its tests do
    import _programs


class SystemdError(Exception):
    """What systemd refused or could not do, in one line."""


class _BusError(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("message", ctypes.c_char_p), ("need_free", ctypes.c_int)]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_S = ctypes.c_char_p
_I = ctypes.c_int
# name: (restype, argtypes), every function this module calls; none is
# variadic, so ctypes calls them right on every ABI.
SIGNATURES = {
    "sd_bus_open_system": (_I, [_PP]),
    "sd_bus_open_user": (_I, [_PP]),
    "sd_bus_flush_close_unref": (_P, [_P]),
    "sd_bus_message_new_method_call": (_I, [_P, _PP, _S, _S, _S, _S]),
    "sd_bus_call": (_I, [_P, _P, ctypes.c_uint64, ctypes.POINTER(_BusError), _PP]),
    "sd_bus_message_unref": (_P, [_P]),
    "sd_bus_message_append_basic": (_I, [_P, ctypes.c_char, _P]),
    "sd_bus_message_open_container": (_I, [_P, ctypes.c_char, _S]),
    "sd_bus_message_close_container": (_I, [_P]),
    "sd_bus_message_read_basic": (_I, [_P, ctypes.c_char, _P]),
    "sd_bus_message_read_array": (_I, [_P, ctypes.c_char, _PP, ctypes.POINTER(ctypes.c_size_t)]),
    "sd_bus_message_enter_container": (_I, [_P, ctypes.c_char, _S]),
    "sd_bus_message_exit_container": (_I, [_P]),
    "sd_bus_message_peek_type": (_I, [_P, ctypes.POINTER(ctypes.c_char), ctypes.POINTER(ctypes.c_char_p)]),
    "sd_bus_error_free": (None, [ctypes.POINTER(_BusError)]),
    "sd_journal_open": (_I, [_PP, _I]),
    "sd_journal_open_directory": (_I, [_PP, _S, _I]),
    "sd_journal_close": (None, [_P]),
    "sd_journal_add_match": (_I, [_P, _P, ctypes.c_size_t]),
    "sd_journal_add_disjunction": (_I, [_P]),
    "sd_journal_seek_realtime_usec": (_I, [_P, ctypes.c_uint64]),
    "sd_journal_next": (_I, [_P]),
    "sd_journal_get_data": (_I, [_P, _S, _PP, ctypes.POINTER(ctypes.c_size_t)]),
    "sd_journal_get_realtime_usec": (_I, [_P, ctypes.POINTER(ctypes.c_uint64)]),
    "sd_journal_set_data_threshold": (_I, [_P, ctypes.c_size_t]),
}

_LIB = None
_LIB_ERROR = None
_LIB_LOCK = threading.Lock()


def libsystemd():
    """The machine's libsystemd with every function of SIGNATURES bound,
    or None (libsystemd_error() says why)."""
    global _LIB, _LIB_ERROR
    if _LIB is not None or _LIB_ERROR is not None:
        return _LIB
    # In the SIGINT section: a KeyboardInterrupt as the lock is let go of
    # would keep it for good, and the next call wait for ever.
    with _programs.held(), _LIB_LOCK:
        if _LIB is None and _LIB_ERROR is None:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("systemd") or "libsystemd.so.0")
                for fn, (res, args) in SIGNATURES.items():
                    f = getattr(lib, fn)
                    f.restype, f.argtypes = res, args
                _LIB = lib
            except (OSError, AttributeError) as e:
                _LIB_ERROR = "libsystemd: %s" % e
        return _LIB


def libsystemd_error():
    libsystemd()
    return _LIB_ERROR


def _errno(r):
    return os.strerror(-r) if r < 0 else "error %d" % r


def _check(r, what):
    if r < 0:
        raise SystemdError("systemd: %s: %s" % (what, _errno(r)))
    return r


BASIC = {"y": ctypes.c_uint8, "b": ctypes.c_int, "n": ctypes.c_int16, "q": ctypes.c_uint16,
          "i": ctypes.c_int32, "u": ctypes.c_uint32, "x": ctypes.c_int64, "t": ctypes.c_uint64,
          "d": ctypes.c_double, "h": ctypes.c_int}
STRINGS = "sog"


def split_signature(sig):
    """The complete types of a D-Bus signature, or ValueError."""
    if not isinstance(sig, str) or len(sig) > 255:
        raise ValueError("systemd: %r is not a D-Bus signature" % (sig,))
    out, i = [], 0
    while i < len(sig):
        j = _complete(sig, i, 0)
        out.append(sig[i:j])
        i = j
    return out


def _complete(sig, i, depth):
    """The end of the complete type at sig[i]."""
    if depth > 32 or i >= len(sig):
        raise ValueError("systemd: %r is not a D-Bus signature" % (sig,))
    c = sig[i]
    if c in BASIC or c in STRINGS or c == "v":
        return i + 1
    if c == "a":
        if sig[i + 1:i + 2] == "{":
            if i + 2 >= len(sig) or not (sig[i + 2] in BASIC or sig[i + 2] in STRINGS):
                raise ValueError("systemd: %r: a dict's key is a basic type" % (sig,))
            j = _complete(sig, _complete(sig, i + 2, depth + 1), depth + 1)
            if sig[j:j + 1] != "}":
                raise ValueError("systemd: %r is not a D-Bus signature" % (sig,))
            return j + 1
        return _complete(sig, i + 1, depth + 1)
    if c == "(":
        j = i + 1
        while sig[j:j + 1] != ")":
            j = _complete(sig, j, depth + 1)
        if j == i + 1:
            raise ValueError("systemd: %r: an empty struct" % (sig,))
        return j + 1
    raise ValueError("systemd: %r is not a D-Bus signature" % (sig,))


class Bus(object):
    """One sd-bus connection: the system's or the user's. Close it (or use
    it in a with block); it belongs to the thread and process that made it."""

    def __init__(self, user=False):
        self.ptr = ctypes.c_void_p()
        self.lib = libsystemd()
        if self.lib is None:
            raise SystemdError("systemd: %s" % _LIB_ERROR)
        opener = self.lib.sd_bus_open_user if user else self.lib.sd_bus_open_system
        # A bus dropped unclosed (a KeyboardInterrupt before the with block
        # that closes it) is closed as it is collected (__del__), not left
        # open for good: its pointer is known before a KeyboardInterrupt
        # comes (held).
        with _programs.held():
            r = opener(ctypes.byref(self.ptr))
        if r < 0:
            raise SystemdError("systemd: no %s bus: %s" % ("user" if user else "system", _errno(r)))

    def close(self):
        """Closes the bus, once; guarded (below), so that a KeyboardInterrupt
        cannot land between the pointer's drop and the close."""
        ptr, self.ptr = getattr(self, "ptr", None), None
        if ptr:
            self.lib.sd_bus_flush_close_unref(ptr)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, dest, path, iface, member, sig="", args=(), timeout=25.0):
        """Call a method; its reply's values as a tuple."""
        types = arity(sig, args)
        lib = self.lib
        m = ctypes.c_void_p()
        reply = ctypes.c_void_p()
        err = _BusError()
        try:
            with _programs.held():
                r = lib.sd_bus_message_new_method_call(self.ptr, ctypes.byref(m), _b(dest), _b(path),
                                                       _b(iface) if iface else None, _b(member))
            _check(r, "%s.%s" % (iface, member))
            for t, v in zip(types, args):
                self._append(m, t, v)
            r = lib.sd_bus_call(self.ptr, m, int(timeout * 1e6), ctypes.byref(err), ctypes.byref(reply))
            if r < 0:
                name = (err.name or b"").decode("utf-8", "replace")
                msg = (err.message or b"").decode("utf-8", "replace") or _errno(r)
                raise BusCallError(name, msg)
            out = []
            while True:
                v = self._read(reply)
                if v is _END:
                    return tuple(out)
                out.append(v)
        finally:
            with _programs.held():
                lib.sd_bus_error_free(ctypes.byref(err))
                if m:
                    lib.sd_bus_message_unref(m)
                if reply:
                    lib.sd_bus_message_unref(reply)

    def _append(self, m, t, v):
        lib = self.lib
        c = t[0]
        if c in STRINGS:
            if not isinstance(v, str) or "\0" in v:
                raise TypeError("systemd: %r is not a D-Bus string (%s)" % (v, c))
            _check(lib.sd_bus_message_append_basic(m, c.encode(), ctypes.create_string_buffer(v.encode("utf-8"))),
                   "append")
        elif c in BASIC:
            if isinstance(v, str) or (c != "d" and not isinstance(v, int)):
                raise TypeError("systemd: %r is not a D-Bus %s" % (v, c))
            x = BASIC[c](v)
            _check(lib.sd_bus_message_append_basic(m, c.encode(), ctypes.byref(x)), "append")
        elif c == "v":
            inner, value = variant(v)
            _check(lib.sd_bus_message_open_container(m, b"v", inner.encode()), "append")
            self._append(m, inner, value)
            _check(lib.sd_bus_message_close_container(m), "append")
        elif c == "a":
            et = t[1:]
            _check(lib.sd_bus_message_open_container(m, b"a", et.encode()), "append")
            if et[0] == "{":
                kt, vt = split_signature(et[1:-1])
                for k, x in dict(v).items():
                    _check(lib.sd_bus_message_open_container(m, b"e", et[1:-1].encode()), "append")
                    self._append(m, kt, k)
                    self._append(m, vt, x)
                    _check(lib.sd_bus_message_close_container(m), "append")
            else:
                if isinstance(v, (str, dict)):
                    raise TypeError("systemd: %r is not a D-Bus array (%s)" % (v, t))
                for x in v:
                    self._append(m, et, x)
            _check(lib.sd_bus_message_close_container(m), "append")
        else:  # a struct
            fields = split_signature(t[1:-1])
            v = tuple(v)
            if len(v) != len(fields):
                raise TypeError("systemd: %r does not fit struct %s" % (v, t))
            _check(lib.sd_bus_message_open_container(m, b"r", t[1:-1].encode()), "append")
            for ft, x in zip(fields, v):
                self._append(m, ft, x)
            _check(lib.sd_bus_message_close_container(m), "append")

    def _read(self, m):
        """The next value of m, or _END."""
        lib = self.lib
        tc = ctypes.c_char()
        contents = ctypes.c_char_p()
        r = _check(lib.sd_bus_message_peek_type(m, ctypes.byref(tc), ctypes.byref(contents)), "read")
        if r == 0:
            return _END
        c = tc.value.decode()
        inner = (contents.value or b"").decode()
        if c in STRINGS:
            p = ctypes.c_char_p()
            _check(lib.sd_bus_message_read_basic(m, c.encode(), ctypes.byref(p)), "read")
            return p.value.decode("utf-8", "replace")
        if c in BASIC:
            x = BASIC[c]()
            _check(lib.sd_bus_message_read_basic(m, c.encode(), ctypes.byref(x)), "read")
            return bool(x.value) if c == "b" else x.value
        if c == "a" and inner == "y":
            p, n = ctypes.c_void_p(), ctypes.c_size_t()
            _check(lib.sd_bus_message_read_array(m, b"y", ctypes.byref(p), ctypes.byref(n)), "read")
            return ctypes.string_at(p, n.value) if n.value else b""
        _check(lib.sd_bus_message_enter_container(m, c.encode(), inner.encode()), "read")
        items = []
        while True:
            v = self._read(m)
            if v is _END:
                break
            items.append(v)
        _check(lib.sd_bus_message_exit_container(m), "read")
        if c == "v":
            return items[0]
        if c == "e" or c == "r":
            return tuple(items)
        if inner.startswith("{"):
            return dict(items)
        return items


_END = object()


class BusCallError(SystemdError):
    """A D-Bus method call's error: .name is the D-Bus error's name."""

    def __init__(self, name, message):
        SystemdError.__init__(self, "systemd: %s%s" % ("%s: " % name if name else "", message))
        self.name = name


def arity(sig, args):
    types = split_signature(sig)
    if len(types) != len(args):
        raise TypeError("systemd: signature %r takes %d arguments, not %d" % (sig, len(types), len(args)))
    return types


def _b(s):
    if "\0" in s:
        raise ValueError("systemd: %r holds a NUL" % (s,))
    return s.encode("utf-8")


def variant(v):
    """A variant's (signature, value): given as such, or guessed for str,
    bool, float and lists of str."""
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        split_signature(v[0])
        return v
    if isinstance(v, bool):
        return "b", v
    if isinstance(v, str):
        return "s", v
    if isinstance(v, float):
        return "d", v
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return "as", list(v)
    raise TypeError("systemd: give a variant as (signature, value), e.g. ('t', %r)" % (v,))


SD_JOURNAL_LOCAL_ONLY, SD_JOURNAL_SYSTEM, SD_JOURNAL_CURRENT_USER = 1, 4, 8


def read_journal(matches, fields, t0=None, user=False, directory=None):
    """Yield (epoch seconds, {field: text or None}) for each journal entry
    at or after t0 that matches: a list of groups, each a list of
    FIELD=value strings all of which must match, any group sufficing. The
    local journal (the user's own with user), or directory's files."""
    lib = libsystemd()
    if lib is None:
        raise SystemdError("systemd: %s" % _LIB_ERROR)
    # Closed in the finally clause, or, where a KeyboardInterrupt cut that
    # short, as the generator's frame lets go of it (_Journal.__del__).
    journal = _Journal(lib)
    j = journal.ptr
    try:
        with _programs.held():  # the pointer is known before a KeyboardInterrupt comes
            if directory is not None:
                r = lib.sd_journal_open_directory(ctypes.byref(j), _b(directory), 0)
            else:
                r = lib.sd_journal_open(ctypes.byref(j), SD_JOURNAL_LOCAL_ONLY | (SD_JOURNAL_CURRENT_USER if user else 0))
        _check(r, "opening the journal")
        lib.sd_journal_set_data_threshold(j, 64 << 10)
        for i, group in enumerate(matches):
            if i:
                _check(lib.sd_journal_add_disjunction(j), "journal match")
            for m in group:
                b = m.encode("utf-8")
                _check(lib.sd_journal_add_match(j, b, len(b)), "journal match")
        if t0 is not None:
            _check(lib.sd_journal_seek_realtime_usec(j, max(0, int(t0 * 1e6))), "journal seek")
        while _check(lib.sd_journal_next(j), "reading the journal") > 0:
            usec = ctypes.c_uint64()
            lib.sd_journal_get_realtime_usec(j, ctypes.byref(usec))
            if t0 is not None and usec.value / 1e6 < t0:
                continue
            yield usec.value / 1e6, dict((k, _field(lib, j, k)) for k in fields)
    finally:
        journal.close()


class _Journal(object):
    """An sd_journal pointer, closed once: by close() or as it is
    collected."""

    ptr = None  # where a KeyboardInterrupt cut __init__ short

    def __init__(self, lib):
        self.lib, self.ptr = lib, ctypes.c_void_p()

    def close(self):
        """Guarded (below), as Bus.close."""
        ptr, self.ptr = self.ptr, None
        if ptr:
            self.lib.sd_journal_close(ptr)

    __del__ = close


# A KeyboardInterrupt waits while these run their own code: a bus or a
# journal is closed whole, even from a finally clause it landed in.
_programs.guard(Bus.close, _Journal.close)


def _field(lib, j, name):
    p, n = ctypes.c_void_p(), ctypes.c_size_t()
    if lib.sd_journal_get_data(j, name.encode(), ctypes.byref(p), ctypes.byref(n)) < 0:
        return None
    raw = ctypes.string_at(p, n.value)
    return raw[len(name) + 1:].decode("utf-8", "replace")
