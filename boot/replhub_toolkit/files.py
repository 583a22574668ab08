"""replhub toolkit: reading, writing, editing and searching files.

Every helper returns a value that shows well (Text or Lines, see display.py)
and stays usable as data.  Bad input raises one error whose message starts
with the helper's name and says what to do: FileError (an OSError) for a path
that cannot be used, EditError (a ValueError) for an edit that does not fit.
Both are ToolError.

Text is UTF-8, read and written exactly as stored: line endings are kept, a
line is what ends in "\\n".  A file with a NUL byte in its first 8 KiB is
binary; those are for open(path, 'rb').

Writes are atomic: the new text goes to a temporary file in the same folder,
is flushed to disk and renamed over the old file, so a reader sees the old
file or the new one, never half of either.  An existing file keeps its mode
(and owner, when root writes).  A link is written through, to its target; a
hard-linked file becomes a file of its own.

grep searches with ripgrep when it is on PATH, else with GNU grep -P, else in
Python, and answers the same whichever runs: the files searched are the
regular files below the path, links not followed, hidden names (a dot first)
skipped unless hidden=True, .gitignore and the like not read, binary files
skipped; the lines are sorted by path, then line number.  A multiline search
runs in ripgrep or Python, never GNU grep.  Patterns are Perl-style; keep to
what Python's re, ripgrep and PCRE share (a pattern ripgrep's engine refuses,
such as a lookbehind, is run by the next one).  Lines are UTF-8; where a
line is not, its stray bytes match nothing in ripgrep and GNU grep and match
as U+FFFD in Python, and show as U+FFFD everywhere.
"""

import bisect
import difflib
import fnmatch
import glob as _glob
import os
import re
import shutil
import stat
import subprocess
import tempfile

from . import atomic, guard, held
from .children import reap
from .display import Lines, Text

BINARY_PEEK = 8192  # bytes looked at for a NUL to call a file binary
LINE_SHOW = 2000  # characters of a line shown by readn and grep
DIFF_SHOW = 400  # diff lines shown by the editing helpers
GREP_COLLECT = 200000  # matching lines grep gathers before it stops

HELP = {
    "read": "read(path, offset=0, limit=None): a text file exactly as stored (lines offset.. offset+limit)",
    "readn": "readn(path, offset=0, limit=2000): numbered lines, like cat -n, for looking",
    "write": "write(path, text): replace a file's contents atomically, keeping its mode",
    "edit": "edit(path, old, new, count=1): replace exact text that occurs at most count times; shows a diff",
    "edits": "edits(path, [(old, new), ...]): several edits in order, all or none, one write",
    "sed": "sed(path, pattern, repl, count=0, flags=0, must=True): re.subn on a file; shows a diff",
    "splice": "splice(path, start, end, text): replace lines start..end (1-based, inclusive)",
    "insert": "insert(path, line, text): insert text before a line (1-based; last+1 appends)",
    "glob": "glob(pattern, path='.'): matching paths, newest first; ** recurses; hidden only when named",
    "grep": "grep(pattern, path='.', glob=None, type=None, ...): path:line:text, sorted; rg, GNU grep or Python",
    "diff": "diff(a, b, n=3, text=False): unified diff of two files, two strings, or one of each",
}


class ToolError(Exception):
    """A toolkit helper refused its input; the message says why."""


class FileError(ToolError, OSError):
    """A path that cannot be used: missing, a folder, binary, unreadable."""


class EditError(ToolError, ValueError):
    """An edit that does not fit the file: text not found, or found too often."""


# --- reading ---------------------------------------------------------------


def _path(path):
    return os.path.expanduser(os.fspath(path))


def _open_error(name, path, e):
    """One FileError for an OSError met while opening path."""
    if isinstance(e, FileNotFoundError):
        return FileError("%s: no such file: %s" % (name, path))
    if isinstance(e, IsADirectoryError):
        return FileError("%s: %s is a folder, not a file; glob('*', %r) lists it" % (name, path, path))
    if isinstance(e, PermissionError):
        return FileError("%s: permission denied: %s" % (name, path))
    return FileError("%s: %s: %s" % (name, path, e.strerror or e))


def _decode(name, path, data, at=0):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileError("%s: %s is not UTF-8 text (byte 0x%02x at offset %d); read it with open(%r, 'rb')"
                        % (name, path, data[e.start], at + e.start, path)) from None


