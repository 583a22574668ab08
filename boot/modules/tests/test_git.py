"""Tests of git.py against the git binary: every read is compared with what
git itself prints, on repositories built by fixtures.py (loose, packed with
OFS and REF deltas, a worktree, alternates, SHA-256), plus hand-made damaged
packs and a bounded fuzz loop. GITMOD_FIXTURES names a folder built once
for several interpreters; without it the fixtures are built here."""

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixtures  # noqa: E402
import packs  # noqa: E402

# Imported under a name of its own: the module works by any name.
_spec = importlib.util.spec_from_file_location("gitmod_under_test", os.path.join(HERE, "..", "git.py"))
git = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = git
_spec.loader.exec_module(git)

ROOT = None
_tmp = None


_saved = {}


def setUpModule():
    global ROOT, _tmp
    _saved.update((k, os.environ.get(k)) for k in ("GIT_CONFIG_NOSYSTEM", "HOME"))
    os.environ.update(GIT_CONFIG_NOSYSTEM="1", HOME=tempfile.mkdtemp(prefix="gitmod-home-"))
    fixtures.ENV["HOME"] = os.environ["HOME"]
    ROOT = os.environ.get("GITMOD_FIXTURES")
    if not ROOT or not os.path.exists(os.path.join(ROOT, "done")):
        _tmp = ROOT = tempfile.mkdtemp(prefix="gitmod-fixtures-")
        fixtures.build(ROOT)


def tearDownModule():
    if _tmp:
        shutil.rmtree(_tmp, ignore_errors=True)
    shutil.rmtree(os.environ["HOME"], ignore_errors=True)
    for k, v in _saved.items():  # the other modules' tests run in this process too
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def g(cwd, *args, **kw):
    return fixtures.git(cwd, *args, **kw)


def fx(name):
    return os.path.join(ROOT, name)


REPOS = ("loose", "packed", "refdelta", "worktree", "shared", "sha256")


def all_objects(path):
    """{id: (type, bytes)} of every object git sees in the repository."""
    out = g(path, "cat-file", "--batch-all-objects", "--batch")
    objs, i = {}, 0
    while i < len(out):
        nl = out.index(b"\n", i)
        oid, kind, size = out[i:nl].decode().split()
        size = int(size)
        objs[oid] = (kind, out[nl + 1:nl + 1 + size])
        i = nl + 1 + size + 1
    return objs


