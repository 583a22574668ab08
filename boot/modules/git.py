"""git: repositories as Python objects.

    git.status()                  the work tree, as `git status --short` says it
    git.log(10)                   commits, newest first (also log("main", 5), log(path="x"))
    git.show("HEAD~1")            a commit with its changes and their diff
    git.cat("HEAD:README.md")     a blob (str when it is UTF-8, else bytes), tree, commit or tag
    git.blame("main.go"); git.branches(); git.refs(); git.diff(); git.config("user.name")
    git.commit("msg", all=True); git.add("x.py")
    git("log -3 --stat")          anything else: argv split with shlex, no shell
    r = git.repo("/src/other")    the same methods on another repository

The repository is found from the current directory upwards at each call.
Reads (refs, objects, rev parsing, log, show, cat, branches, the diff of two
commits) come straight from .git: loose objects, packfiles with their .idx v2
and deltas, packed-refs, linked worktrees, alternates. The work tree, the
index and every write go through the git binary (status, blame, config, the
work tree's diff, commit, add, run), as do all reads of SHA-256 and reftable
repositories and rev syntax this module does not parse (`@{u}`, `:/text`...).

Where the output differs from git's: show() and diff() of two commits do no
rename detection (a rename is a D and an A, as `git diff-tree` prints it);
their hunks come from difflib, which can place a change differently from
git's Myers diff where it fits in more than one place; a merge's show()
prints no combined diff; paths are always quoted as core.quotePath's
default quotes them.

A damaged repository raises CorruptObject naming the object, never hangs
and never allocates more than the object's headers allow within the file.
"""

import binascii
import heapq
import os
import re
import struct
import sys
import types
import zlib
from collections import namedtuple

if __name__.startswith("replhub."):
    from replhub import _programs
else:  # imported from its folder, as its tests do
    import _programs

__all__ = ["repo", "run", "status", "log", "show", "cat", "blame", "branches",
           "refs", "diff", "commit", "add", "config", "rev_parse",
           "GitError", "BadRevision", "CorruptObject", "NotARepository"]


class GitError(Exception):
    """A git command failed, or a repository cannot be read."""


class NotARepository(GitError):
    """No repository at or above the given folder."""


class BadRevision(GitError, LookupError):
    """A revision or path names nothing, or more than one thing."""


class CorruptObject(GitError):
    """An object cannot be read as its headers say; .id names it."""

    def __init__(self, oid, why):
        GitError.__init__(self, "object %s: %s" % (oid, why))
        self.id = oid


_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_MAX_CHAIN = 5000      # git caps pack.depth at 4095
_MAX_HOPS = 16         # REF_DELTA bases found in another pack or file
_CACHE_BYTES = 32 << 20   # delta bases kept per repository
_COMMIT_BYTES = 16 << 20  # parsed commits kept per repository, by the size of their objects
_ZLIB_RATIO = 1032     # deflate's best ratio: no stream inflates further


# ---------------------------------------------------------------- inflating

def _inflate(buf, start, end, size, what):
    """The `size` bytes of the zlib stream at buf[start:end]: exactly that
    many, or CorruptObject. Reads in steps, so the rest of the file is never
    copied, and asks zlib for no more than size+1 bytes."""
    if size > (end - start) * _ZLIB_RATIO + 64:
        raise CorruptObject(what, "its header says %d bytes, more than the %d bytes left can hold"
                            % (size, end - start))
    d = zlib.decompressobj()
    step = size + (size >> 6) + 64
    try:  # most objects: one step holds the whole stream
        first = d.decompress(buf[start:min(end, start + step)], size + 1)
    except zlib.error as e:
        raise CorruptObject(what, "bad zlib data (%s)" % e)
    if d.eof and len(first) == size:
        return first
    d = zlib.decompressobj()
    out, have, pos, pending = [], 0, start, b""
    try:
        while not d.eof:
            if not pending:
                if pos >= end:
                    raise CorruptObject(what, "truncated: the data ends inside the object")
                nxt = min(end, pos + step)
                pending, pos, step = buf[pos:nxt], nxt, 1 << 16
            before = len(pending)
            chunk = d.decompress(pending, size + 1 - have)
            pending = d.unconsumed_tail
            if chunk:
                out.append(chunk)
                have += len(chunk)
                if have > size:
                    raise CorruptObject(what, "inflates to more than the %d bytes its header says" % size)
            elif len(pending) == before:
                raise CorruptObject(what, "zlib makes no progress")
    except zlib.error as e:
        raise CorruptObject(what, "bad zlib data (%s)" % e)
    if have != size:
        raise CorruptObject(what, "inflates to %d bytes, its header says %d" % (have, size))
    return out[0] if len(out) == 1 else b"".join(out)


def _read_loose(path, oid):
    with open(path, "rb") as f:
        raw = f.read()
    d = zlib.decompressobj()
    try:
        head = d.decompress(raw, 64)
    except zlib.error as e:
        raise CorruptObject(oid, "bad zlib data (%s)" % e)
    nul = head.find(b"\0")
    kind, _, size = head[:nul].partition(b" ")
    if nul < 0 or kind.decode("latin-1") not in _KINDS or not size.isdigit() or len(size) > 19:
        raise CorruptObject(oid, "not a loose object header")
    size = int(size)
    if size > len(raw) * _ZLIB_RATIO + 64:
        raise CorruptObject(oid, "its header says %d bytes, more than the file can hold (%d bytes compressed)"
                            % (size, len(raw)))
    rest = head[nul + 1:]
    if len(rest) > size:
        raise CorruptObject(oid, "inflates to more than the %d bytes its header says" % size)
    tail = d.unconsumed_tail
    return kind.decode(), rest + _inflate_more(d, tail, size - len(rest), oid)


def _inflate_more(d, tail, need, what):
    """The rest of a stream whose first bytes d has given already."""
    try:
        data = d.decompress(tail, need + 1) if tail else b""
        if len(data) > need:
            raise CorruptObject(what, "inflates to more than its header says")
        if not d.eof:
            raise CorruptObject(what, "truncated: the zlib stream does not end")
    except zlib.error as e:
        raise CorruptObject(what, "bad zlib data (%s)" % e)
    if len(data) != need:
        raise CorruptObject(what, "inflates to fewer bytes than its header says")
    return data


_KINDS = ("commit", "tree", "blob", "tag")


# ---------------------------------------------------------------- deltas

def _varint(b, i):
    n, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80 or shift > 63:
            return n, i


def _patch(base, delta, what):
    """Applies a git delta to base. Every size is checked against what is
    there before anything is copied."""
    try:
        src, i = _varint(delta, 0)
        tgt, i = _varint(delta, i)
        if src != len(base):
            raise CorruptObject(what, "its delta wants a %d-byte base, the base has %d" % (src, len(base)))
        out, n, nb = bytearray(), len(delta), len(base)
        while i < n:
            op = delta[i]
            i += 1
            if op & 0x80:
                off = size = 0
                if op & 1: off = delta[i]; i += 1
                if op & 2: off |= delta[i] << 8; i += 1
                if op & 4: off |= delta[i] << 16; i += 1
                if op & 8: off |= delta[i] << 24; i += 1
                if op & 16: size = delta[i]; i += 1
                if op & 32: size |= delta[i] << 8; i += 1
                if op & 64: size |= delta[i] << 16; i += 1
                size = size or 0x10000
                if off + size > nb or len(out) + size > tgt:
                    raise CorruptObject(what, "its delta copies past the end of its base or target")
                out += base[off:off + size]
            elif op:
                if i + op > n or len(out) + op > tgt:
                    raise CorruptObject(what, "its delta inserts past the end of its data or target")
                out += delta[i:i + op]
                i += op
            else:
                raise CorruptObject(what, "its delta has the reserved opcode 0")
    except IndexError:
        raise CorruptObject(what, "its delta is truncated")
    if len(out) != tgt:
        raise CorruptObject(what, "its delta makes %d bytes, its header says %d" % (len(out), tgt))
    return bytes(out)


# ---------------------------------------------------------------- packs