def _read_bytes(name, path, offset=0, limit=None):
    """The bytes of lines offset..offset+limit of a text file, where they
    start in it, and whether lines follow them."""
    path = _path(path)
    if offset < 0 or (limit is not None and limit < 0):
        raise EditError("%s: offset and limit must not be negative" % name)
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(st.st_mode):
            raise FileError("%s: %s is not a regular file" % (name, path))
        f = open(path, "rb")
    except ToolError:
        raise
    except OSError as e:
        raise _open_error(name, path, e) from None
    with f:
        # The whole file at once when it is all wanted: no second copy.
        head = f.read() if offset == 0 and limit is None else f.read(BINARY_PEEK)
        nul = head.find(b"\0", 0, BINARY_PEEK)
        if nul >= 0:
            raise FileError("%s: %s is binary (a NUL byte at offset %d); read it with open(%r, 'rb')"
                            % (name, path, nul, path))
        if offset == 0 and limit is None:
            return head, 0, False
        f.seek(0)
        out = []
        at = pos = 0
        for i, line in enumerate(f):
            if limit is not None and i >= offset + limit:
                return b"".join(out), at, True
            if i >= offset:
                if not out:
                    at = pos
                out.append(line)
            pos += len(line)
        return b"".join(out), at, False


def _text(name, path, offset=0, limit=None):
    data, at, more = _read_bytes(name, path, offset, limit)
    return _decode(name, _path(path), data, at), more


