"""replhub toolkit: Claude Code's auto memory for the project.

Claude Code keeps notes for a project in ~/.claude/projects/<project>/memory/:
one markdown file per entry and MEMORY.md, an index with one line per entry,
loaded into every Claude Code session.  `memory` reads and maintains that
folder: memory() lists, memory.read/write/edit/delete change one entry and
keep its index line in step.

This file owns the same logic as the Go package memory (memory/dir.go and
memory/memory.go, whose doc comment cites Claude Code's documentation); the
two must agree on the folder, the names and the index line, and the Go tests
run one against the other.  In short:

- the folder is $REPLHUB_MEMORY_DIR when set, else
  <$CLAUDE_CONFIG_DIR or ~/.claude>/projects/<slug>/memory, where slug is
  $CLAUDE_CODE_PROJECT_DIR_NAME or the canonical git root of the cwd (a linked
  worktree counts as its main worktree; outside a repository, the cwd) with
  every character but an ASCII letter or digit turned into '-';
- a name is a bare file name of letters, digits, '.', '_' and '-', ".md"
  added when missing;
- write adds "- [name](name.md) — hook" to MEMORY.md, or updates the hook of
  the entry's line, keeping its title.

Standard library only, Python 3.6+.  Files are replaced atomically (a
temporary file, then os.replace).
"""

import collections
import json
import os
import re
import stat

__all__ = ["memory", "Memory", "HELP"]

INDEX = "MEMORY.md"
MAX_NAME = 200
MAX_HOOK = 300
MAX_SLUG = 200
# The largest entry, or index, read or written, in bytes: an entry is read
# into an agent's context whole.
MAX_ENTRY = 1 << 20

HELP = {
    "memory": "memory(): Claude Code's auto memory for the project; .read(name) "
              ".write(name, text, index='hook') .edit(name, old, new) .delete(name)",
}

Entry = collections.namedtuple("Entry", "name title hook indexed missing")

_NAME_CHARS = re.compile(r"[A-Za-z0-9._-]*\Z")
_INDEX_LINE = re.compile(
    "^[ \t]*[-*+][ \t]+\\[([^\\]]*)\\]\\(([^) \t]+)\\)[ \t]*"
    "(?:(?:\u2014|\u2013|-|:)[ \t]*)?(.*)$")


from replhub_toolkit import atomic, guard, held  # noqa: E402
from replhub_toolkit.display import Text  # noqa: E402  (a str shown as itself)


class Listing(list):
    """The entries of a memory folder; .folder says which."""

    def __init__(self, folder, entries):
        list.__init__(self, entries)
        self.folder = folder

    def __replhub_show__(self):
        return format_list(self.folder, self)

    def __repr__(self):
        return self.__replhub_show__().rstrip("\n")


def _q(s):
    return json.dumps(s, ensure_ascii=False)


def _err(msg):
    return ValueError("memory: " + msg)


# --- the folder ---------------------------------------------------------

def slug(path):
    """Spell an absolute path as Claude Code names its project folders."""
    out = []
    for ch in path:
        if ch < "\x80" and ch.isalnum():
            out.append(ch)
        elif ord(ch) > 0xFFFF:
            out.append("--")  # two UTF-16 code units, as JavaScript counts
        else:
            out.append("-")
    return "".join(out)


def _read_bytes(path, limit):
    """A regular file's bytes, at most limit of them: a FIFO in its place
    would block the read for good, /dev/zero never end.  The errors say
    what the Go package's do (internal/atomicfile)."""
    name = os.path.basename(path)
    # A KeyboardInterrupt between the open and the file object that closes
    # the fd would leave the fd open for good: it waits (held).
    f = None
    try:
        with held():
            f = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb")
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            if os.path.samestat(st, os.stat(os.devnull)):
                return b""  # where a user points a file to empty it
            raise OSError("memory: %s: not a regular file" % name)
        if st.st_size > limit:
            raise OSError("memory: %s: %d bytes, more than %d" % (name, st.st_size, limit))
        b = f.read(limit + 1)
    finally:
        if f is not None:
            f.close()
    if len(b) > limit:
        raise OSError("memory: %s: more than %d bytes" % (name, limit))
    return b


def _first_line(path):
    try:
        b = _read_bytes(path, 64 << 10)
    except OSError:
        return ""
    return os.fsdecode(b.split(b"\n", 1)[0]).strip()


def _main_worktree(wt, git_file):
    gitdir = _first_line(git_file)
    if not gitdir.startswith("gitdir:"):
        return ""
    gitdir = gitdir[len("gitdir:"):].strip()
    gitdir = os.path.join(wt, gitdir)
    common = _first_line(os.path.join(gitdir, "commondir"))
    if not common:
        return ""
    common = os.path.realpath(os.path.normpath(os.path.join(gitdir, common)))
    if os.path.basename(common) != ".git":
        return ""
    return os.path.dirname(common)