class _Pack(object):
    """One packfile and its .idx (version 2), opened lazily."""

    def __init__(self, idx_path, hashlen, odb):
        self.idx_path, self.path = idx_path, idx_path[:-4] + ".pack"
        self.h, self.odb = hashlen, odb
        self.idx = self.mm = self.broken = None
        self.cache = odb.bases

    def _open(self):
        import mmap
        with open(self.idx_path, "rb") as f:
            idx = f.read()
        h, name = self.h, os.path.basename(self.idx_path)
        if len(idx) < 8 + 1024 + 2 * h or idx[:8] != b"\377tOc\0\0\0\2":
            raise CorruptObject(name, "not a version 2 pack index")
        fan = struct.unpack_from(">256I", idx, 8)
        if any(fan[i] > fan[i + 1] for i in range(255)):
            raise CorruptObject(name, "its fanout table is not sorted")
        n = fan[255]
        self.ids, self.crcs = 8 + 1024, 8 + 1024 + n * h
        self.offs, self.big = self.crcs + 4 * n, self.crcs + 8 * n
        nbig = len(idx) - self.big - 2 * h
        if nbig < 0 or nbig % 8:
            raise CorruptObject(name, "its size does not fit its %d objects" % n)
        self.nbig, self.fan, self.n = nbig // 8, fan, n
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 12 + h:
                raise CorruptObject(os.path.basename(self.path), "truncated pack")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if mm[:4] != b"PACK" or struct.unpack_from(">I", mm, 4)[0] not in (2, 3):
            raise CorruptObject(os.path.basename(self.path), "not a pack")
        self.end = size - h
        self.idx, self.mm = idx, mm

    def usable(self):
        """Whether the pack opens; the reason it does not is kept in .broken."""
        if self.idx is None and self.broken is None:
            try:
                self._open()
            except (GitError, OSError, ValueError) as e:
                self.broken = e if isinstance(e, GitError) else CorruptObject(os.path.basename(self.path), str(e))
        return self.broken is None

    def find(self, bid):
        """The offset of the object with binary id bid, or None."""
        idx, h, b = self.idx, self.h, bid[0]
        lo, hi = (self.fan[b - 1] if b else 0), self.fan[b]
        base = self.ids
        while lo < hi:
            mid = (lo + hi) >> 1
            s = base + mid * h
            k = idx[s:s + h]
            if k < bid:
                lo = mid + 1
            elif k > bid:
                hi = mid
            else:
                return self._offset(mid, bid)
        return None

    def _offset(self, i, bid):
        off = struct.unpack_from(">I", self.idx, self.offs + 4 * i)[0]
        if off & 0x80000000:
            j = off & 0x7FFFFFFF
            if j >= self.nbig:
                raise CorruptObject(_hex(bid), "its index entry points past the 64-bit offset table")
            off = struct.unpack_from(">Q", self.idx, self.big + 8 * j)[0]
        if not 12 <= off < self.end:
            raise CorruptObject(_hex(bid), "its index entry points past the end of %s" % os.path.basename(self.path))
        return off

    def prefix(self, hexp, limit):
        """Up to limit ids (hex) in this pack that start with hexp."""
        pad = binascii.unhexlify(hexp + "0" * (len(hexp) % 2))
        lo, hi = (self.fan[pad[0] - 1] if pad[0] else 0), self.fan[pad[0]]
        idx, h, base = self.idx, self.h, self.ids
        while lo < hi:
            mid = (lo + hi) >> 1
            if idx[base + mid * h:base + mid * h + len(pad)] < pad:
                lo = mid + 1
            else:
                hi = mid
        found = []
        while lo < self.n and len(found) < limit:
            k = _hex(idx[base + lo * h:base + (lo + 1) * h])
            if not k.startswith(hexp):
                break
            found.append(k)
            lo += 1
        return found

    def _header(self, off, what):
        mm, end = self.mm, self.end
        try:
            c = mm[off]
            kind, size, shift, pos = (c >> 4) & 7, c & 15, 4, off + 1
            while c & 0x80:
                if pos >= end or shift > 63:
                    raise CorruptObject(what, "bad object header in the pack")
                c = mm[pos]
                pos += 1
                size |= (c & 0x7F) << shift
                shift += 7
            base = None
            if kind == _OFS_DELTA:
                c = mm[pos]
                pos += 1
                rel, n = c & 0x7F, 0
                while c & 0x80:
                    if pos >= end or n > 9:
                        raise CorruptObject(what, "bad delta base offset")
                    c = mm[pos]
                    pos += 1
                    n += 1
                    rel = ((rel + 1) << 7) | (c & 0x7F)
                base = off - rel
                if rel <= 0 or base < 12:
                    raise CorruptObject(what, "its delta base lies outside the pack")
            elif kind == _REF_DELTA:
                base = bytes(mm[pos:pos + self.h])
                pos += self.h
            elif kind not in _TYPES:
                raise CorruptObject(what, "unknown pack object type %d" % kind)
        except IndexError:
            raise CorruptObject(what, "truncated pack entry")
        if pos > end:
            raise CorruptObject(what, "truncated pack entry")
        return kind, size, pos, base

    def read(self, off, what, hops=0):
        """(type, bytes) of the object at off, its delta chain resolved."""
        hit = self.cache.get((self, off))
        if hit is not None:
            return _TYPES[hit[0]], hit[1]
        kind, size, pos, base = self._header(off, what)
        if kind in _TYPES:  # not a delta: most commits
            return _TYPES[kind], _inflate(self.mm, pos, self.end, size, what)
        chain, seen, cur = [], set(), off
        while True:
            hit = self.cache.get((self, cur))
            if hit is not None:
                kind, data = hit
                break
            if cur in seen or len(chain) > _MAX_CHAIN:
                raise CorruptObject(what, "its delta chain loops or is deeper than %d" % _MAX_CHAIN)
            seen.add(cur)
            kind, size, pos, base = self._header(cur, what)
            if kind in _TYPES:
                data = _inflate(self.mm, pos, self.end, size, what)
                self.cache.put((self, cur), (kind, data), len(data))  # the base of others, likely
                break
            chain.append((cur, pos, size))
            if kind == _REF_DELTA:
                nxt = self.find(base)
                if nxt is None:
                    kname, data = self.odb.read(_hex(base), hops + 1)
                    kind = _NUMS[kname]
                    break
                base = nxt
            cur = base
        for o, pos, size in reversed(chain):
            data = _patch(data, _inflate(self.mm, pos, self.end, size, what), what)
            self.cache.put((self, o), (kind, data), len(data))
        return _TYPES[kind], data


class _Cache(object):
    """A dict that forgets its oldest entries beyond a total size; an entry
    larger than an eighth of it is not kept."""

    def __init__(self, limit):
        self.limit, self.size, self.items = limit, 0, {}

    def get(self, key):
        hit = self.items.get(key)
        return hit[0] if hit is not None else None

    def put(self, key, value, size):
        if size > self.limit // 8 or key in self.items:
            return
        while self.size + size > self.limit and self.items:
            self.size -= self.items.pop(next(iter(self.items)))[1]
        self.items[key] = (value, size)
        self.size += size


_NUMS = dict((v, k) for k, v in _TYPES.items())


def _hex(b):
    return binascii.hexlify(b).decode()


# ---------------------------------------------------------------- object stores