def _split(text):
    """text's lines, each with its "\\n" (the last may lack one)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def read(path, offset=0, limit=None):
    """A text file's contents exactly as stored, as Text.

    offset skips that many lines (0-based), limit keeps at most that many.
    A binary or non-UTF-8 file, a folder or a missing file raises FileError.
    """
    text, _ = _text("read", path, offset, limit)
    return Text(text)


def _clip(line):
    if len(line) > LINE_SHOW:
        return line[:LINE_SHOW] + " ...(%d more characters)" % (len(line) - LINE_SHOW)
    return line


def _numbered(lines, first):
    return ["%6d\t%s" % (first + i, _clip(l.rstrip("\n").rstrip("\r"))) for i, l in enumerate(lines)]


def readn(path, offset=0, limit=2000):
    """Lines offset+1.. numbered like cat -n, long lines cut: for looking.
    Use read() for the text itself."""
    text, more = _text("readn", path, offset, limit)
    out = _numbered(_split(text), offset + 1)
    if more:
        out.append("... (more lines: readn(%r, offset=%d))" % (path, offset + limit))
    if not out:
        out.append("(empty)" if offset == 0 else "(no lines after line %d)" % offset)
    return Text("\n".join(out))


# --- writing ---------------------------------------------------------------


def _write_atomic(name, path, data):
    """Write data to path through a temporary file in its folder: whole or
    not at all.  An existing file keeps its mode (and owner, when root)."""
    path = _path(path)
    if os.path.islink(path):
        path = os.path.realpath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileError("%s: folder %s does not exist; create it first with os.makedirs(%r)"
                        % (name, folder, folder))
    if os.path.isdir(path):
        raise FileError("%s: %s is a folder, not a file" % (name, path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _open_error(name, path, e) from None
    if st and not os.access(path, os.W_OK):
        raise FileError("%s: %s is read-only; chmod it first if it should change" % (name, path))
    try:
        atomic.replace(os.path.join(folder, os.path.basename(path)), data, keep=st)
    except PermissionError:
        raise FileError("%s: permission denied: cannot write in %s" % (name, folder)) from None
    except OSError as e:
        raise FileError("%s: %s: %s" % (name, path, e.strerror or e)) from None
    return path


def _count_lines(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def write(path, text):
    """Replace path's contents with text (str, or bytes as they are),
    atomically.  The folder must exist."""
    if isinstance(text, str):
        data = text.encode("utf-8")
        lines = _count_lines(text)
    elif isinstance(text, (bytes, bytearray)):
        data = bytes(text)
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    else:
        raise EditError("write: text must be str or bytes, not %s" % type(text).__name__)
    _write_atomic("write", path, data)
    return Text("wrote %s (%s) to %s" % (_plural(lines, "line"), _plural(len(data), "byte"), path))


# --- diffs -----------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _diff_lines(lines):
    """Lines for difflib without their "\\n", marking a last line without one
    as diff does."""
    return [l[:-1] if l.endswith("\n") else l + "\n\\ No newline at end of file" for l in lines]


def _common_prefix(a, b):
    """The length of the longest common prefix of a and b, compared a
    block at a time (at C speed), then by halves within the block."""
    n, i, block = min(len(a), len(b)), 0, 1 << 16
    while i < n:
        j = min(i + block, n)
        if a[i:j] != b[i:j]:
            break
        i = j
    else:
        return n
    lo, hi = i, j
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo:mid + 1] == b[lo:mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _common_suffix(a, b, limit):
    """The length, at most limit, of the longest common suffix of a and b."""
    la, lb, i, block = len(a), len(b), 0, 1 << 16
    while i < limit:
        j = min(i + block, limit)
        if a[la - j:la - i] != b[lb - j:lb - i]:
            break
        i = j
    else:
        return limit
    lo, hi = i, j
    while lo < hi:
        mid = (lo + hi) // 2
        if a[la - mid - 1:la - lo] == b[lb - mid - 1:lb - lo]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _unified(before, after, a="a", b="b", n=3, cap=None):
    """A unified diff of two texts; "(no change)" when equal.  What the two
    share at the start and at the end is found at C speed and left out
    (but for n lines of context) before difflib sees the rest, so a small
    change to a large file is quick."""
    if before == after:
        return "(no change)"
    p = _common_prefix(before, after)
    s = _common_suffix(before, after, min(len(before), len(after)) - p)
    # From the start of the line where they differ, n lines back.
    start = before.rfind("\n", 0, p) + 1
    for _ in range(n):
        if start == 0:
            break
        start = before.rfind("\n", 0, start - 1) + 1
    # To the end of the line where the common end begins, n lines on; the
    # same distance from the end in both.
    q = len(before) - s
    if q > start and before[q - 1] != "\n":
        q = before.find("\n", q)
        q = len(before) if q < 0 else q + 1
    for _ in range(n):
        if q >= len(before):
            break
        q = before.find("\n", q)
        q = len(before) if q < 0 else q + 1
    tail = len(before) - q
    x, y = _split(before[start:q]), _split(after[start:len(after) - tail])
    first = before.count("\n", 0, start)  # lines before the region
    out = []
    for line in difflib.unified_diff(_diff_lines(x), _diff_lines(y), a, b, n=n, lineterm=""):
        m = _HUNK.match(line)
        if m and first:
            line = "@@ -%d%s +%d%s @@" % (int(m.group(1)) + first, m.group(2) or "",
                                          int(m.group(3)) + first, m.group(4) or "")
        out.append(line)
    text = "\n".join(out)
    if cap is not None:
        shown = text.split("\n")
        if len(shown) > cap:
            text = "\n".join(shown[:cap]) + "\n... (%d more diff lines)" % (len(shown) - cap)
    return text


def _looks_like_path(s):
    try:
        return "\n" not in s and os.path.isfile(_path(s))
    except (OSError, ValueError):
        return False


def diff(a, b, n=3, text=False):
    """A unified diff of a and b, each a file or a string: a string with a
    newline in it, or any string when text=True, is text; else a path to an
    existing file is that file.  "(no change)" when they are equal."""
    sides = []
    for s in (a, b):
        if isinstance(s, os.PathLike) or (not text and isinstance(s, str) and _looks_like_path(s)):
            sides.append((_text("diff", s)[0], str(os.fspath(s))))
        elif isinstance(s, str):
            sides.append((s, "a" if not sides else "b"))
        else:
            raise EditError("diff: give str or a path, not %s" % type(s).__name__)
    (x, la), (y, lb) = sides
    return Text(_unified(x, y, la, lb, n))


# --- editing ---------------------------------------------------------------


def _line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def _nearest(text, old, show=12):
    """The lines of text most like old, numbered, for an error message."""
    lines = text.split("\n")
    want = old.split("\n")
    keys = [(k, w.strip()) for k, w in enumerate(want) if w.strip()][:3]
    if not keys or not lines:
        return ""
    stripped = [l.strip() for l in lines]
    scores = []
    sm = difflib.SequenceMatcher()
    for k, w in keys:
        sm.set_seq2(w)
        for i, l in enumerate(stripped):
            sm.set_seq1(l)
            if sm.real_quick_ratio() >= 0.6 and sm.quick_ratio() >= 0.6 and sm.ratio() >= 0.6:
                scores.append((sm.ratio(), i - k))
    if not scores:
        return ""
    scores.sort(reverse=True)
    best, top = None, -1.0
    for _, start in scores[:8]:
        start = max(0, start)
        window = "\n".join(lines[start:start + len(want)])
        r = difflib.SequenceMatcher(None, window, old).ratio()
        if r > top:
            best, top = start, r
    shown = lines[best:best + min(len(want), show)]
    return "\n".join(_numbered(shown, best + 1))


def _replace(name, path, text, old, new, count):
    """text with old replaced by new; EditError when old is missing or is
    there more than count times (count None: any number)."""
    if not isinstance(old, str) or not isinstance(new, str):
        raise EditError("%s: old and new must be str" % name)
    if old == "":
        raise EditError("%s: old is empty; use insert() or write() to add text" % name)
    if old == new:
        raise EditError("%s: old and new are the same" % name)
    n = text.count(old)
    if n == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # The file ends its lines with CRLF and the caller wrote "\n".
        crlf = old.replace("\n", "\r\n")
        if text.count(crlf):
            old, new, n = crlf, new.replace("\r\n", "\n").replace("\n", "\r\n"), text.count(crlf)
    if n == 0:
        near = _nearest(text, old)
        msg = "%s: old text not found in %s" % (name, path)
        if near:
            msg += "; the nearest lines:\n" + near
        raise EditError(msg)
    if count is not None and n > count:
        at, pos = [], text.find(old)
        while pos >= 0 and len(at) < 20:
            at.append(str(_line_of(text, pos)))
            pos = text.find(old, pos + 1)
        raise EditError("%s: old text found %d times in %s (lines %s%s); add context to make it unique, or pass count=%d"
                        % (name, n, path, ", ".join(at), ", ..." if n > len(at) else "", n))
    return text.replace(old, new)


def _apply(name, path, before, after, head=""):
    """Write after over path and return head plus a diff of the change."""
    if after != before:
        _write_atomic(name, path, after.encode("utf-8"))
    return Text(head + _unified(before, after, str(path), str(path), cap=DIFF_SHOW))


def edit(path, old, new, count=1):
    """Replace the exact text old with new.  Refused when old is not in the
    file (the nearest lines are shown) or is there more than count times
    (count=None: however often).  Returns a diff."""
    before, _ = _text("edit", path)
    after = _replace("edit", path, before, old, new, count)
    return _apply("edit", path, before, after)


def edits(path, changes):
    """Apply [(old, new), ...] (or (old, new, count)) in order, in memory:
    each must fit the text the ones before it left.  All or none; one write."""
    before, _ = _text("edits", path)
    after = before
    changes = list(changes)
    for i, change in enumerate(changes):
        if not isinstance(change, (tuple, list)) or len(change) not in (2, 3):
            raise EditError("edits: change %d is not (old, new) or (old, new, count)" % (i + 1))
        old, new = change[0], change[1]
        count = change[2] if len(change) == 3 else 1
        try:
            after = _replace("edits", path, after, old, new, count)
        except EditError as e:
            raise EditError("edits: change %d of %d: %s; nothing was written"
                            % (i + 1, len(changes), str(e)[len("edits: "):])) from None
    return _apply("edits", path, before, after)


def sed(path, pattern, repl, count=0, flags=0, must=True):
    """re.subn(pattern, repl, text, count, flags) on a file.  No match raises
    EditError unless must=False.  Returns "N changes" and a diff."""
    before, _ = _text("sed", path)
    try:
        after, n = re.subn(pattern, repl, before, count=count, flags=flags)
    except (re.error, IndexError, TypeError, ValueError) as e:
        raise EditError("sed: %s" % e) from None
    if n == 0 and must:
        raise EditError("sed: no match for %r in %s; pass must=False to allow that" %
                        (getattr(pattern, "pattern", pattern), path))
    return _apply("sed", path, before, after, "%s in %s\n" % (_plural(n, "change"), path))


def _as_lines(text, nl):
    """text ending in a line break, nl where it has none."""
    return text + nl if text and not text.endswith("\n") else text


def splice(path, start, end, text):
    """Replace lines start..end (1-based, both included) with text; text=""
    deletes them.  A text without a final newline gets the one of the last
    line it replaces.  Returns a diff."""
    before, _ = _text("splice", path)
    lines = _split(before)
    if not (1 <= start <= end <= len(lines)):
        raise EditError("splice: lines %d..%d are not within 1..%d of %s; insert() adds lines"
                        % (start, end, len(lines), path))
    last = lines[end - 1]
    if last.endswith("\n"):
        text = _as_lines(text, "\r\n" if last.endswith("\r\n") else "\n")
    after = "".join(lines[:start - 1]) + text + "".join(lines[end:])
    return _apply("splice", path, before, after)


def insert(path, line, text):
    """Insert text before line (1-based); line = last line + 1 appends.  A
    text without a final newline gets one, CRLF in a CRLF file.  Returns a
    diff."""
    before, _ = _text("insert", path)
    lines = _split(before)
    if not (1 <= line <= len(lines) + 1):
        raise EditError("insert: line %d is not within 1..%d of %s" % (line, len(lines) + 1, path))
    nl = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    text = _as_lines(text, nl)
    if text and line > len(lines) and lines:
        lines[-1] = _as_lines(lines[-1], nl)
    after = "".join(lines[:line - 1]) + text + "".join(lines[line - 1:])
    return _apply("insert", path, before, after)


# --- finding ---------------------------------------------------------------


def glob(pattern, path="."):
    """Paths matching pattern below path, newest first.  ** matches any
    number of folders; names starting with a dot match only a pattern part
    that starts with one."""
    path = _path(path)
    if not os.path.isdir(path):
        raise FileError("glob: no such folder: %s" % path)
    if os.path.isabs(pattern) or path in (".", ""):
        full = pattern
    else:
        full = os.path.join(_glob.escape(path), pattern)
    found = []
    for p in _glob.glob(os.path.expanduser(full), recursive=True):
        try:
            found.append((-os.stat(p).st_mtime, p))
        except OSError:
            continue
    found.sort()
    return Lines(p for _, p in found)


TYPES = {
    "py": ["*.py", "*.pyi"],
    "go": ["*.go"],
    "js": ["*.js", "*.jsx", "*.mjs", "*.cjs"],
    "ts": ["*.ts", "*.tsx", "*.mts", "*.cts"],
    "md": ["*.md", "*.markdown"],
    "json": ["*.json"],
    "yaml": ["*.yaml", "*.yml"],
    "c": ["*.c", "*.h"],
    "cpp": ["*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"],
    "rs": ["*.rs"],
    "java": ["*.java"],
    "sh": ["*.sh", "*.bash"],
}


def _braces(g):
    """"*.{py,pyi}" -> ["*.py", "*.pyi"] (one level, enough for globs)."""
    m = re.search(r"\{([^{}]*)\}", g)
    if not m:
        return [g]
    out = []
    for alt in m.group(1).split(","):
        out.extend(_braces(g[:m.start()] + alt + g[m.end():]))
    return out


def _name_globs(g):
    if g is None:
        return None
    out = []
    for one in ([g] if isinstance(g, str) else list(g)):
        if "/" in one:
            raise EditError("grep: glob %r names a folder; globs match file names only, put the folder in path" % one)
        out.extend(_braces(one))
    return out


def _fit(name, globs):
    return globs is None or any(fnmatch.fnmatchcase(name, g) for g in globs)


def _is_binary(path):
    # os.open and os.read, not open(): this runs once per file with a match,
    # and a buffered file object costs several times the read. Guarded
    # (below), so that the fd is kept as soon as it is open and closed
    # whatever a SIGINT cuts; the read, which may wait on slow storage, is
    # _has_nul's, which a Ctrl-C can cut. A FIFO does not block the open
    # (O_NONBLOCK).
    fd = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        return _has_nul(fd)
    except OSError:
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _has_nul(fd):
    return b"\0" in os.read(fd, BINARY_PEEK)


def _is_hidden(rel):
    return any(part.startswith(".") and part not in (".", "..") for part in rel.split("/"))


class _Refused(Exception):
    """A search program could not run this pattern; the next one may."""


_GNU = None


def _gnu_grep():
    """GNU grep's path when it is on PATH and knows -P, else None. Its two
    short runs are held (a Ctrl-C waits for them): cut, run's cleanup
    leaves a program that has not ended unreaped, and the answer is kept
    only once both ran."""
    global _GNU
    if _GNU is None:
        found = ""
        g = shutil.which("grep")
        if g:
            try:
                with held():
                    v = subprocess.run([g, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                    p = subprocess.run([g, "-P", "x", os.devnull], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if b"GNU grep" in v.stdout and p.returncode in (0, 1):
                    found = g
            except OSError:
                pass
        _GNU = found
    return _GNU or None


def backends():
    """The search programs grep can use here, in the order it tries them."""
    out = []
    if shutil.which("rg"):
        out.append("rg")
    if _gnu_grep():
        out.append("grep")
    out.append("python")
    return out


def _env():
    env = dict(os.environ)
    env["LC_ALL"] = "C.UTF-8"
    env.pop("GREP_OPTIONS", None)
    env.pop("RIPGREP_CONFIG_PATH", None)
    return env


def _run(argv, cwd, files_only, sink):
    """Run a search program and feed (path, line, text) to sink until it
    says stop; a program that refuses the pattern raises _Refused."""
    with tempfile.TemporaryFile() as err:
        p = None
        try:
            with held():  # a KeyboardInterrupt comes once p is known, and ends it below
                p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=err, env=_env())
            if files_only:
                names = _split_nul(p.stdout)
                found = ((os.fsdecode(name), 0, None) for name in names)
            else:
                found = _parse_lines(p.stdout)
            for hit in found:
                if sink(*hit):
                    return
            _refusal(p, err)
        finally:
            _end(p)


def _split_nul(f):
    rest = b""
    while True:
        chunk = f.read(65536)
        if not chunk:
            return
        parts = (rest + chunk).split(b"\0")
        rest = parts.pop()
        for part in parts:
            yield part.lstrip(b"\n")


def _parse_lines(f):
    """(path, line, text) from "path\\0line:text" lines; text stays bytes.
    A match-heavy search yields tens of thousands: the loop is kept lean."""
    names = {}
    for raw in f:
        name, _, rest = raw.partition(b"\0")
        num, _, text = rest.partition(b":")
        path = names.get(name)
        if path is None:
            path = names[name] = os.fsdecode(name)
        try:
            yield path, int(num), text
        except ValueError:
            continue


def _walk(root, hidden, globs):
    """The regular files below root, links not followed, as root would
    join them."""
    if not os.path.isdir(root):
        yield root
        return
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            if not hidden and e.name.startswith("."):
                continue
            try:
                if e.is_symlink():
                    continue
                if e.is_dir():
                    stack.append(e.path)
                elif e.is_file() and _fit(e.name, globs):
                    yield e.path
            except OSError:
                continue


def _python(regex, root, hidden, globs, multiline, files_only, max_count, sink):
    for path in _walk(root, hidden, globs):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data[:BINARY_PEEK]:
            continue
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if multiline:
            starts = [0]
            pos = text.find("\n")
            while pos >= 0:
                starts.append(pos + 1)
                pos = text.find("\n", pos + 1)
            seen = set()
            for m in regex.finditer(text):
                first = bisect.bisect_right(starts, m.start())
                last = bisect.bisect_right(starts, max(m.start(), m.end() - 1))
                for n in range(first, min(last, len(lines)) + 1):
                    if n not in seen and n <= len(lines):
                        seen.add(n)
                        if sink(path, n, lines[n - 1]):
                            return
                        if files_only:
                            break
                if files_only and seen:
                    break
        else:
            found = 0
            for n, line in enumerate(lines, 1):
                if regex.search(line):
                    if sink(path, n, line):
                        return
                    found += 1
                    if files_only or (max_count and found >= max_count):
                        break


def grep(pattern, path=".", glob=None, type=None, hidden=False, multiline=False, ignore_case=False,
         files_only=False, context=0, max_count=None, limit=1000, backend=None):
    """Lines matching pattern in the files below path, as "path:line:text",
    sorted by path then line; with context, the lines around them as
    "path-line-text" and "--" between groups.  files_only gives the paths.

    glob ("*.py", "*.{c,h}" or a list) and type ("py", "go", ... see TYPES)
    choose files by name; hidden=True searches names starting with a dot;
    max_count keeps the first matching lines of each file.  At most limit
    lines come back, then a note.  backend: "rg", "grep" or "python"; by
    default the first of backends().
    """
    root = os.path.normpath(_path(path))
    if not os.path.exists(root):
        raise FileError("grep: no such file or folder: %s" % root)
    if type is not None and type not in TYPES:
        raise EditError("grep: unknown type %r; known: %s" % (type, ", ".join(sorted(TYPES))))
    user_globs = _name_globs(glob)
    type_globs = TYPES[type] if type else None
    pre = type_globs if type_globs is not None else user_globs
    flags = re.IGNORECASE if ignore_case else 0
    try:
        regex = re.compile(pattern, flags | (re.MULTILINE if multiline else 0))
    except re.error as e:
        regex, py_error = None, e
    order = backends()
    if backend is not None:
        if backend not in order:
            raise EditError("grep: backend %r is not available here; available: %s" % (backend, ", ".join(order)))
        order = order[order.index(backend):]
    chain = []
    for name in order:
        if name == "rg":
            chain.append((name, _rg_argv(pattern, root, hidden, pre, multiline, ignore_case, files_only,
                                         max_count, False)))
            if _rg_pcre2():
                chain.append(("rg -P", _rg_argv(pattern, root, hidden, pre, multiline, ignore_case, files_only,
                                                max_count, True)))
        elif name == "grep" and not multiline:
            chain.append((name, _grep_argv(pattern, root, hidden, pre, ignore_case, files_only, max_count)))
        elif name == "python":
            chain.append((name, None))
    is_dir = os.path.isdir(root)
    refused = None
    seen = {}  # path: binary, each file looked at once
    for name, argv in chain:
        hits = {}
        stopped = []
        count = [0]

        # rg has applied the hidden rule and the one glob set it was given.
        trusted = name.startswith("rg") and (user_globs is None or type_globs is None)

        def sink(p, n, text):
            if name == "grep" and is_dir:
                # GNU grep ran inside root (see _grep_argv): join root back on.
                p = p[2:] if p.startswith("./") else p
                p = p if root == "." else os.path.join(root, p)
            elif is_dir and root == "." and p.startswith("./"):
                p = p[2:]
            if not trusted:
                base = os.path.basename(p)
                if is_dir and not hidden:
                    rel = p[len(root) + 1:] if p.startswith(root + "/") else p
                    if _is_hidden(rel):
                        return False
                if not (_fit(base, user_globs) and _fit(base, type_globs)):
                    return False
            hits.setdefault(p, {})[n] = text
            count[0] += 1
            if count[0] >= GREP_COLLECT:
                stopped.append(True)
                return True
            return False

        more = 0
        try:
            if argv is None:
                if regex is None:
                    raise _Refused(py_error)
                _python(regex, root, hidden, pre, multiline, files_only, max_count, sink)
            elif trusted and not files_only and not context and limit is not None:
                # rg's whole answer at once: only the files whose lines are
                # shown are parsed; the rest are counted.
                hits, more, cut = _bulk_hits(_output(argv), root if is_dir else None, limit, max_count, seen)
                if cut:
                    stopped.append(True)
            else:
                _run(argv, root if name == "grep" and is_dir else None, files_only, sink)
            break
        except _Refused as e:
            refused = refused or e
    else:
        raise EditError("grep: bad pattern %r: %s" % (pattern, refused))
    return _grep_result(hits, bool(stopped), files_only, context, max_count, limit, more, seen)


def _flags(ignore_case, files_only, max_count):
    """The flags ripgrep and GNU grep spell alike."""
    out = []
    if ignore_case:
        out.append("-i")
    if files_only:
        out.append("-l")
    if max_count:
        out += ["-m", str(max_count)]
    return out


def _grep_argv(pattern, root, hidden, globs, ignore_case, files_only, max_count):
    """GNU grep's command line.  It runs inside root with no file named, so
    that --exclude-dir=.* does not exclude root itself (".", or a hidden
    folder the caller named)."""
    argv = [_gnu_grep(), "-r", "-n", "-H", "-a", "-Z", "-s", "-D", "skip", "-P"]
    argv += _flags(ignore_case, files_only, max_count)
    if not hidden:
        argv += ["--exclude=.*", "--exclude-dir=.*"]
    argv += ["--include=" + g for g in (globs or [])]
    # (*UCP): \w, \d, \s and \b know Unicode, as in Python and ripgrep.
    argv += ["-e", "(*UCP)" + pattern]
    if not os.path.isdir(root):
        argv += ["--", root]
    return argv


def _rg_argv(pattern, root, hidden, globs, multiline, ignore_case, files_only, max_count, pcre):
    argv = ["rg", "--no-config", "--no-ignore", "--no-messages", "-a", "-n", "-H", "-0",
            "--no-heading", "--color", "never"]
    if pcre:
        argv.append("-P")
    if multiline:
        argv.append("-U")
    if hidden:
        argv.append("--hidden")
    # -m counts lines; a multiline match may span several.
    argv += _flags(ignore_case, files_only, None if multiline else max_count)
    for g in globs or []:
        argv += ["-g", g]
    return argv + ["-e", pattern, "--", root]


_PCRE2 = None


def _rg_pcre2():
    global _PCRE2
    if _PCRE2 is None:
        try:
            with held():  # as _gnu_grep's
                r = subprocess.run(["rg", "--pcre2-version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            _PCRE2 = r.returncode == 0
        except OSError:
            _PCRE2 = False
    return _PCRE2


def _hit_text(text):
    """A matching line as shown: a search program's raw bytes decoded, no
    line end."""
    if isinstance(text, bytes):
        text = text.rstrip(b"\n").decode("utf-8", "replace")
    return text.rstrip("\r")


def _refusal(p, err):
    """Wait for search program p; _Refused with its last word on stderr
    (the file err) when it refused the pattern (status 2)."""
    if p.wait() == 2:
        err.seek(0)
        why = err.read().decode("utf-8", "replace").strip()
        if why:
            raise _Refused(why.splitlines()[-1])


def _end(p):
    """End search program p, if it was started: killed, its pipe closed,
    reaped, whatever KeyboardInterrupt comes meanwhile (held)."""
    if p is None:
        return
    with held():
        if p.poll() is None:
            p.kill()
        p.stdout.close()
        reap(p, 2.0)


def _read_all(f):
    return f.read()


def _output(argv):
    """A search program's whole stdout; _Refused when it refused the
    pattern."""
    with tempfile.TemporaryFile() as err:
        p = None
        try:
            with held():  # as in _run
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=_env())
            data = _read_all(p.stdout)  # not in _output's (guarded) frame: a SIGINT stops it
        except BaseException:
            _end(p)
            raise
        p.stdout.close()
        _refusal(p, err)
    return data


def _bulk_hits(data, root, limit, max_count, seen):
    """From "path\\0line:text" lines: hits for the first files, in path
    order, whose lines fill the limit, how many lines the other files
    hold, and whether GREP_COLLECT cut the search short. Lines sort by
    path (\\0 ends it) in C; a file's block is found by bisection."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    cut = len(lines) > GREP_COLLECT
    if cut:
        del lines[GREP_COLLECT:]
    lines.sort()
    hits, shown, more, i, n = {}, 0, 0, 0, len(lines)
    while i < n:
        if shown > limit and not max_count:
            more += n - i  # every line left is one more
            break
        end = lines[i].find(b"\0")
        if end < 0:
            i += 1
            continue
        name = lines[i][:end]
        j = bisect.bisect_left(lines, name + b"\x01", i)
        k = j - i if not max_count else min(j - i, max_count)
        if shown > limit:
            more += k
        else:
            path = os.fsdecode(name)
            if root == "." and path.startswith("./"):
                path = path[2:]
            block = {}
            for line in lines[i:j]:
                num, _, text = line[end + 1:].partition(b":")
                try:
                    block[int(num)] = text
                except ValueError:
                    continue
            hits[path] = block
            if not _binary(path, seen):
                shown += k
        i = j
    return hits, more, cut