def project_root(path):
    """The canonical git root of path, or path outside a repository."""
    d = path
    while True:
        g = os.path.join(d, ".git")
        if os.path.isdir(g):
            return d
        if os.path.isfile(g):
            return _main_worktree(d, g) or d
        parent = os.path.dirname(d)
        if parent == d:
            return path
        d = parent


def _abs_dir(cwd):
    cwd = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    real = os.path.realpath(cwd)
    if not os.path.isdir(real):
        what = "not a directory" if os.path.exists(real) else "no such file or directory"
        raise _err("cwd %s: %s" % (cwd, what))
    return real


def folder(cwd=None):
    """The memory folder of the project that cwd (default: the process's) is in."""
    cwd = _abs_dir(cwd)
    d = os.environ.get("REPLHUB_MEMORY_DIR")
    if d:
        return os.path.normpath(os.path.join(cwd, d))
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".claude")
    projects = os.path.join(base, "projects")
    n = os.environ.get("CLAUDE_CODE_PROJECT_DIR_NAME")
    if n:
        if any(c in n for c in "/\\\x00") or n in (".", ".."):
            raise _err("CLAUDE_CODE_PROJECT_DIR_NAME %s is not a folder name" % _q(n))
        return os.path.join(projects, n, "memory")
    s = slug(project_root(cwd))
    if len(s) > MAX_SLUG:
        prefix = s[:MAX_SLUG] + "-"
        try:
            names = os.listdir(projects)
        except OSError:
            names = []
        found = [x for x in names if x.startswith(prefix)]
        if len(found) != 1:
            raise _err(
                "the project path is too long for a folder name of its own (%d characters) "
                "and %d folders in %s match its first %d; set REPLHUB_MEMORY_DIR to the "
                "memory folder" % (len(s), len(found), projects, MAX_SLUG))
        s = found[0]
    return os.path.join(projects, s, "memory")


# --- names and the index ------------------------------------------------

def clean_name(name):
    """Check an entry name; return its file name (".md" added when missing)."""
    if not isinstance(name, str):
        raise _err("the name must be a str, not %s" % type(name).__name__)
    if name == "":
        raise _err("empty name; give a file name like notes.md")
    if "\x00" in name:
        raise _err("the name contains a NUL byte")
    if "/" in name or "\\" in name:
        raise _err("%s is a path; give a bare file name like notes.md" % _q(name))
    if name.startswith("."):
        raise _err("%s starts with a dot; give a file name like notes.md" % _q(name))
    if not _NAME_CHARS.match(name):
        raise _err("%s has a character other than letters, digits, '.', '_' and '-'" % _q(name))
    if not name.endswith(".md"):
        name += ".md"
    if ".." in name:
        raise _err("%s contains '..'" % _q(name))
    if len(name) > MAX_NAME:
        raise _err("the name is %d characters long; at most %d" % (len(name), MAX_NAME))
    if name.lower() == INDEX.lower():
        raise _err("MEMORY.md is the index, kept by write and delete; choose another name")
    return name


def _check_hook(hook):
    if not isinstance(hook, str):
        raise _err("the index hook must be a str, not %s" % type(hook).__name__)
    if "\r" in hook or "\n" in hook:
        raise _err("the index hook must be one line")
    if "\x00" in hook:
        raise _err("the index hook contains a NUL byte")
    if len(hook) > MAX_HOOK:
        raise _err("the index hook is %d characters long; keep it to one short line (at most %d)"
                   % (len(hook), MAX_HOOK))


def index_line(title, name, hook):
    if not hook:
        return "- [%s](%s)" % (title, name)
    return "- [%s](%s) \u2014 %s" % (title, name, hook)


def parse_line(line):
    """(title, name, hook) of an index line, or None."""
    m = _INDEX_LINE.match(line[:-1] if line.endswith("\r") else line)
    if not m:
        return None
    target = m.group(2)
    if target.startswith("./"):
        target = target[2:]
    return m.group(1), target, m.group(3).strip(" \t")


def format_list(where, entries):
    n = len(entries)
    count = "no entries" if n == 0 else "1 entry" if n == 1 else "%d entries" % n
    lines = ["memory: %s (%s)" % (where, count)]
    for e in entries:
        if not e.indexed:
            lines.append("%s  (no line in MEMORY.md)" % e.name)
        elif e.missing:
            lines.append("%s  %s  (file missing)" % (e.name, e.hook))
        else:
            lines.append("%s  %s" % (e.name, e.hook))
    return "\n".join(lines) + "\n"


def _read_text(path):
    return _read_bytes(path, MAX_ENTRY).decode("utf-8", "surrogateescape")


def _encode(text):
    data = text.encode("utf-8", "surrogateescape")
    if len(data) > MAX_ENTRY:
        raise _err("the text is %d bytes; an entry holds at most %d (1 MiB): split it, "
                   "or keep the bulk in a file and its path here" % (len(data), MAX_ENTRY))
    return data