class _ObjectDB(object):
    """The objects of a repository: its folder, its alternates, their packs."""

    def __init__(self, objdir, hashlen):
        self.h = hashlen
        self.bases = _Cache(_CACHE_BYTES)  # delta bases, by (pack, offset)
        self.dirs = _alternates(objdir)
        self.packs, self.sig = [], None

    def _scan(self):
        sig = []
        for d in self.dirs:
            try:
                sig.append(os.stat(os.path.join(d, "pack")).st_mtime_ns)
            except OSError:
                sig.append(None)
        if sig == self.sig:
            return False
        old = dict((p.idx_path, p) for p in self.packs)
        packs = []
        for d in self.dirs:
            pd = os.path.join(d, "pack")
            try:
                names = sorted(os.listdir(pd))
            except OSError:
                continue
            for n in names:
                if n.startswith("pack-") and n.endswith(".idx") and n[:-4] + ".pack" in names:
                    path = os.path.join(pd, n)
                    packs.append(old.get(path) or _Pack(path, self.h, self))
        self.packs, self.sig = packs, sig
        return True

    def read(self, oid, hops=0):
        if hops > _MAX_HOPS:
            raise CorruptObject(oid, "its delta bases refer to each other across packs")
        try:
            bid = binascii.unhexlify(oid)
        except (binascii.Error, TypeError, ValueError):
            bid = b""
        if len(bid) != self.h:
            raise BadRevision("not an object id: %r" % (oid,))
        if self.sig is None:
            self._scan()
        for _ in range(2):
            for p in self.packs:
                off = p.find(bid) if p.usable() else None
                if off is not None:
                    return p.read(off, oid, hops)
            for d in self.dirs:
                try:
                    return _read_loose(os.path.join(d, oid[:2], oid[2:]), oid)
                except (FileNotFoundError, NotADirectoryError):
                    pass
                except OSError as e:
                    raise CorruptObject(oid, "its file cannot be read (%s)" % (e.strerror or e))
            if not self._scan():  # a repack since the last look moves objects
                break
        for p in self.packs:
            if p.broken is not None:  # it may have been there
                raise CorruptObject(oid, "not found, and %s" % p.broken)
        raise BadRevision("object %s not found" % oid)

    def prefix(self, hexp, limit=2):
        self._scan()
        found = set()
        for p in self.packs:
            if p.usable():
                found.update(p.prefix(hexp, limit))
        for d in self.dirs:
            try:
                names = os.listdir(os.path.join(d, hexp[:2]))
            except OSError:
                continue
            found.update(hexp[:2] + n for n in names if n.startswith(hexp[2:]) and len(n) == 2 * self.h - 2)
        return sorted(found)


def _alternates(objdir, seen=None):
    """objdir and the object folders its info/alternates names, recursively:
    each once, 64 at most, so a loop of alternates ends."""
    seen = seen if seen is not None else []
    seen.append(objdir)
    if len(seen) > 64:
        return seen
    try:
        with open(os.path.join(objdir, "info", "alternates"), "rb") as f:
            lines = f.read(1 << 16).decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return seen
    for line in lines:
        line = line.strip()
        if line and not line.startswith(("#", '"')):
            path = os.path.normpath(os.path.join(objdir, line))
            if path not in seen and os.path.isdir(path) and len(seen) < 64:
                _alternates(path, seen)
    return seen


_POLL = 0.05  # seconds a wait in the SIGINT section lasts at most
_END_WAIT = 1.0  # seconds a cat-file has to go at EOF before it is killed


class _BatchDB(object):
    """Objects through one long-lived `git cat-file --batch`: SHA-256 and
    reftable repositories."""

    def __init__(self, repo):
        self.repo, self.proc, self.finalizer = repo, None, None
        import threading
        self.lock = threading.Lock()

    def close(self):
        self._locked(self._drop)

    def read(self, oid, hops=0):
        return self._locked(self._read, oid)

    def _locked(self, fn, *args):
        """fn(*args) with the lock taken. It is taken _POLL at a time in the
        SIGINT section and let go of in a finally clause already entered,
        and the function is guarded (below): whatever KeyboardInterrupt
        lands, the lock is let go of, and a read that waits for another
        thread's is still interrupted."""
        taken = False
        try:
            while not taken:
                with _programs.held():
                    taken = self.lock.acquire(True, _POLL)
            return fn(*args)
        finally:
            if taken:
                self.lock.release()

    def _read(self, oid):
        for attempt in (0, 1):
            p = self.proc
            if p is None or p.poll() is not None:
                with _programs.held():
                    self._drop()
                    p = self.proc = self._start()
            try:
                return _ask(p, oid)
            except (OSError, ValueError):
                self._drop()
                if attempt:
                    raise GitError("git cat-file --batch ended")
            except BadRevision:
                raise  # a whole answer: the process goes on
            except BaseException:
                # Cut short (a KeyboardInterrupt), its answer may be half
                # read: the next read would take it for its own.
                self._drop()
                raise

    def _start(self):
        import subprocess
        import weakref
        p = _programs.start(
            self.repo._argv(["cat-file", "--batch"]), stdin=subprocess.PIPE, cwd=self.repo._cwd(),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(self.repo))
        self.finalizer = weakref.finalize(self, _end, p)
        return p

    def _drop(self):
        with _programs.held():
            if self.finalizer is not None:
                self.finalizer()  # _end(self.proc), once: detached as it runs
            self.proc = self.finalizer = None

    def prefix(self, hexp, limit=2):
        return []


def _ask(p, oid):
    """oid's (kind, data) from cat-file process p."""
    p.stdin.write(oid.encode("ascii") + b"\n")
    p.stdin.flush()
    head = p.stdout.readline(200).split()
    if len(head) == 2 and head[1] == b"missing":
        raise BadRevision("object %s not found" % oid)
    if len(head) != 3 or not head[2].isdigit():
        raise GitError("git cat-file: unexpected answer %r" % b" ".join(head))
    size = int(head[2])
    data = p.stdout.read(size + 1)
    if len(data) != size + 1:
        raise GitError("git cat-file: short read")
    return head[1].decode(), data[:-1]


# A KeyboardInterrupt waits while these run their own code (not what they
# call): the lock is let go of, a half-read process dropped.
_programs.guard(_BatchDB._locked, _BatchDB._read, _BatchDB._drop)


def _end(p):
    """Ends a cat-file process: EOF on its stdin is its signal to go, and
    its stdout closed stops a write of an answer; one still there after
    _END_WAIT is killed. A Ctrl-C waits that long at most, for this runs
    in the SIGINT section (_drop)."""
    if p is None:
        return
    for f in (p.stdin, p.stdout):
        try:
            f.close()
        except OSError:
            pass
    try:
        p.wait(_END_WAIT)
    except Exception:
        p.kill()
        _programs.reap(p, _END_WAIT)


# ---------------------------------------------------------------- refs

_BAD_REF_CHARS = set(" ~^:?*[\\\x7f") | set(chr(c) for c in range(32))


def _check_refname(name):
    """Whether name is a ref name git would accept (so it is a safe path)."""
    if not name or name.startswith("/") or name.endswith(("/", ".", ".lock")) or ".." in name or "@{" in name:
        return False
    if any(c in _BAD_REF_CHARS for c in name) or name == "@":
        return False
    return all(part and not part.startswith(".") for part in name.split("/"))


def _per_worktree(name):
    return "/" not in name or name.startswith(("refs/bisect/", "refs/worktree/", "refs/rewritten/"))


class _Refs(object):
    """Loose refs, packed-refs and symbolic refs of a files-backend repository."""

    def __init__(self, gitdir, common, hashlen):
        self.gitdir, self.common, self.hexlen = gitdir, common, 2 * hashlen
        self.packed_sig, self.packed = None, {}

    def _packed(self):
        path = os.path.join(self.common, "packed-refs")
        try:
            st = os.stat(path)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return {}
        if sig != self.packed_sig:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
            packed = {}
            for line in text.splitlines():
                if line.startswith(("#", "^")):
                    continue
                oid, _, name = line.partition(" ")
                if len(oid) == self.hexlen and _is_hex(oid) and _check_refname(name):
                    packed[name] = oid.lower()
            self.packed, self.packed_sig = packed, sig
        return self.packed

    def _loose(self, name):
        """(id, None) or (None, target) or (None, None)."""
        if name != "HEAD" and not _check_refname(name):
            return None, None
        base = self.gitdir if _per_worktree(name) else self.common
        try:
            with open(os.path.join(base, name), "rb") as f:
                text = f.read(4096).decode("utf-8", "surrogateescape")
        except (OSError, ValueError):
            return None, None
        if text.startswith("ref:"):
            target = text[4:].strip()
            return (None, target) if _check_refname(target) else (None, None)
        oid = text[:self.hexlen]
        return (oid.lower(), None) if _is_hex(oid) and len(oid) == self.hexlen else (None, None)

    def read(self, name):
        """(id, None), (None, symbolic target) or (None, None)."""
        oid, target = self._loose(name)
        if oid or target:
            return oid, target
        return self._packed().get(name), None

    def resolve(self, name):
        for _ in range(6):
            oid, target = self.read(name)
            if target is None:
                return oid
            name = target
        return None

    def symref(self, name):
        return self.read(name)[1]

    def listing(self, prefix="refs/"):
        found = dict(self._packed())
        for base, shared in ((self.common, True), (self.gitdir, False)):
            top = os.path.join(base, "refs")
            if not shared and base == self.common:
                continue
            linked = self.gitdir != self.common
            for dirpath, dirs, files in os.walk(top):
                dirs.sort()
                rel = os.path.relpath(dirpath, base).replace(os.sep, "/")
                for f in files:
                    name = rel + "/" + f
                    if linked and _per_worktree(name) == shared or not _check_refname(name):
                        continue
                    oid, target = self._loose(name)
                    if target:
                        oid = self.resolve(target)
                    if oid:
                        found[name] = oid
                    else:
                        found.pop(name, None)
        return sorted((n, o) for n, o in found.items() if n.startswith(prefix))