def _binary(path, seen):
    """_is_binary, remembered in seen."""
    b = seen.get(path)
    if b is None:
        b = seen[path] = _is_binary(path)
    return b


def _grep_result(hits, stopped, files_only, context, max_count, limit, more=0, seen=None):
    seen = {} if seen is None else seen
    out = []
    total = None  # lines past the limit are counted, not formatted
    if files_only:
        out = [p for p in sorted(hits) if not _binary(p, seen)]
    elif not context:
        # Files are looked at for a NUL (binary: left out) only as far as
        # lines are shown; past the limit, lines are counted, every file's.
        # A search with a hundred thousand hits would otherwise open every
        # file that has one.
        total = 0
        for p in sorted(hits):
            nums = sorted(hits[p])
            if max_count:
                nums = nums[:max_count]
            room = len(nums) if limit is None else max(0, limit + 1 - len(out))
            if room and _binary(p, seen):
                continue
            total += len(nums)
            out.extend("%s:%d:%s" % (p, n, _clip(_hit_text(hits[p][n]))) for n in nums[:room])
        total += more  # lines of files past the limit, counted only
    else:
        paths = sorted(p for p in hits if not _binary(p, seen))
        for p in paths:
            nums = sorted(hits[p])
            if max_count:
                nums = nums[:max_count]
            try:
                with open(p, "rb") as f:
                    lines = f.read().decode("utf-8", "replace").split("\n")
            except OSError:
                continue
            if lines and lines[-1] == "":
                lines.pop()
            want = set(nums)
            shown = sorted({k for n in nums for k in range(max(1, n - context), min(len(lines), n + context) + 1)})
            prev = None
            for k in shown:
                if out and (prev is None or k != prev + 1):
                    out.append("--")
                sep = ":" if k in want else "-"
                out.append("%s%s%d%s%s" % (p, sep, k, sep, _clip(lines[k - 1].rstrip("\r"))))
                prev = k
    if total is None:
        total = len(out)
    if limit is not None and total > limit:
        out = out[:limit]
        out.append("... (%d more lines; narrow the search with glob, type, max_count or a longer pattern)"
                   % (total - limit))
    if stopped:
        out.append("... (stopped after %d matching lines; the results are not complete)" % GREP_COLLECT)
    return Lines(out)


# A KeyboardInterrupt is not raised in these functions' own code (it comes
# at a held() section's end, or in the code they call, or once they
# return, as the worker sends it again): the fds and the search program
# are always let go (a write's temporary file is atomic.replace's).
guard(_run, _output, _end, _is_binary)