class ReadsMatchGit(unittest.TestCase):

    def test_every_object_reads_as_git_reads_it(self):
        for name in REPOS:
            with self.subTest(name):
                r = git.Repo(fx(name))
                self.addCleanup(r.close)
                objs = all_objects(fx(name))
                self.assertGreater(len(objs), 10)
                for oid, want in objs.items():
                    self.assertEqual(r._read(oid), want, oid)

    def test_fixtures_hold_ofs_and_ref_deltas(self):
        for name, want in (("packed", 6), ("refdelta", 7)):
            p = fx(name)
            (idx,) = [f for f in os.listdir(os.path.join(p, ".git/objects/pack")) if f.endswith(".idx")]
            path = os.path.join(p, ".git/objects/pack", idx)
            rows = g(p, "verify-pack", "-v", path).decode().splitlines()
            with open(path[:-4] + ".pack", "rb") as f:
                data = f.read()
            kinds = set()
            for row in rows:
                f = row.split()
                if len(f) == 7:  # id type size size-in-pack offset depth base: a delta
                    kinds.add((data[int(f[4])] >> 4) & 7)
            self.assertEqual(kinds, {want}, name)

    def test_refs_match_for_each_ref(self):
        for name in REPOS:
            with self.subTest(name):
                out = g(fx(name), "for-each-ref", "--format=%(objectname) %(refname)").decode()
                want = dict(reversed(l.split(" ", 1)) for l in out.splitlines())
                self.assertEqual(git.Repo(fx(name)).refs(), want)

    def test_rev_parse_matches(self):
        # git's answers, asked once for every Python (fixtures.write_revs).
        with open(fx("revs.json")) as f:
            answers = json.load(f)
        for name, revs in fixtures.rev_cases():
            r = git.Repo(fx(name))
            for rev in revs:
                with self.subTest(name=name, rev=rev):
                    want = answers[name]["revs"][rev]
                    if want is None:
                        self.assertRaises(git.GitError, r.rev_parse, rev)
                        continue
                    self.assertEqual(r.rev_parse(rev), want)
            short, want = answers[name]["short"]
            self.assertEqual(r.rev_parse(short), want)

    def test_bad_revisions_are_errors(self):
        r = git.Repo(fx("loose"))
        for rev in ["nope", "HEAD~99", "HEAD^3", "HEAD:missing/file", "../../etc/passwd", "-h", "", "v1^{blob}",
                    "0" * 40, "HEAD:src/app.py:x", "refs/heads/../../config"]:
            with self.subTest(rev=rev):
                self.assertRaises(git.GitError, r.rev_parse, rev)

    def test_log_matches_git_log(self):
        fmt = "%H%x00%P%x00%an <%ae>%x00%at%x00%cn <%ce>%x00%ct%x00%B%x01"
        for name, rev in (("loose", "HEAD"), ("loose", "feature"), ("packed", "many"), ("packed", "--all"),
                          ("worktree", "HEAD"), ("shared", "HEAD"), ("sha256", "HEAD"), ("loose", "v1..main")):
            with self.subTest(name=name, rev=rev):
                out = g(fx(name), "log", "-n", "50", "--format=" + fmt, rev).decode()
                want = [rec.lstrip("\n").split("\0") for rec in out.split("\1")[:-1]]
                r = git.Repo(fx(name))
                self.addCleanup(r.close)
                got = r.log(50, rev)
                self.assertEqual([c.id for c in got], [w[0] for w in want])
                for c, w in zip(got, want):
                    self.assertEqual([" ".join(c.parents), c.author, str(c.author_time), c.committer, str(c.time), c.message],
                                     w[1:], c.id)

    def test_log_of_a_path(self):
        for name, path in (("loose", "src/app.py"), ("loose", "docs"), ("packed", "big.txt"), ("loose", "README.md")):
            with self.subTest(name=name, path=path):
                want = g(fx(name), "log", "--format=%H", "--all", "--", path).decode().split()
                r = git.Repo(fx(name))
                self.assertEqual([c.id for c in r.log(None, "--all", path=path)], want)

    def test_changes_match_diff_tree(self):
        for name in ("loose", "packed", "sha256"):
            ids = g(fx(name), "rev-list", "--all", "--no-merges")
            out = g(fx(name), "diff-tree", "--stdin", "-r", "--no-renames", "--name-status", "--root", input=ids).decode()
            want, cur = {}, None
            for line in out.splitlines():
                if "\t" in line:
                    want[cur] += line + "\n"
                else:
                    cur, want[line] = line, ""
            r = git.Repo(fx(name))
            self.addCleanup(r.close)
            self.assertEqual(sorted(want), sorted(ids.decode().split()))
            for c, text in want.items():
                with self.subTest(name=name, commit=c):
                    self.assertEqual("".join("%s\t%s\n" % (x.status, x.path) for x in r.show(c).changes), text)

    def test_show_prints_as_git_show(self):
        for name in ("loose", "sha256"):
            r = git.Repo(fx(name))
            self.addCleanup(r.close)
            for c in g(fx(name), "rev-list", "--all").decode().split():
                with self.subTest(name=name, commit=c):
                    want = g(fx(name), "show", "--no-renames", "--no-color", c).decode()
                    self.assertEqual(repr(r.show(c)), want)

    def test_diff_of_two_commits(self):
        r = git.Repo(fx("packed"))
        want = g(fx("packed"), "diff", "--no-renames", "main", "many~30").decode()
        d = r.diff("main", "many~30")
        self.assertEqual(repr(d), want)
        self.assertEqual(repr(r.diff("main", "main")), "(no differences)")
        self.assertEqual([c.path for c in r.diff("main~3", "main", paths="src")], ["src/app.py"])

    def test_cat_prints_as_cat_file(self):
        r = git.Repo(fx("loose"))
        self.assertEqual(r.cat("HEAD:README.md"), g(fx("loose"), "cat-file", "-p", "HEAD:README.md").decode())
        self.assertIsInstance(r.cat("HEAD:bin2.dat"), bytes)
        self.assertEqual(repr(r.cat("HEAD:src")), g(fx("loose"), "cat-file", "-p", "HEAD:src").decode().rstrip("\n"))
        self.assertEqual(r.cat("HEAD").raw, g(fx("loose"), "cat-file", "commit", "HEAD"))
        self.assertEqual(r.cat("v1-annotated").tag, "v1-annotated")
        self.assertEqual(r.cat("HEAD:link"), "src/app.py")
        self.assertEqual(r.cat("HEAD", raw=True), g(fx("loose"), "cat-file", "commit", "HEAD"))

    def test_worktree_and_its_branches(self):
        r = git.Repo(fx("worktree"))
        self.assertNotEqual(r.gitdir, r.common)
        self.assertEqual(r.rev_parse("HEAD"), g(fx("worktree"), "rev-parse", "HEAD").decode().strip())
        self.assertEqual([b.name for b in r.branches() if b.current], ["wt"])
        self.assertEqual([b.name for b in git.Repo(fx("packed")).branches() if b.current], ["main"])

    def test_sha256_reads_through_git(self):
        r = git.Repo(fx("sha256"))
        self.addCleanup(r.close)
        self.assertFalse(r.native)
        self.assertEqual(len(r.rev_parse("HEAD")), 64)
        self.assertEqual(r.cat("HEAD~1:f.txt"), g(fx("sha256"), "cat-file", "-p", "HEAD~1:f.txt").decode())

    def test_an_interrupted_read_leaves_no_answer_behind(self):
        # A KeyboardInterrupt (a Ctrl-C) between a request to cat-file and
        # its answer: the next read must not take that answer for its own.
        r = git.Repo(fx("sha256"))
        self.addCleanup(r.close)
        commit, tree, blob = g(fx("sha256"), "rev-parse", "HEAD", "HEAD^{tree}", "HEAD:f.txt").decode().split()
        db = r._odb
        self.assertEqual(db.read(commit)[0], "commit")

        class Cut(object):
            def __init__(self, f):
                self.f, self.cut = f, False

            def readline(self, n):
                if not self.cut:
                    self.cut = True
                    raise KeyboardInterrupt
                return self.f.readline(n)

            def __getattr__(self, name):
                return getattr(self.f, name)

        db.proc.stdout = Cut(db.proc.stdout)
        with self.assertRaises(KeyboardInterrupt):
            db.read(tree)
        self.assertEqual(db.read(blob)[0], "blob")
        self.assertEqual(db.read(tree)[0], "tree")

    def test_a_cat_file_that_stays_at_eof_is_killed_soon(self):
        # Its end runs in the SIGINT section: a Ctrl-C waits for it. (A
        # shorter wait than the module's, for the test's time.)
        self.addCleanup(setattr, git, "_END_WAIT", git._END_WAIT)
        git._END_WAIT = 0.2
        p = subprocess.Popen(["sh", "-c", "exec sleep 30"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        t0 = time.monotonic()
        git._end(p)
        self.assertLess(time.monotonic() - t0, git._END_WAIT + 2)
        self.assertIsNotNone(p.returncode)

    def test_reftable_is_detected_and_read_through_git(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        r = os.path.join(d, "r")
        g(d, "clone", "-q", fx("loose"), r)
        with open(os.path.join(r, ".git/config"), "a") as f:
            f.write("[core]\n\trepositoryformatversion = 1\n[Extensions]\n\tRefStorage = reftable ; a comment\n")
        repo = git.Repo(r)
        self.addCleanup(repo.close)
        self.assertFalse(repo.native)
        try:
            want = g(r, "rev-parse", "HEAD").decode().strip()
        except subprocess.CalledProcessError:  # a git without reftable refuses the repository
            with self.assertRaises(git.GitError) as e:
                repo.rev_parse("HEAD")
            self.assertNotIn("\n", str(e.exception).strip())
            return
        self.assertEqual(repo.rev_parse("HEAD"), want)

    def test_ambiguous_prefix_is_an_error(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        g(d, "init", "-q")
        seen, pair = {}, None
        for i in range(100000):  # two blobs whose ids share 4 digits, found without git
            data = b"blob %d\n" % i
            oid = packs.object_id("blob", data)
            if oid[:4] in seen:
                pair = (seen[oid[:4]], (oid, data))
                break
            seen[oid[:4]] = (oid, data)
        ids = [g(d, "hash-object", "-w", "--stdin", input=data).decode().strip() for _, data in pair]
        self.assertEqual(ids, [oid for oid, _ in pair])
        pair = ids
        r = git.Repo(d)
        with self.assertRaises(git.BadRevision) as e:
            r.rev_parse(pair[0][:4])
        self.assertIn("ambiguous", str(e.exception))
        self.assertEqual(r.rev_parse(ids[1][:12]), ids[1])
        g(d, "repack", "-a", "-d", "-q")
        with self.assertRaises(git.BadRevision):
            git.Repo(d).rev_parse(pair[0][:4])
        self.assertEqual(r.rev_parse(ids[0][:12]), ids[0], "a repack moves objects: found again")


class ThroughGit(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.r = os.path.join(self.dir, "r")
        g(self.dir, "clone", "-q", fx("loose"), self.r)
        g(self.r, "config", "user.name", "T Ester")
        g(self.r, "config", "user.email", "t@example.com")
        self.cwd = os.getcwd()
        self.addCleanup(os.chdir, self.cwd)

    def test_status_commit_blame_config(self):
        os.chdir(os.path.join(self.r, "src"))  # the module's functions find it upwards
        with open("app.py", "a") as f:
            f.write("# more\n")
        with open(os.path.join(self.r, "new file.txt"), "w") as f:
            f.write("x\n")
        g(self.r, "mv", "README.md", "READ ME.md")
        st = git.status()
        self.assertEqual(st.branch, "main")
        self.assertEqual(sorted(tuple(e) for e in st), [
            (" ", "M", "src/app.py", None), ("?", "?", "new file.txt", None), ("R", " ", "READ ME.md", "README.md")])
        self.assertIn(" M src/app.py", repr(st))
        self.assertIn("R  README.md -> READ ME.md", repr(st))
        self.assertEqual([c.path for c in git.diff()], ["src/app.py"])
        self.assertIn("+# more", str(git.diff()))
        c = git.commit("two changes\n\nand a body", all=True)
        self.assertEqual(c.message, "two changes\n\nand a body\n")
        self.assertEqual(c.author, "T Ester <t@example.com>")
        self.assertEqual(git.log(1)[0], c)
        self.assertEqual([tuple(e)[:3] for e in git.status()], [("?", "?", "new file.txt")])
        b = git.blame("app.py")
        want = g(self.r, "blame", "-l", "-s", "--root", "src/app.py").decode().splitlines()
        self.assertEqual([l.id for l in b], [w.split()[0].lstrip("^") for w in want])
        self.assertEqual(b[-1].text, "# more")
        self.assertEqual(b[-1].author, "T Ester")
        self.assertEqual(git.config("user.name"), "T Ester")
        git.config("x.y", "z 1")
        self.assertEqual(git.config()["x.y"], "z 1")
        self.assertIsNone(git.config("x.nope"))

    def test_run_and_the_callable_module(self):
        os.chdir(self.r)
        os.environ["GIT_DIR"] = os.path.join(fx("packed"), ".git")  # what the module reads wins
        self.addCleanup(os.environ.pop, "GIT_DIR")
        fixtures.Clock(1800000000).commit(self.r, "only here", 60, "+0000", "--allow-empty")  # fixtures.git: its own env
        self.assertTrue(callable(git))
        self.assertEqual(git("log -1 --format=%s"), "only here\n")
        self.assertEqual(git.run(["rev-parse", "HEAD"]).strip(), git.rev_parse("HEAD"))
        self.assertEqual(git("log", "-1", "--format=%an"), "A U Thor\n")
        with self.assertRaises(git.GitError) as e:
            git("no-such-command")
        self.assertIn("git no-such-command", str(e.exception))
        self.assertEqual(repr(git("status --porcelain")), "(no output)")
        self.assertEqual(repr(git.log(2)), "\n".join(g(self.r, "log", "-2", "--format=%h %s").decode().split("\n")[:2]))

    def test_values_pickle(self):
        import pickle
        os.chdir(self.r)
        with open("src/app.py", "a") as f:
            f.write("# more\n")
        for v in (git.log(3), git.show("HEAD~1"), git.status(), git.cat("HEAD:src"), git.branches(), git.diff(),
                  git.blame("README.md"), git.repo()):
            back = pickle.loads(pickle.dumps(v))
            self.assertEqual(repr(back), repr(v))

    def test_odd_paths_are_quoted_as_git_quotes_them(self):
        os.chdir(self.r)
        for name in ("tab\there", "\u00e9.txt", 'q"uote', "back\\slash"):
            with open(name, "w") as f:
                f.write("x\n")
        git.add()
        c = git.commit("odd names")
        self.assertEqual(repr(git.show()), g(self.r, "show", "--no-renames", "--no-color", c.id).decode())
        self.assertEqual(repr(git.cat("HEAD^{tree}")), g(self.r, "cat-file", "-p", "HEAD^{tree}").decode().rstrip("\n"))
        with open("\u00e9.txt", "a") as f:
            f.write("y\n")
        self.assertEqual(repr(git.status()).split("\n")[1], g(self.r, "status", "--short").decode().rstrip("\n"))
        self.assertEqual(sorted(e.path for e in git.status()), ["\u00e9.txt"])

    def test_a_new_repository(self):
        d = os.path.join(self.dir, "new")
        g(self.dir, "init", "-q", "-b", "main", d)
        r = git.Repo(d)
        self.assertEqual(list(r.log()), [])
        self.assertEqual(repr(r.log()), "(no commits)")
        self.assertEqual(list(r.branches()), [])
        self.assertEqual(r.status().branch, "main")
        self.assertRaises(git.BadRevision, r.show)

    def test_import_is_cheap(self):
        code = ("import sys; sys.path.insert(0, %r); import git; "
                "print(type(git).__name__, sorted(m for m in ('subprocess', 'difflib', 'datetime', 'mmap', 'shlex') "
                "if m in sys.modules))" % os.path.dirname(HERE))
        out = subprocess.run([sys.executable, "-B", "-S", "-E", "-c", code], stdout=subprocess.PIPE, check=True).stdout
        self.assertEqual(out.decode().split(None, 1), ["_CallableModule", "[]\n"])

    def test_not_a_repository(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.chdir(d)
        with self.assertRaises(git.NotARepository):
            git.log()
        with open(os.path.join(d, ".git"), "w") as f:
            f.write("gitdir: /nonexistent\n")
        self.assertRaises(git.NotARepository, git.repo, d)

    def test_new_objects_are_seen_by_a_cached_repo(self):
        r = git.repo(self.r)
        before = r.log(1)[0]
        with open(os.path.join(self.r, "a.txt"), "w") as f:
            f.write("a\n")
        g(self.r, "add", "a.txt")
        fixtures.Clock().commit(self.r, "a new commit")
        g(self.r, "gc", "-q")
        self.assertIs(git.repo(self.r), r)
        self.assertEqual(r.log(2)[1], before)
        self.assertEqual(r.cat("HEAD:a.txt"), "a\n")


def synthetic(d, big=False, entries=None):
    """A bare repository whose only pack is written by hand: a blob, an OFS
    delta on it, a REF delta on that. Returns (repo path, {id: data})."""
    base = b"".join(b"line %d of the base blob\n" % i for i in range(50))
    d1 = base[:200] + b"an insert\n" + base[200:]
    d2 = d1 + b"a tail\n"
    ids = [packs.object_id("blob", x) for x in (base, d1, d2)]
    if entries is None:
        entries = [(ids[0], "blob", base, None),
                   (ids[1], "ofs", packs.delta(len(base), len(d1), [("copy", 0, 200), ("insert", b"an insert\n"),
                                                                     ("copy", 200, len(base) - 200)]), 0),
                   (ids[2], "ref", packs.delta(len(d1), len(d2), [("copy", 0, len(d1)), ("insert", b"a tail\n")]), ids[1])]
    if not os.path.exists(os.path.join(d, "HEAD")):
        fixtures.git(os.path.dirname(d), "init", "-q", "--bare", d)
    data, offsets = packs.pack(entries)
    name = os.path.join(d, "objects", "pack", "pack-" + "1" * 40)
    with open(name + ".pack", "wb") as f:
        f.write(data)
    with open(name + ".idx", "wb") as f:
        f.write(packs.index(offsets, data, big))
    return d, dict(zip(ids, (base, d1, d2)))


class DamagedRepositories(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_handmade_pack_reads_as_git_reads_it(self):
        for big in (False, True):
            d, want = synthetic(os.path.join(self.dir, "big" if big else "small"), big)
            r = git.Repo(d)
            for oid, data in want.items():
                self.assertEqual(r._read(oid), ("blob", data))
                self.assertEqual(g(d, "cat-file", "blob", oid), data)

    def damaged(self, entries_or_fn, oid=None):
        d, want = synthetic(os.path.join(self.dir, "r"), entries=entries_or_fn)
        return git.Repo(d), d

    def assertCorrupt(self, r, oid, *words):
        with self.assertRaises(git.CorruptObject) as e:
            r._read(oid)
        self.assertEqual(e.exception.id, oid)
        for w in words:
            self.assertIn(w, str(e.exception))

    def test_lying_deltas(self):
        base = b"0123456789" * 10
        b = packs.object_id("blob", base)
        cases = [
            ("target", packs.delta(100, 500, [("copy", 0, 100)]), "makes 100 bytes"),
            ("source", packs.delta(99, 100, [("copy", 0, 100)]), "99-byte base"),
            ("copy past base", packs.delta(100, 200, [("copy", 50, 150)]), "past the end"),
            ("insert past data", packs.delta(100, 20, [("insert", b"abc")])[:-2], "past the end"),
            ("truncated", packs.delta(100, 100, [("copy", 0, 100)])[:-1], "truncated"),
            ("opcode 0", packs.delta(100, 1, []) + b"\0", "reserved opcode"),
            ("huge target", packs.delta(100, 1 << 60, [("copy", 0, 100)]), "makes 100 bytes"),
        ]
        for what, dl, word in cases:
            with self.subTest(what):
                shutil.rmtree(os.path.join(self.dir, "r"), ignore_errors=True)
                r, _ = self.damaged([(b, "blob", base, None), ("ab" * 20, "ofs", dl, 0)])
                self.assertCorrupt(r, "ab" * 20, word)

    def test_delta_cycle(self):
        x, y = "aa" * 20, "bb" * 20
        dl = packs.delta(10, 10, [("copy", 0, 10)])
        r, _ = self.damaged([(x, "ref", dl, y), (y, "ref", dl, x)])
        self.assertCorrupt(r, x, "loops")

    def test_offsets_past_the_end(self):
        d, want = synthetic(os.path.join(self.dir, "r"))
        idx = [os.path.join(d, "objects/pack", f) for f in os.listdir(os.path.join(d, "objects/pack")) if f.endswith(".idx")][0]
        with open(idx, "rb") as f:
            data = bytearray(f.read())
        n = 3
        offs = 8 + 1024 + n * 24
        data[offs:offs + 4] = b"\x7f\xff\xff\xff"  # the first object by id, far past the end
        with open(idx, "wb") as f:
            f.write(data)
        first = sorted(want)[0]
        self.assertCorrupt(git.Repo(d), first, "past the end")
        data[offs:offs + 4] = b"\x80\x00\x00\x09"  # a 64-bit entry past the table
        with open(idx, "wb") as f:
            f.write(data)
        self.assertCorrupt(git.Repo(d), first, "64-bit")

    def test_alternates_that_loop(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        for d, other in ((a, b), (b, a)):
            g(self.dir, "init", "-q", "--bare", d)
            with open(os.path.join(d, "objects/info/alternates"), "w") as f:
                f.write("# a loop\n%s\n../../b/objects\n" % os.path.join(other, "objects"))
        oid = g(b, "hash-object", "-w", "--stdin", input=b"in b\n").decode().strip()
        r = git.Repo(a)
        self.assertEqual(r._read(oid), ("blob", b"in b\n"))
        self.assertEqual(len(r._odb.dirs), 2)
        self.assertRaises(git.BadRevision, r._read, "0" * 40)

    def test_a_broken_index_spares_other_objects(self):
        d, want = synthetic(os.path.join(self.dir, "r"))
        loose = g(d, "hash-object", "-w", "--stdin", input=b"loose\n").decode().strip()
        with open(os.path.join(d, "objects/pack", "pack-" + "1" * 40 + ".idx"), "r+b") as f:
            f.truncate(500)
        r = git.Repo(d)
        self.assertEqual(r._read(loose), ("blob", b"loose\n"))
        self.assertCorrupt(r, sorted(want)[0], "not a version 2 pack index")

    def test_truncated_pack_and_huge_sizes(self):
        d, want = synthetic(os.path.join(self.dir, "r"))
        pk = os.path.join(d, "objects/pack", "pack-" + "1" * 40 + ".pack")
        with open(pk, "rb") as f:
            data = f.read()
        with open(pk, "wb") as f:
            f.write(data[:40] + data[-20:])  # the first object cut short
        r = git.Repo(d)
        first = packs.object_id("blob", b"".join(b"line %d of the base blob\n" % i for i in range(50)))
        self.assertCorrupt(r, first)
        with open(pk, "wb") as f:
            f.write(data[:12] + packs.entry_header("blob", 1 << 62) + data[14:])
        t = time.time()
        self.assertCorrupt(git.Repo(d), first, "more than")
        self.assertLess(time.time() - t, 5)

    def test_damaged_loose_objects(self):
        d = os.path.join(self.dir, "r")
        g(self.dir, "init", "-q", d)
        oid = g(d, "hash-object", "-w", "--stdin", input=b"some content\n").decode().strip()
        path = os.path.join(d, ".git/objects", oid[:2], oid[2:])
        os.chmod(path, 0o644)
        for what, data, word in [
            ("not zlib", b"garbage", "zlib"),
            ("truncated", zlib.compress(b"blob 13\0some content\n")[:-6], "truncated"),
            ("size lies up", zlib.compress(b"blob 99\0some content\n"), "fewer"),
            ("size lies down", zlib.compress(b"blob 3\0some content\n"), "more than"),
            ("huge size", zlib.compress(b"blob 99999999999999\0x"), "more than the file can hold"),
            ("bad type", zlib.compress(b"blub 13\0some content\n"), "header"),
        ]:
            with self.subTest(what):
                with open(path, "wb") as f:
                    f.write(data)
                self.assertCorrupt(git.Repo(d), oid, word)


class Caches(unittest.TestCase):

    def test_bounded_by_size(self):
        c = git._Cache(1000)
        for i in range(100):
            c.put(i, "v%d" % i, 60)
            self.assertLessEqual(c.size, 1000)
        self.assertIsNone(c.get(0))
        self.assertEqual(c.get(99), "v99")
        c.put("big", "x", 126)  # over an eighth: not kept
        self.assertIsNone(c.get("big"))

    def test_a_walk_fills_them_within_bounds(self):
        r = git.Repo(fx("packed"))
        r.log(None, "--all")
        for line in g(fx("packed"), "rev-list", "--objects", "--all").decode().splitlines():
            r._read(line.split()[0])
        self.assertGreater(r._commits.size, 0)
        self.assertGreater(r._odb.bases.size, 0)
        self.assertLessEqual(r._odb.bases.size, git._CACHE_BYTES)


class Fuzz(unittest.TestCase):
    """Mutated packs, indexes, deltas, loose objects and texts: a GitError
    or a value, nothing else, and quickly. Bounded; the seed is printed."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.seed = int(os.environ.get("GITMOD_SEED") or time.time())
        self.rng = random.Random(self.seed)

    def mutate(self, data):
        data = bytearray(data)
        for _ in range(self.rng.randint(1, 4)):
            how = self.rng.random()
            i = self.rng.randrange(len(data))
            if how < 0.6:
                data[i] = self.rng.randrange(256)
            elif how < 0.8:
                del data[i:i + self.rng.randint(1, 16)]
            else:
                data[i:i] = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 8)))
            if not data:
                data = bytearray(b"x")
        return bytes(data)

    def test_packs_and_indexes(self):
        d, want = synthetic(os.path.join(self.dir, "r"))
        name = os.path.join(d, "objects/pack", "pack-" + "1" * 40)
        with open(name + ".pack", "rb") as f:
            pk = f.read()
        with open(name + ".idx", "rb") as f:
            ix = f.read()
        deadline = time.time() + 20
        for n in range(100):
            which = self.rng.random()
            with open(name + ".pack", "wb") as f:
                f.write(self.mutate(pk) if which < 0.7 else pk)
            with open(name + ".idx", "wb") as f:
                f.write(self.mutate(ix) if which >= 0.6 else ix)
            r = git.Repo(d)
            for oid in want:
                try:
                    r._read(oid)
                except git.GitError:
                    pass
                except Exception as e:
                    self.fail("seed %d, round %d, %s: %r" % (self.seed, n, oid, e))
            if time.time() > deadline:
                break

    def test_revisions(self):
        r = git.Repo(fx("loose"))
        head = r.rev_parse("HEAD")
        tokens = ["HEAD", "main", "v1-annotated", "~", "^", "2", "0", ":", "src", "/", "app.py", "{", "}", "@", "..",
                  "-", "^{tree}", "^{}", ".", " ", "\u00e9", "\0", head[:5], head[:4], "A", "refs/", "heads/", "x" * 300]
        for n in range(200):
            rev = "".join(self.rng.choice(tokens) for _ in range(self.rng.randint(1, 6)))
            try:
                got = r.rev_parse(rev)
            except git.GitError:
                continue
            except Exception as e:
                self.fail("seed %d, %r: %r" % (self.seed, rev, e))
            self.assertTrue(git._is_hex(got) and len(got) == 40, (rev, got))

    def test_deltas_loose_objects_and_texts(self):
        base = bytes(self.rng.randrange(256) for _ in range(300))
        good = packs.delta(300, 310, [("copy", 0, 100), ("insert", b"0123456789"), ("copy", 100, 200)])
        d = os.path.join(self.dir, "r")
        g(self.dir, "init", "-q", d)
        loose = zlib.compress(b"commit 60\0tree " + b"a" * 40 + b"\nauthor x <y> 1 +0000\n\n")
        for n in range(600):
            try:
                git._patch(base, self.mutate(good), "x")
            except git.CorruptObject:
                pass
            blob = self.mutate(b"[extensions]\n\tobjectFormat = sha256\n[core]\nx=1\n" + bytes(self.rng.randrange(256) for _ in range(20)))
            text = blob.decode("utf-8", "replace")
            git._parse_status(text.replace("\n", "\0"))
            git._parse_blame(text)
            git._split_suffix(text)
            git._check_refname(text)
            git.Commit("x", blob)
            git.Tag("x", blob)
            try:
                git.Tree("x", blob, 20)
            except git.CorruptObject:
                pass
            if n % 5:
                continue  # files are slow to write: a fifth of the rounds
            p = os.path.join(self.dir, "obj")
            with open(p, "wb") as f:
                f.write(self.mutate(loose))
            try:
                git._read_loose(p, "x")
            except git.CorruptObject:
                pass
            with open(os.path.join(self.dir, "config"), "wb") as f:
                f.write(blob)
            self.assertIsInstance(git._extensions(os.path.join(self.dir, "config")), dict)


if __name__ == "__main__":
    unittest.main()