class _BinaryRefs(object):
    """Refs through the git binary: reftable repositories."""

    def __init__(self, repo):
        self.repo = repo

    def resolve(self, name):
        out = self.repo._git(["rev-parse", "-q", "--verify", name], check=False)
        return out.decode().strip() or None

    def symref(self, name):
        return self.repo._git(["symbolic-ref", "-q", name], check=False).decode().strip() or None

    def listing(self, prefix="refs/"):
        out = self.repo._git(["for-each-ref", "--format=%(objectname) %(refname)", prefix])
        rows = (line.partition(" ") for line in out.decode("utf-8", "surrogateescape").splitlines())
        return sorted((n, o) for o, _, n in rows)


def _is_hex(s):
    return _HEX.match(s) is not None


# ---------------------------------------------------------------- values

_HEX = re.compile(r"[0-9a-fA-F]+\Z")
_DIGITS = re.compile(r"[0-9]{1,19}\Z")
_PARENT = re.compile(br"^parent ([0-9a-f]{40,64})$", re.M)
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class Output(str):
    """Text from git that shows as itself at the prompt."""

    def __repr__(self):
        return str.__str__(self) if self else "(no output)"


def _person(raw):
    """(name <email>, unix time, tz offset in minutes) of an author line;
    a malformed line gives what can be read and time 0, as git does."""
    gt = raw.rfind(b">")
    rest = raw[gt + 1:].split()
    t = int(rest[0]) if rest and rest[0].isdigit() and len(rest[0]) < 20 else 0  # bytes: ASCII digits only
    tz = 0
    if len(rest) > 1 and len(rest[1]) == 5 and rest[1][:1] in (b"+", b"-") and rest[1][1:].isdigit():
        tz = (int(rest[1][1:3]) * 60 + int(rest[1][3:])) * (-1 if rest[1][:1] == b"-" else 1)
    return raw[:gt + 1].decode("utf-8", "replace"), t, tz


_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}


def _quote(path):
    """A path as git prints it by default (core.quotePath): in double quotes
    with C escapes when it holds a control character, a quote, a backslash or
    anything beyond ASCII; as it is otherwise."""
    raw = path.encode("utf-8", "surrogateescape")
    if not any(b < 32 or b > 126 or b in (34, 92) for b in raw):
        return path
    return '"%s"' % "".join(_ESCAPES.get(b) or (chr(b) if 32 <= b < 127 else "\\%03o" % b) for b in raw)