def _write_atomic(path, data):
    """data over path, whole or not at all, under Ctrl-C too (atomic); a
    new entry only its owner reads."""
    try:
        keep = os.stat(path)
    except FileNotFoundError:
        keep = None
    atomic.replace(path, data, mode=0o600, keep=keep)


# --- the store ----------------------------------------------------------

class Memory(object):
    """Claude Code's auto memory of the project that cwd is in (default: the
    session's cwd at each call).  See HELP["memory"]."""

    def __init__(self, cwd=None):
        self._cwd = cwd

    def folder(self):
        """Where the memory folder is; it need not exist yet."""
        return Text(folder(self._cwd))

    def __call__(self):
        d = folder(self._cwd)
        files = self._files(d)
        seen = set()
        out = []
        for line in self._index_lines(d):
            p = parse_line(line)
            if p is None or p[1] in seen:
                continue
            title, name, hook = p
            try:
                if clean_name(name) != name:
                    continue
            except ValueError:
                continue
            seen.add(name)
            out.append(Entry(name, title, hook, True, name not in files))
        for name in sorted(files - seen):
            out.append(Entry(name, "", "", False, False))
        return Listing(d, out)

    def read(self, name):
        n = clean_name(name)
        d = folder(self._cwd)
        try:
            return Text(_read_text(os.path.join(d, n)))
        except FileNotFoundError:
            raise FileNotFoundError("memory: no entry %s in %s" % (n, d))

    def write(self, name, text, index=None):
        n = clean_name(name)
        if not isinstance(text, str):
            raise _err("the text must be a str, not %s" % type(text).__name__)
        hook = "" if index is None else index
        _check_hook(hook)
        d = folder(self._cwd)
        os.makedirs(d, 0o700, exist_ok=True)
        data = _encode(text)
        _write_atomic(os.path.join(d, n), data)
        what = "kept"
        out = []
        found = False
        for line in self._index_lines(d):
            p = parse_line(line)
            if p is None or p[1] != n:
                out.append(line)
                continue
            if found:
                what = "updated"  # a duplicate line goes
                continue
            found = True
            if hook:
                new = index_line(p[0], n, hook) + ("\r" if line.endswith("\r") else "")
                if new != line:
                    what = "updated"
                line = new
            out.append(line)
        if not found:
            out.append(index_line(n[:-3], n, hook))
            what = "added"
        if what != "kept":
            self._write_index(d, out)
        return Text("wrote %s (%d bytes); MEMORY.md line %s" % (n, len(data), what))

    def edit(self, name, old, new):
        n = clean_name(name)
        if not isinstance(old, str) or not isinstance(new, str):
            raise _err("old and new must be str")
        if old == "":
            raise _err("old is empty; give the exact text to replace")
        d = folder(self._cwd)
        p = os.path.join(d, n)
        try:
            text = _read_text(p)
        except FileNotFoundError:
            raise FileNotFoundError("memory: no entry %s in %s" % (n, d))
        c = text.count(old)
        if c == 0:
            raise _err("old text not found in %s; read it and copy the text exactly" % n)
        if c > 1:
            raise _err("old text occurs %d times in %s; include more of its surroundings "
                       "to make it unique" % (c, n))
        data = _encode(text.replace(old, new, 1))
        _write_atomic(p, data)
        return Text("edited %s (%d bytes)" % (n, len(data)))

    def delete(self, name):
        n = clean_name(name)
        d = folder(self._cwd)
        lines = self._index_lines(d)
        out = [l for l in lines if (parse_line(l) or (None, None))[1] != n]
        had_line = len(out) != len(lines)
        try:
            os.unlink(os.path.join(d, n))
            had_file = True
        except FileNotFoundError:
            had_file = False
        if had_line:
            self._write_index(d, out)
        if had_file and had_line:
            return Text("deleted %s and its MEMORY.md line" % n)
        if had_file:
            return Text("deleted %s (it had no MEMORY.md line)" % n)
        if had_line:
            return Text("deleted the MEMORY.md line of %s (its file was already gone)" % n)
        raise FileNotFoundError("memory: no entry %s in %s" % (n, d))

    @staticmethod
    def _index_lines(d):
        try:
            text = _read_text(os.path.join(d, INDEX))
        except FileNotFoundError:
            return []
        if text == "":
            return []
        if text.endswith("\n"):
            text = text[:-1]
        return text.split("\n")

    @staticmethod
    def _write_index(d, lines):
        text = "\n".join(lines) + "\n" if lines else ""
        _write_atomic(os.path.join(d, INDEX), _encode(text))

    @staticmethod
    def _files(d):
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return set()
        out = set()
        for n in names:
            try:
                if clean_name(n) != n:
                    continue
            except ValueError:
                continue
            if os.path.isfile(os.path.join(d, n)):
                out.add(n)
        return out

    def __replhub_show__(self):
        return HELP["memory"]

    def __repr__(self):
        return "<memory: Claude Code's auto memory of the project; help: memory.__doc__ or HELP['memory']>"


memory = Memory()