def _gitdate(t, tz):
    """A time as git log prints it: Thu Dec 3 09:44:08 2026 +0000."""
    import time
    try:
        g = time.gmtime(t + tz * 60)
    except (OverflowError, ValueError, OSError):
        g = time.gmtime(0)
    return "%s %s %d %02d:%02d:%02d %d %s%02d%02d" % (
        _DAYS[g.tm_wday], _MONTHS[g.tm_mon - 1], g.tm_mday, g.tm_hour, g.tm_min, g.tm_sec,
        g.tm_year, "-" if tz < 0 else "+", abs(tz) // 60, abs(tz) % 60)


def _datetime(t, tz):
    import datetime
    zone = datetime.timezone(datetime.timedelta(minutes=tz))
    try:
        return datetime.datetime.fromtimestamp(t, zone)
    except (OverflowError, ValueError, OSError):
        return datetime.datetime.fromtimestamp(0, zone)


class Commit(object):
    """A commit: .id, .tree, .parents (ids), .author, .date (author date),
    .committer, .committer_date, .message, .subject; .raw is the object.
    Only what a walk needs (parents, committer time) is read up front."""

    _LAZY = frozenset(("tree", "author", "author_time", "author_tz", "committer", "tz", "message"))

    def __init__(self, oid, raw):
        self.id, self.raw = oid, raw
        end = raw.find(b"\n\n")
        head = raw[:end] if end >= 0 else raw
        self.parents = tuple(p.decode() for p in _PARENT.findall(head))
        at = head.rfind(b"\ncommitter ")
        line = head[at + 1:head.find(b"\n", at + 1) if head.find(b"\n", at + 1) > 0 else len(head)] if at >= 0 else b""
        rest = line[line.rfind(b">") + 1:].split()
        self.time = int(rest[0]) if rest and rest[0].isdigit() and len(rest[0]) < 20 else 0

    def __getattr__(self, name):
        if name not in Commit._LAZY:
            raise AttributeError(name)
        self._parse()
        return self.__dict__[name]

    def _parse(self):
        head, _, body = self.raw.partition(b"\n\n")
        tree, enc, author, committer = "", "utf-8", b"", b""
        for line in head.split(b"\n"):
            key, _, val = line.partition(b" ")
            if key == b"tree":
                tree = val.decode("ascii", "replace")
            elif key == b"author":
                author = val
            elif key == b"committer":
                committer = val
            elif key == b"encoding":
                enc = val.decode("ascii", "replace")
        self.tree = tree
        self.author, self.author_time, self.author_tz = _person(author)
        self.committer, _, self.tz = _person(committer)
        try:
            self.message = body.decode(enc, "replace")
        except LookupError:
            self.message = body.decode("utf-8", "replace")

    @property
    def subject(self):
        return self.message.split("\n", 1)[0]

    @property
    def date(self):
        return _datetime(self.author_time, self.author_tz)

    @property
    def committer_date(self):
        return _datetime(self.time, self.tz)

    def header(self):
        """The commit as `git log` prints it (medium format)."""
        lines = ["commit " + self.id]
        if len(self.parents) > 1:
            lines.append("Merge: " + " ".join(p[:7] for p in self.parents))
        lines += ["Author: " + self.author, "Date:   " + _gitdate(self.author_time, self.author_tz), ""]
        lines += ["    " + l for l in self.message.rstrip("\n").split("\n")]
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return self.header()

    def __eq__(self, other):
        return isinstance(other, Commit) and other.id == self.id

    def __hash__(self):
        return hash(self.id)


class Log(list):
    """Commits, newest first; shown as `git log --oneline`."""

    def __repr__(self):
        return "\n".join("%s %s" % (c.id[:7], c.subject) for c in self) or "(no commits)"


class TreeEntry(namedtuple("TreeEntry", "mode name id")):
    """A tree entry; .type is blob, tree or commit."""
    __slots__ = ()

    @property
    def type(self):
        return "tree" if self[0] == 0o40000 else "commit" if self[0] == 0o160000 else "blob"

    def __repr__(self):
        return "%06o %s %s\t%s" % (self[0], self.type, self[2], _quote(self[1]))


class Tree(list):
    """A tree's entries in git's order; shown as `git cat-file -p` shows it."""

    def __init__(self, oid, raw, hashlen):
        list.__init__(self)
        self.id = oid
        i, n = 0, len(raw)
        while i < n:
            sp = raw.find(b" ", i, i + 8)
            nul = raw.find(b"\0", sp + 1)
            if sp < 0 or nul < 0 or nul + 1 + hashlen > n:
                raise CorruptObject(oid, "malformed tree entry at byte %d" % i)
            try:
                mode = int(raw[i:sp], 8)
            except ValueError:
                raise CorruptObject(oid, "malformed tree entry mode at byte %d" % i)
            name = raw[sp + 1:nul].decode("utf-8", "surrogateescape")
            self.append(TreeEntry._make((mode, name, _hex(raw[nul + 1:nul + 1 + hashlen]))))
            i = nul + 1 + hashlen

    def __repr__(self):
        return "\n".join(repr(e) for e in self) or "(empty tree)"


class Tag(object):
    """An annotated tag: .id, .object, .type, .tag, .tagger, .message."""

    def __init__(self, oid, raw):
        self.id, self.raw = oid, raw
        head, _, body = raw.partition(b"\n\n")
        fields = dict(line.split(b" ", 1) for line in head.split(b"\n") if b" " in line)
        self.object = fields.get(b"object", b"").decode("ascii", "replace")
        self.type = fields.get(b"type", b"").decode("ascii", "replace")
        self.tag = fields.get(b"tag", b"").decode("utf-8", "replace")
        self.tagger = _person(fields.get(b"tagger", b""))[0]
        self.message = body.decode("utf-8", "replace")

    def __repr__(self):
        return self.raw.decode("utf-8", "replace")


class Change(namedtuple("Change", "status path old_id new_id old_mode new_mode")):
    """One changed path; status is A, D, M or T as `git diff-tree
    --name-status` says (ids and modes are None and 0 where git gave none)."""
    __slots__ = ()

    def __repr__(self):
        return "%s\t%s" % (self[0], _quote(self[1]))


class Diff(object):
    """Changed paths (.changes) and the unified diff (str(d)); shown as the diff."""

    def __init__(self, changes=None, text=None, loader=None):
        self._changes, self._text, self._loader = changes, text, loader

    @property
    def changes(self):
        if self._changes is None:
            self._changes = self._loader("changes")
        return self._changes

    def __str__(self):
        if self._text is None:
            self._text = self._loader("text")
        return self._text

    def __repr__(self):
        return str(self) or "(no differences)"

    def __iter__(self):
        return iter(self.changes)

    def __len__(self):
        return len(self.changes)

    def __getstate__(self):  # what it shows travels, not the repository it was read from
        return {"_changes": self.changes, "_text": str(self), "_loader": None}


class Show(object):
    """A commit (.commit) with its diff against its first parent (.diff)."""

    def __init__(self, commit, diff):
        self.commit, self.diff = commit, diff

    @property
    def changes(self):
        return self.diff.changes if self.diff is not None else []

    def __getattr__(self, name):
        if name in ("id", "tree", "parents", "author", "date", "committer", "message", "subject"):
            return getattr(self.commit, name)
        raise AttributeError(name)

    def __repr__(self):
        text = self.commit.header()
        if self.diff is None:  # a merge: git prints a blank line where its combined diff would be
            return text + "\n"
        patch = str(self.diff)
        return text + ("\n" + patch if patch else "")


class StatusEntry(namedtuple("StatusEntry", "index worktree path orig_path")):
    """One path in `git status`: index and worktree are status letters
    (' ' unchanged, '?' untracked, '!' ignored); orig_path for a rename."""
    __slots__ = ()

    def __repr__(self):
        return "%s%s %s" % (self[0], self[1], _quote(self[2]) if not self[3] else _quote(self[3]) + " -> " + _quote(self[2]))


class Status(list):
    """The entries of `git status`, with .branch, .upstream, .ahead, .behind, .head."""
    branch = upstream = head = None
    ahead = behind = 0

    def __repr__(self):
        line = "## " + (self.branch or "HEAD (no branch)")
        if self.upstream:
            line += "..." + self.upstream
            ab = ", ".join(s for s in ("ahead %d" % self.ahead if self.ahead else "",
                                       "behind %d" % self.behind if self.behind else "") if s)
            line += " [%s]" % ab if ab else ""
        return "\n".join([line] + [repr(e) for e in self] + ([] if self else ["(clean)"]))


class BlameLine(namedtuple("BlameLine", "id line author time tz text path")):
    """One line of `git blame`: the commit, the line number, its author and
    author time (unix, tz in minutes), the text, the path in that commit."""
    __slots__ = ()

    @property
    def date(self):
        return _datetime(self[3], self[4])


class Blame(list):
    """Lines of a file with the commit that last changed each."""

    def __repr__(self):
        import time
        w = max([len(l[2]) for l in self] + [1])
        n = len(str(len(self)))
        return "\n".join("%s (%-*s %s %*d) %s" % (l[0][:8], w, l[2], time.strftime("%Y-%m-%d", time.gmtime(l[3] + 60 * l[4])),
                                                  n, l[1], l[5]) for l in self) or "(empty file)"


class Branch(namedtuple("Branch", "name id current subject")):
    """A branch, with the subject of its commit."""
    __slots__ = ()


class Branches(list):
    """Branches, shown as `git branch -v` shows them."""

    def __repr__(self):
        w = max([len(b[0]) for b in self] + [1])
        return "\n".join("%s %-*s %s %s" % ("*" if b[2] else " ", w, b[0], b[1][:7], b[3]) for b in self) or "(no branches)"


# ---------------------------------------------------------------- finding a repository

# Variables that would point git elsewhere than the repository read natively.
_ELSEWHERE = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


def _env(repo):
    """The environment git runs in: this repository's, named explicitly,
    never a pager, a password prompt or an optional lock."""
    env = dict((k, v) for k, v in os.environ.items() if k not in _ELSEWHERE)
    env.update(GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_DIR=repo.gitdir)
    if repo.workdir:
        env["GIT_WORK_TREE"] = repo.workdir
    return env


def _is_gitdir(p):
    return os.path.isfile(os.path.join(p, "HEAD")) and (
        os.path.isdir(os.path.join(p, "objects")) or os.path.isfile(os.path.join(p, "commondir")))


def _discover(start):
    """(work tree or None, gitdir) for the repository at or above start."""
    p = os.path.abspath(start)
    for _ in range(4096):
        dotgit = os.path.join(p, ".git")
        if os.path.isdir(dotgit) and _is_gitdir(dotgit):
            return p, dotgit
        if os.path.isfile(dotgit):
            with open(dotgit, "rb") as f:
                text = f.read(4096).decode("utf-8", "surrogateescape").strip()
            if not text.startswith("gitdir:"):
                raise NotARepository("%s: not a gitdir file" % dotgit)
            gd = os.path.normpath(os.path.join(p, text[7:].strip()))
            if not _is_gitdir(gd):
                raise NotARepository("%s points to %s, which is not a git folder" % (dotgit, gd))
            return p, gd
        if _is_gitdir(p):
            return None, p
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    raise NotARepository("not a git repository (nor any parent up to /): %s" % os.path.abspath(start))


def _extensions(path):
    """The [extensions] keys of a git config file, lower-cased, as a dict;
    enough of git's config syntax to find them, never an exception."""
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return {}
    found, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line[1:line.find("]")].strip().lower() if "]" in line else None
            rest = line[line.find("]") + 1:].strip() if "]" in line else ""
            if not rest:
                continue
            line = rest
        if section == "extensions" and line and line[0] not in "#;":
            key, _, value = line.partition("=")
            value = value.split("#")[0].split(";")[0].strip().strip('"').lower()
            found[key.strip().lower()] = value or "true"
    return found


# ---------------------------------------------------------------- the repository

class Repo(object):
    """A repository: .workdir (None when bare), .gitdir, .common (the shared
    gitdir of linked worktrees), .native (False when reads go through git)."""

    def __init__(self, path="."):
        self.workdir, self.gitdir = _discover(path)
        self.common = self.gitdir
        try:
            with open(os.path.join(self.gitdir, "commondir"), "rb") as f:
                self.common = os.path.normpath(os.path.join(self.gitdir, f.read(4096).decode().strip()))
        except (OSError, UnicodeDecodeError):
            pass
        ext = _extensions(os.path.join(self.common, "config"))
        fmt = ext.get("objectformat", "sha1")
        self.hashlen = 32 if fmt == "sha256" else 20
        self.native = fmt == "sha1" and ext.get("refstorage", "files") == "files" and "partialclone" not in ext
        if self.native:
            self._odb = _ObjectDB(os.path.join(self.common, "objects"), self.hashlen)
            self._refs = _Refs(self.gitdir, self.common, self.hashlen)
        else:
            self._odb, self._refs = _BatchDB(self), _BinaryRefs(self)
        self._shallow = None
        self._commits = _Cache(_COMMIT_BYTES)  # parsed commits: they never change; walks revisit them

    def __reduce__(self):  # opened anew where it is unpickled
        return (Repo, (self.workdir or self.gitdir,))

    def close(self):
        """Ends the git process that serves reads of a SHA-256 or reftable
        repository (a later read starts it again); nothing for others."""
        if not self.native:
            self._odb.close()

    def __repr__(self):
        return "<git repository %s%s>" % (self.workdir or self.gitdir, "" if self.native else " (read through git)")

    # -- the git binary

    def _argv(self, args):
        return ["git"] + list(args)

    def _cwd(self):
        """Where git runs: the current folder when it is in this work tree
        (so paths are relative to it, as in a shell), else the work tree."""
        if not self.workdir:
            return None
        here, top = os.path.realpath(os.getcwd()), os.path.realpath(self.workdir)
        inside = here == top or here.startswith(top.rstrip(os.sep) + os.sep)
        return here if inside else self.workdir

    def _git(self, args, input=None, check=True, show_stderr=False):
        try:
            code, out, err = _programs.run(self._argv(args), input=input, cwd=self._cwd(), env=_env(self))
        except FileNotFoundError:
            raise GitError("git is not installed here (no git on PATH); reads of this repository need it")
        err = err.decode("utf-8", "replace")
        if code and check:
            first = " ".join(a for a in args[:2] if not a.startswith("-"))
            raise GitError("git %s: %s" % (first, err.strip() or "exit status %d" % code))
        if show_stderr and err:
            sys.stderr.write(err)
        return out

    def run(self, args="", *more):
        """Runs git with args (a string split as a shell would, without one, or
        a list) and returns its output; its messages go to stderr. `git("log -3")`."""
        if isinstance(args, str):
            import shlex
            args = shlex.split(args)
        argv = list(args) + list(more)
        return Output(self._git(argv, show_stderr=True).decode("utf-8", "replace"))

    # -- objects

    def _read(self, oid):
        return self._odb.read(oid)

    def _object(self, oid):
        kind, data = self._read(oid)
        if kind == "commit":
            return Commit(oid, data)
        if kind == "tree":
            return Tree(oid, data, self.hashlen)
        if kind == "tag":
            return Tag(oid, data)
        return data

    def _commit(self, oid):
        c = self._commits.get(oid)
        if c is None:
            kind, data = self._odb.read(oid)
            if kind != "commit":
                raise BadRevision("%s is a %s, not a commit" % (oid, kind))
            c = Commit(oid, data)
            self._commits.put(oid, c, 2 * len(data) + 200)  # the object and what is parsed of it
        return c

    def _tree(self, oid):
        kind, data = self._read(oid)
        if kind != "tree":
            raise BadRevision("%s is a %s, not a tree" % (oid, kind))
        return Tree(oid, data, self.hashlen)

    def _peel(self, oid, want):
        """Follows tags (and commit -> tree) until an object of type want."""
        for _ in range(64):
            kind, data = self._read(oid)
            if kind == want or want == "object":
                return oid
            if kind == "tag":
                oid = Tag(oid, data).object
            elif kind == "commit" and want == "tree":
                oid = Commit(oid, data).tree
            elif want is None:
                return oid
            else:
                raise BadRevision("%s is a %s, not a %s" % (oid[:7], kind, want))
        raise BadRevision("%s: tags nest too deep" % oid)

    # -- revisions

    def rev_parse(self, rev):
        """The full id that rev names: ids and their prefixes, refs, @, HEAD~N,
        ^, ^N, ^{type}, REV:path; other syntax is asked of git."""
        if not isinstance(rev, str) or not rev or rev.startswith("-") or "\n" in rev or "\0" in rev:
            raise BadRevision("not a revision: %r" % (rev,))
        if self.native:
            got = self._parse(rev)
            if got is not None:
                return got
        oid = self._git(["rev-parse", "--verify", rev], check=False).decode("ascii", "replace").strip()
        if len(oid) != 2 * self.hashlen or not _is_hex(oid):  # nothing, or a range's two lines
            raise BadRevision("unknown revision %r (not one object)" % rev)
        return oid

    def _parse(self, rev):
        """rev natively, or None where git's own parser is needed."""
        if ":" in rev:
            base, _, path = rev.partition(":")
            if not base or base.startswith("/"):
                return None
            return self._path(self._parse_or_git(base), path, rev)
        ops = []
        base, op = _split_suffix(rev)
        while op is not None:
            ops.append(op)
            base, op = _split_suffix(base)
        if "@{" in base or "{" in base or "}" in base:
            return None
        oid = self._name(base)
        for op in reversed(ops):
            if op.startswith("^{"):
                want = op[2:-1]
                if want not in ("", "commit", "tree", "blob", "tag", "object"):
                    return None  # ^{/text} and the like: git's
                oid = self._peel(oid, want or None)
            elif op.startswith("~"):
                c = self._commit(self._peel(oid, "commit"))
                for _ in range(int(op[1:] or 1)):
                    if not c.parents:
                        raise BadRevision("%r: the history is shorter than that" % rev)
                    c = self._commit(c.parents[0])
                oid = c.id
            else:
                n = int(op[1:] or 1)
                c = self._commit(self._peel(oid, "commit"))
                if n > len(c.parents):
                    raise BadRevision("%r: %s has no parent %d" % (rev, c.id[:7], n))
                oid = c.parents[n - 1] if n else c.id
        return oid

    def _parse_or_git(self, rev):
        got = self._parse(rev)
        return got if got is not None else self.rev_parse(rev)

    def _name(self, name):
        """A ref, @, or an object id or unique prefix of one."""
        if name == "@":
            name = "HEAD"
        n = 2 * self.hashlen
        if len(name) == n and _is_hex(name):
            self._read(name.lower())
            return name.lower()
        for pattern in ("%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"):
            ref = pattern % name
            if pattern == "%s" and not (ref.startswith("refs/") or ref.replace("_", "").isupper()):
                continue
            if _check_refname(ref) or ref == "HEAD":
                oid = self._refs.resolve(ref)
                if oid:
                    return oid
        if 4 <= len(name) < n and _is_hex(name):
            found = self._odb.prefix(name.lower(), 8)
            if len(found) == 1:
                return found[0]
            if found:
                raise BadRevision("short object ID %s is ambiguous: %s" % (name, ", ".join(f[:len(name) + 3] for f in found)))
        raise BadRevision("unknown revision %r (not a ref, nor an object id here)" % name)

    def _path(self, oid, path, rev):
        """The id at path in the tree of oid (a commit, tag or tree)."""
        if path.startswith(("./", "../")) and self.workdir:
            here = os.path.relpath(os.path.realpath(os.getcwd()), os.path.realpath(self.workdir))
            path = os.path.normpath(os.path.join(here, path)).replace(os.sep, "/")
            if path.startswith(".."):
                raise BadRevision("%r is outside the repository" % rev)
        oid = self._peel(oid, "tree")
        for part in [p for p in path.split("/") if p and p != "."]:
            for e in self._tree(oid):
                if e.name == part:
                    oid = e.id
                    break
            else:
                raise BadRevision("path %r does not exist in %r" % (path, rev.partition(":")[0]))
        return oid

    def _entry(self, tree, path):
        """(mode, id) at path in tree, or None."""
        found = (0o40000, tree)
        for part in path.strip("/").split("/"):
            if found[0] != 0o40000:
                return None
            for e in self._tree(found[1]):
                if e.name == part:
                    found = (e.mode, e.id)
                    break
            else:
                return None
        return found

    # -- reading

    def cat(self, spec, raw=False):
        """The object spec names, as `git cat-file -p`: a blob as str when it
        is UTF-8 (bytes otherwise, or always with raw=True), else a Tree,
        Commit or Tag."""
        oid = self.rev_parse(spec)
        kind, data = self._read(oid)
        if kind != "blob":
            return data if raw else self._object(oid)
        if raw or b"\0" in data[:8000]:  # git's test for a binary file
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data

    def _is_commitish(self, oid):
        try:
            self._peel(oid, "commit")
        except GitError:
            return False
        return True

    def _start(self, revs):
        ids = []
        for r in revs:
            try:
                ids.append(self._peel(self.rev_parse(r), "commit"))
            except BadRevision:
                if r != "HEAD" or not ids:  # --all in a repository whose HEAD is unborn
                    raise
        return ids

    def _shallow_ids(self):
        if self._shallow is None:
            try:
                with open(os.path.join(self.common, "shallow")) as f:
                    self._shallow = set(f.read().split())
            except OSError:
                self._shallow = set()
        return self._shallow

    def walk(self, rev="HEAD", path=None):
        """Commits reachable from rev (a name or list; "A..B" leaves out A's
        history; "--all" is every ref and HEAD), newest commit date first as
        `git log` orders them."""
        revs = [rev] if isinstance(rev, str) else list(rev)
        if "--all" in revs:  # refs to trees and blobs are left out, as git log does
            revs.remove("--all")
            revs += ["HEAD"] + [oid for _, oid in self._refs.listing() if self._is_commitish(oid)]
        hide = set()
        for r in list(revs):
            if ".." in r and "..." not in r:
                a, _, b = r.partition("..")
                revs[revs.index(r)] = b or "HEAD"
                hide.update(c.id for c in self.walk(a or "HEAD"))
        shallow, seen, heap, n = self._shallow_ids(), set(hide), [], 0
        for oid in self._start(revs):
            if oid not in seen:
                seen.add(oid)
                c = self._commit(oid)
                heapq.heappush(heap, (-c.time, n, c))
                n += 1
        while heap:
            c = heapq.heappop(heap)[2]
            parents = () if c.id in shallow else c.parents
            if path is not None:
                show, parents = self._touches(c, parents, path)
                if not show:
                    pass
                else:
                    yield c
            else:
                yield c
            for p in parents:
                if p not in seen:
                    seen.add(p)
                    pc = self._commit(p)
                    heapq.heappush(heap, (-pc.time, n, pc))
                    n += 1

    def _touches(self, c, parents, path):
        """(whether c changes path, the parents to follow): git's default
        history simplification, which follows one parent the path came from."""
        mine = self._entry(c.tree, path)
        if not parents:
            return mine is not None, parents
        for p in parents:
            if self._entry(self._commit(p).tree, path) == mine:
                return False, (p,)
        return True, parents

    def log(self, n=10, rev="HEAD", path=None):
        """The first n commits of walk(rev, path); log("main", 5) works too."""
        if isinstance(n, str):
            n, rev = (rev if isinstance(rev, int) else 10), n
        out = Log()
        if rev == "HEAD" and self._refs.resolve("HEAD") is None and self._refs.symref("HEAD"):
            return out  # a branch with no commits yet
        if n is None or n > 0:
            for c in self.walk(rev, path):
                out.append(c)
                if n is not None and len(out) >= n:
                    break
        return out

    def show(self, rev="HEAD"):
        """A commit with its diff against its first parent (none for a
        merge); a tag shows the object it tags; a tree or blob, cat's answer."""
        oid = self.rev_parse(rev)
        kind = self._read(oid)[0]
        if kind == "tag":
            oid = self._peel(oid, None)
            kind = self._read(oid)[0]
        if kind != "commit":
            return self.cat(oid)
        c = self._commit(oid)
        if len(c.parents) > 1:
            return Show(c, None)  # git's combined diff is empty for a clean merge; this shows none
        return Show(c, self._tree_diff(self._commit(c.parents[0]).tree if c.parents else None, c.tree))

    def branches(self, remote=False):
        """Local branches (remote=True: remote-tracking ones too), the current one marked."""
        head = self._refs.symref("HEAD")
        out = Branches()
        for prefix in ("refs/heads/",) + (("refs/remotes/",) if remote else ()):
            for name, oid in self._refs.listing(prefix):
                try:
                    subject = self._commit(oid).subject
                except GitError:
                    subject = ""
                short = name[len("refs/heads/"):] if prefix == "refs/heads/" else name[len("refs/"):]
                out.append(Branch._make((short, oid, name == head, subject)))
        return out

    def refs(self, prefix="refs/"):
        """{name: id} of every ref under prefix, as `git for-each-ref` lists them."""
        return dict(self._refs.listing(prefix))

    # -- diffs

    def _tree_diff(self, a, b, paths=None):
        changes = []
        self._diff_trees(a, b, "", changes)
        if paths:
            keep = [p.strip("/") for p in paths]
            changes = [c for c in changes if any(c[1] == k or c[1].startswith(k + "/") for k in keep)]
        return Diff(changes, loader=lambda what: _patch_text(self, changes))

    def _diff_trees(self, a, b, prefix, out):
        old = dict(((e.name + "/" if e.mode == 0o40000 else e.name), e) for e in (self._tree(a) if a else ()))
        new = dict(((e.name + "/" if e.mode == 0o40000 else e.name), e) for e in (self._tree(b) if b else ()))
        for key in sorted(set(old) | set(new), key=lambda k: k.encode("utf-8", "surrogateescape")):
            o, n = old.get(key), new.get(key)
            if o and n and o.mode == n.mode and o.id == n.id:
                continue
            path = prefix + key.rstrip("/")
            if key.endswith("/"):
                self._diff_trees(o.id if o else None, n.id if n else None, path + "/", out)
            elif o and n:
                same = (o.mode & 0o170000) == (n.mode & 0o170000)
                out.append(Change._make(("M" if same else "T", path, o.id, n.id, o.mode, n.mode)))
            elif o:
                out.append(Change._make(("D", path, o.id, None, o.mode, 0)))
            else:
                out.append(Change._make(("A", path, None, n.id, 0, n.mode)))

    def diff(self, a=None, b=None, paths=None, staged=False):
        """The diff of two commits (natively), or through git: of the work tree
        against the index (no arguments), the index against HEAD (staged=True),
        the work tree against a (one commit). paths limits it."""
        paths = [paths] if isinstance(paths, str) else list(paths or ())
        if a is not None and b is not None and self.native and not staged:
            return self._tree_diff(self._peel(self.rev_parse(a), "tree"), self._peel(self.rev_parse(b), "tree"), paths)
        args = (["--cached"] if staged else []) + [r for r in (a, b) if r is not None]
        for r in args:
            if r.startswith("-") and r != "--cached":
                raise BadRevision("not a revision: %r" % r)

        def load(what):
            if what == "text":
                return self._git(["diff", "--no-color", "--no-ext-diff"] + args + ["--"] + paths).decode("utf-8", "replace")
            out = self._git(["diff", "--name-status", "--no-renames", "-z"] + args + ["--"] + paths)
            parts = out.decode("utf-8", "surrogateescape").split("\0")
            return [Change._make((parts[i][:1], parts[i + 1], None, None, 0, 0)) for i in range(0, len(parts) - 1, 2)]
        return Diff(loader=load)

    # -- through git

    def status(self):
        """`git status` of the work tree: entries with .path, .index, .worktree."""
        out = self._git(["status", "--porcelain=v2", "-z", "--branch"])
        return _parse_status(out.decode("utf-8", "surrogateescape"))

    def blame(self, path, rev=None):
        """Who last changed each line of path (in the work tree, or at rev)."""
        args = ["blame", "--line-porcelain"] + ([rev] if rev else []) + ["--", path]
        if rev and rev.startswith("-"):
            raise BadRevision("not a revision: %r" % rev)
        return _parse_blame(self._git(args).decode("utf-8", "replace"))

    def config(self, key=None, value=None):
        """config() is every setting as a dict; config(key) one value (None
        when unset); config(key, value) sets it in the repository."""
        if key is not None and (not key or key.startswith("-")):
            raise GitError("not a config key: %r" % key)
        if value is not None:
            self._git(["config", "--", key, str(value)])
            return None
        if key is None:
            out = self._git(["config", "-z", "--list"]).decode("utf-8", "replace")
            return dict(item.partition("\n")[::2] for item in out.split("\0") if item)
        out = self._git(["config", "-z", "--get", "--", key], check=False).decode("utf-8", "replace")
        return out.split("\0")[0] if out else None

    def add(self, *paths):
        """git add -- paths (all changes to tracked and new files with none)."""
        self._git(["add", "--"] + list(paths or ["."]), show_stderr=True)

    def commit(self, message, all=False, amend=False, allow_empty=False):
        """Commits the index (all=True: every tracked file's changes) with
        message and returns the new commit."""
        args = ["commit", "-q", "-F", "-"] + (["-a"] if all else []) + (["--amend"] if amend else [])
        self._git(args + (["--allow-empty"] if allow_empty else []), input=message.encode("utf-8"), show_stderr=True)
        return self._commit(self.rev_parse("HEAD"))


def _parse_status(text):
    """Parses `git status --porcelain=v2 -z --branch`."""
    st = Status()
    recs = text.split("\0")
    i = 0
    while i < len(recs):
        r = recs[i]
        i += 1
        if r.startswith("# branch.head "):
            st.branch = r[14:] if r[14:] != "(detached)" else None
        elif r.startswith("# branch.oid "):
            st.head = r[13:] if r[13:] != "(initial)" else None
        elif r.startswith("# branch.upstream "):
            st.upstream = r[18:]
        elif r.startswith("# branch.ab "):
            ab = r[12:].split()
            if len(ab) == 2:
                st.ahead, st.behind = abs(int(ab[0] or 0)), abs(int(ab[1] or 0))
        elif r[:2] in ("1 ", "2 ", "u "):
            nfields = {"1": 8, "2": 9, "u": 10}[r[0]]
            f = r.split(" ", nfields)
            if len(f) <= nfields or len(f[1]) != 2:
                continue
            orig = None
            if r[0] == "2" and i < len(recs):
                orig, i = recs[i], i + 1
            st.append(StatusEntry._make((f[1][0].replace(".", " "), f[1][1].replace(".", " "), f[nfields], orig)))
        elif r[:2] in ("? ", "! "):
            st.append(StatusEntry._make((r[0], r[0], r[2:], None)))
    return st


def _parse_blame(text):
    """Parses `git blame --line-porcelain`."""
    out, info = Blame(), {}
    oid, line = None, 0
    for row in text.split("\n"):
        if row.startswith("\t"):
            if oid:
                out.append(BlameLine._make((oid, line, info.get("author", ""), _int(info.get("author-time")),
                                      _person(b"> 0 " + info.get("author-tz", "+0000").encode())[2], row[1:],
                                      info.get("filename", ""))))
            oid = None
            continue
        head = row.split(" ")
        if oid is None and len(head) >= 3 and len(head[0]) in (40, 64) and _is_hex(head[0]):
            oid, line, info = head[0], _int(head[2]), {}
        elif oid:
            key, _, val = row.partition(" ")
            info[key] = val
    return out


def _split_suffix(rev):
    """(rest, op) for the last ~N, ^N or ^{...} of rev; (rev, None) without one."""
    if rev.endswith("}"):
        at = rev.rfind("^{")
        return (rev[:at], rev[at:]) if at > 0 else (rev, None)
    i = len(rev)
    while i > 0 and rev[i - 1] in "0123456789":
        i -= 1
    if i > 1 and rev[i - 1] in "~^" and len(rev) - i < 10:
        return rev[:i - 1], rev[i - 1:]
    return rev, None


def _digits(s):
    return _DIGITS.match(s) is not None


def _int(s):
    return int(s) if _digits(s) else 0


# ---------------------------------------------------------------- patches

def _patch_text(repo, changes):
    """A unified diff of changes, as git prints it for simple cases."""
    out = []
    for c in changes:
        if c[0] == "T":
            out.append(_file_patch(repo, Change._make(("D", c[1], c[2], None, c[4], 0))))
            out.append(_file_patch(repo, Change._make(("A", c[1], None, c[3], 0, c[5]))))
        else:
            out.append(_file_patch(repo, c))
    return "".join(out)


def _blob(repo, oid, mode):
    if oid is None:
        return b""
    if mode == 0o160000:
        return ("Subproject commit %s\n" % oid).encode()
    return repo._read(oid)[1]


def _file_patch(repo, c):
    status, path, old, new, omode, nmode = c
    a, b = _blob(repo, old, omode), _blob(repo, new, nmode)
    zero = "0" * 7
    lines = ["diff --git %s %s" % (_quote("a/" + path), _quote("b/" + path))]
    if status == "A":
        lines += ["new file mode %06o" % nmode, "index %s..%s" % (zero, new[:7])]
    elif status == "D":
        lines += ["deleted file mode %06o" % omode, "index %s..%s" % (old[:7], zero)]
    elif omode != nmode:
        lines += ["old mode %06o" % omode, "new mode %06o" % nmode]
        if old != new:
            lines.append("index %s..%s" % (old[:7], new[:7]))
    else:
        lines.append("index %s..%s %06o" % (old[:7], new[:7], omode))
    if old == new:
        return "\n".join(lines) + "\n"
    src, dst = _quote("a/" + path) if old else "/dev/null", _quote("b/" + path) if new else "/dev/null"
    if b"\0" in a[:8000] or b"\0" in b[:8000]:
        lines.append("Binary files %s and %s differ" % (src, dst))
        return "\n".join(lines) + "\n"
    hunks = _hunks(a.splitlines(True), b.splitlines(True))
    if hunks:
        lines += ["--- " + src, "+++ " + dst]
    return "\n".join(lines) + "\n" + "".join(hunks)


def _funcname(line):
    """git's default hunk header context: a line that starts like an
    identifier, cut to 80 bytes."""
    c = line[:1]
    if c and (c in b"_$" or c.isalpha()):
        return line[:80].rstrip()
    return None


def _hunks(a, b):
    import difflib
    out, func, prev = [], b"", -1
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in sm.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        for k in range(i1 - 1, prev, -1):
            f = _funcname(a[k])
            if f is not None:
                func = f
                break
        prev = i1 - 1
        head = "@@ -%s +%s @@" % (_range(i1, i2), _range(j1, j2))
        out.append(head + (" " + func.decode("utf-8", "replace") if func else "") + "\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                out += [_line(b" ", l) for l in a[x1:x2]]
                continue
            out += [_line(b"-", l) for l in a[x1:x2]]
            out += [_line(b"+", l) for l in b[y1:y2]]
    return out


def _range(start, stop):
    n = stop - start
    if n == 1:
        return "%d" % (start + 1)
    return "%d,%d" % (start + 1 if n else start, n)


def _line(mark, l):
    text = (mark + l).decode("utf-8", "replace")
    if not l.endswith(b"\n"):
        return text + "\n\\ No newline at end of file\n"
    return text


# ---------------------------------------------------------------- the module's functions

_repos = {}


def repo(path="."):
    """The repository at or above path (cached, so its pack indexes stay read)."""
    work, gitdir = _discover(path)
    key = (work, os.path.realpath(gitdir))
    r = _repos.get(key)
    if r is None:
        r = _repos[key] = Repo(path)
    return r


def _forward(name):
    method = getattr(Repo, name)

    def f(*args, **kwargs):
        return getattr(repo(), name)(*args, **kwargs)
    f.__name__, f.__doc__ = name, method.__doc__
    return f


for _name in ("run", "status", "log", "walk", "show", "cat", "blame", "branches", "refs",
              "diff", "commit", "add", "config", "rev_parse"):
    globals()[_name] = _forward(_name)
del _name


class _CallableModule(types.ModuleType):
    """The module, callable: git("log -3") is git.run("log -3")."""

    def __call__(self, args="", *more):
        return run(args, *more)


_self = sys.modules.get(__name__)
if type(_self) is types.ModuleType and getattr(_self, "__dict__", None) is globals():
    _self.__class__ = _CallableModule
del _self
