import os
import shutil
import stat
import tempfile
import threading
import time
import unittest
from unittest import mock

from replhub_toolkit import files
from replhub_toolkit.display import Lines, Text, show


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tkfiles-")
        self.addCleanup(shutil.rmtree, self.dir)

    def p(self, *names):
        return os.path.join(self.dir, *names)

    def put(self, name, data):
        path = self.p(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        return path

    def get(self, name):
        with open(self.p(name), "rb") as f:
            return f.read()

    def assertRefused(self, kind, helper, fn, *args, **kw):
        """fn raises kind (a ToolError) whose first line starts with helper."""
        with self.assertRaises(kind) as cm:
            fn(*args, **kw)
        self.assertIsInstance(cm.exception, files.ToolError)
        msg = str(cm.exception)
        self.assertTrue(msg.startswith(helper + ": "), msg)
        self.assertIsNone(cm.exception.__cause__)
        self.assertTrue(cm.exception.__suppress_context__ or cm.exception.__context__ is None, msg)
        return msg


class ReadTest(Base):
    def test_exact_text(self):
        body = "one\r\ntwo\n\x0cthree\u2028same line\nlast"
        path = self.put("a.txt", body)
        got = files.read(path)
        self.assertIsInstance(got, Text)
        self.assertEqual(got, body)
        self.assertEqual(files.read(self.put("e.txt", "")), "")

    def test_offset_and_limit(self):
        path = self.put("a.txt", "l1\nl2\r\nl3\nl4")
        self.assertEqual(files.read(path, 1), "l2\r\nl3\nl4")
        self.assertEqual(files.read(path, 1, 2), "l2\r\nl3\n")
        self.assertEqual(files.read(path, 3, 5), "l4")
        self.assertEqual(files.read(path, 9), "")
        self.assertEqual(files.read(path, 0, 0), "")

    def test_bad_paths(self):
        msg = self.assertRefused(OSError, "read", files.read, self.p("nope"))
        self.assertIn("no such file", msg)
        msg = self.assertRefused(OSError, "read", files.read, self.dir)
        self.assertIn("folder", msg)
        msg = self.assertRefused(OSError, "read", files.read, self.put("b.bin", b"abc\0def\n"))
        self.assertIn("binary", msg)
        self.assertIn("'rb'", msg)
        msg = self.assertRefused(OSError, "read", files.read, self.put("l1.txt", b"caf\xe9\n"))
        self.assertIn("not UTF-8", msg)
        self.assertIn("offset 3", msg)
        msg = self.assertRefused(OSError, "readn", files.readn, self.put("l2.txt", b"ok\nok\n\xff\n"), 1)
        self.assertIn("offset 6", msg)
        self.assertEqual(files.read(self.p("l2.txt"), 0, 2), "ok\nok\n")
        self.assertRefused(ValueError, "read", files.read, self.put("x", "a"), -1)
        os.mkfifo(self.p("fifo"))
        msg = self.assertRefused(OSError, "read", files.read, self.p("fifo"))
        self.assertIn("not a regular file", msg)

    def test_readn(self):
        path = self.put("a.txt", "a\r\nb\n" + "x" * 3000 + "\n")
        got = files.readn(path)
        self.assertIsInstance(got, Text)
        lines = got.split("\n")
        self.assertEqual(lines[:2], ["     1\ta", "     2\tb"])
        self.assertTrue(lines[2].startswith("     3\txxx"))
        self.assertIn("(1000 more characters)", lines[2])
        self.assertEqual(files.readn(path, 1, 1), "     2\tb\n... (more lines: readn(%r, offset=2))" % path)
        self.assertEqual(files.readn(self.put("e", "")), "(empty)")


class WriteTest(Base):
    def test_new_and_existing(self):
        path = self.p("new.txt")
        got = files.write(path, "a\nb\nc")
        self.assertIsInstance(got, Text)
        self.assertEqual(got, "wrote 3 lines (5 bytes) to %s" % path)
        self.assertEqual(self.get("new.txt"), b"a\nb\nc")
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o666 & ~umask)
        os.chmod(path, 0o751)
        self.assertEqual(files.write(path, "x\n"), "wrote 1 line (2 bytes) to %s" % path)
        self.assertEqual(self.get("new.txt"), b"x\n")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o751)
        files.write(path, b"\x00\xff")
        self.assertEqual(self.get("new.txt"), b"\x00\xff")
        self.assertEqual(os.listdir(self.dir), ["new.txt"])

    def test_through_a_link(self):
        target = self.put("t.txt", "old\n")
        os.symlink("t.txt", self.p("link"))
        files.write(self.p("link"), "new\n")
        self.assertTrue(os.path.islink(self.p("link")))
        self.assertEqual(self.get("t.txt"), b"new\n")
        self.assertEqual(files.read(target), "new\n")

    def test_refused(self):
        msg = self.assertRefused(OSError, "write", files.write, self.p("no", "such", "f.txt"), "x")
        self.assertIn("does not exist", msg)
        self.assertFalse(os.path.exists(self.p("no")))
        self.assertRefused(OSError, "write", files.write, self.dir, "x")
        self.assertRefused(ValueError, "write", files.write, self.p("f"), 3)
        ro = self.put("ro.txt", "keep\n")
        os.chmod(ro, 0o444)
        with mock.patch("os.access", return_value=False):  # as root, too
            self.assertIn("read-only", self.assertRefused(OSError, "write", files.write, ro, "x"))
        self.assertEqual(self.get("ro.txt"), b"keep\n")

    def test_failure_leaves_the_original(self):
        path = self.put("a.txt", "original\n")
        os.chmod(path, 0o600)
        for name in ("os.replace", "os.fsync"):
            with mock.patch(name, side_effect=OSError(5, "Input/output error")):
                self.assertRefused(OSError, "write", files.write, path, "new\n")
            self.assertEqual(self.get("a.txt"), b"original\n", name)
            self.assertEqual(os.listdir(self.dir), ["a.txt"], name)
        with mock.patch("os.replace", side_effect=KeyboardInterrupt):
            with self.assertRaises(KeyboardInterrupt):
                files.write(path, "new\n")
        self.assertEqual(os.listdir(self.dir), ["a.txt"])
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)

    def test_edits_are_atomic_too(self):
        path = self.put("a.txt", "one\ntwo\n")
        with mock.patch("os.replace", side_effect=OSError(28, "No space left on device")):
            msg = self.assertRefused(OSError, "edit", files.edit, path, "two", "2")
        self.assertIn("No space left", msg)
        self.assertEqual(self.get("a.txt"), b"one\ntwo\n")
        self.assertEqual(os.listdir(self.dir), ["a.txt"])


class EditTest(Base):
    def test_edit(self):
        path = self.put("a.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n")
        got = files.edit(path, "return 2", "return 3")
        self.assertIsInstance(got, Text)
        self.assertEqual(got.split("\n")[:3], ["--- " + path, "+++ " + path, "@@ -3,4 +3,4 @@"])
        self.assertIn("\n-    return 2\n+    return 3", got)
        self.assertEqual(self.get("a.py"), b"def f():\n    return 1\n\n\ndef g():\n    return 3\n")

    def test_not_found_shows_nearest_lines(self):
        path = self.put("a.py", "".join("line %d\n" % i for i in range(1, 40)) + "    retrun value\n")
        msg = self.assertRefused(ValueError, "edit", files.edit, path, "return value", "x")
        self.assertIn("not found", msg)
        self.assertIn("    40\t    retrun value", msg)
        msg = self.assertRefused(ValueError, "edit", files.edit, path, "line 7\nlien 8\n", "x")
        self.assertIn("     7\tline 7\n     8\tline 8", msg)
        self.assertEqual(files.read(path).count("x"), 0)

    def test_found_too_often(self):
        path = self.put("a.txt", "x = 1\ny = 2\nx = 1\nx = 1\n")
        msg = self.assertRefused(ValueError, "edit", files.edit, path, "x = 1", "x = 0")
        self.assertIn("found 3 times", msg)
        self.assertIn("lines 1, 3, 4", msg)
        self.assertIn("count=3", msg)
        self.assertRefused(ValueError, "edit", files.edit, path, "x = 1", "x = 0", count=2)
        files.edit(path, "x = 1", "x = 0", count=3)
        self.assertEqual(self.get("a.txt"), b"x = 0\ny = 2\nx = 0\nx = 0\n")
        files.edit(path, "x = 0", "z", count=None)
        self.assertEqual(self.get("a.txt"), b"z\ny = 2\nz\nz\n")

    def test_crlf_file(self):
        path = self.put("w.txt", "a\r\nb\r\nc\r\n")
        files.edit(path, "a\nb\n", "A\nB\n")
        self.assertEqual(self.get("w.txt"), b"A\r\nB\r\nc\r\n")

    def test_bad_input(self):
        path = self.put("a.txt", "a\n")
        self.assertRefused(ValueError, "edit", files.edit, path, "", "x")
        self.assertRefused(ValueError, "edit", files.edit, path, "a", "a")
        self.assertRefused(OSError, "edit", files.edit, self.p("nope"), "a", "b")
        self.assertRefused(OSError, "edit", files.edit, self.put("b", b"\0a"), "a", "b")

    def test_edits_all_or_none(self):
        path = self.put("a.txt", "one\ntwo\nthree\n")
        msg = self.assertRefused(ValueError, "edits", files.edits, path, [("one", "1"), ("four", "4")])
        self.assertIn("change 2 of 2", msg)
        self.assertIn("nothing was written", msg)
        self.assertEqual(self.get("a.txt"), b"one\ntwo\nthree\n")
        got = files.edits(path, [("one", "1"), ("1\ntwo", "1\n2"), ("three\n", "3\n", 1)])
        self.assertEqual(self.get("a.txt"), b"1\n2\n3\n")
        self.assertIn("-one\n-two\n-three\n+1\n+2\n+3", got)
        self.assertRefused(ValueError, "edits", files.edits, path, ["x"])

    def test_sed(self):
        path = self.put("a.txt", "a1 b22\nc333\n")
        got = files.sed(path, r"\d+", "N")
        self.assertTrue(got.startswith("3 changes in %s\n--- " % path), got)
        self.assertEqual(self.get("a.txt"), b"aN bN\ncN\n")
        self.assertTrue(files.sed(path, r"^(\w)", r"<\1>", count=1).startswith("1 change in"))
        self.assertEqual(self.get("a.txt"), b"<a>N bN\ncN\n")
        msg = self.assertRefused(ValueError, "sed", files.sed, path, "zzz", "y")
        self.assertIn("must=False", msg)
        self.assertEqual(files.sed(path, "zzz", "y", must=False), "0 changes in %s\n(no change)" % path)
        self.assertRefused(ValueError, "sed", files.sed, path, "(", "y")
        self.assertRefused(ValueError, "sed", files.sed, path, "(a)", r"\2")

    def test_splice_and_insert(self):
        path = self.put("a.txt", "1\n2\n3\n4\n")
        files.splice(path, 2, 3, "two\nthree")
        self.assertEqual(self.get("a.txt"), b"1\ntwo\nthree\n4\n")
        files.splice(path, 1, 1, "")
        self.assertEqual(self.get("a.txt"), b"two\nthree\n4\n")
        files.insert(path, 1, "zero")
        files.insert(path, 5, "end\n")
        files.insert(path, 3, "mid\nmid2\n")
        self.assertEqual(self.get("a.txt"), b"zero\ntwo\nmid\nmid2\nthree\n4\nend\n")
        self.assertRefused(ValueError, "splice", files.splice, path, 0, 1, "x")
        self.assertRefused(ValueError, "splice", files.splice, path, 3, 2, "x")
        self.assertRefused(ValueError, "splice", files.splice, path, 7, 8, "x")
        self.assertRefused(ValueError, "insert", files.insert, path, 9, "x")
        self.assertRefused(ValueError, "insert", files.insert, path, 0, "x")

        tail = self.put("t.txt", "a\nb")
        files.insert(tail, 3, "c")
        self.assertEqual(self.get("t.txt"), b"a\nb\nc\n")
        files.splice(tail, 3, 3, "C")
        self.assertEqual(self.get("t.txt"), b"a\nb\nC\n")
        crlf = self.put("w.txt", "a\r\nb\r\n")
        files.insert(crlf, 2, "x")
        files.splice(crlf, 1, 1, "A")
        self.assertEqual(self.get("w.txt"), b"A\r\nx\r\nb\r\n")
        empty = self.put("e.txt", "")
        files.insert(empty, 1, "first")
        self.assertEqual(self.get("e.txt"), b"first\n")
        crlf_tail = self.put("wt.txt", "a\r\nb")
        files.insert(crlf_tail, 3, "c")
        self.assertEqual(self.get("wt.txt"), b"a\r\nb\r\nc\r\n")


NO_EOL = "\\ No newline at end of file"


class DiffTest(Base):
    def test_strings_and_files(self):
        self.assertEqual(files.diff("a\nb\n", "a\nb\n"), "(no change)")
        self.assertEqual(files.diff("a\nb\n", "a\nc\n"), "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n+c")
        f1 = self.put("one.txt", "x\ny\n")
        f2 = self.put("two.txt", "x\nz\n")
        self.assertEqual(files.diff(f1, f2), "--- %s\n+++ %s\n@@ -1,2 +1,2 @@\n x\n-y\n+z" % (f1, f2))
        self.assertEqual(files.diff(f1, "x\ny\n"), "(no change)")
        self.assertEqual(files.diff(f1, f2, text=True), "--- a\n+++ b\n@@ -1 +1 @@\n-%s\n%s\n+%s\n%s"
                         % (f1, NO_EOL, f2, NO_EOL))
        self.assertIsInstance(files.diff("a", "b"), Text)

    def test_last_line_without_newline(self):
        self.assertEqual(files.diff("a\nb", "a\nb\n"),
                         "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b")

    def test_far_into_a_long_text(self):
        before = "".join("%d\n" % i for i in range(1, 10001))
        after = before.replace("\n5000\n", "\nfive thousand\n")
        got = files.diff(before, after, n=1)
        self.assertEqual(got, "--- a\n+++ b\n@@ -4999,3 +4999,3 @@\n 4999\n-5000\n+five thousand\n 5001")


class GlobTest(Base):
    def test_newest_first_and_hidden(self):
        now = time.time()
        for i, name in enumerate(["a.py", "sub/b.py", "sub/deep/c.py", ".h.py", ".hid/d.py", "e.txt"]):
            path = self.put(name, "x")
            os.utime(path, (now - 100 + i, now - 100 + i))
        os.utime(self.p("sub"), (now - 97.5, now - 97.5))
        got = files.glob("**/*.py", self.dir)
        self.assertIsInstance(got, Lines)
        self.assertEqual(got, [self.p("sub/deep/c.py"), self.p("sub/b.py"), self.p("a.py")])
        self.assertEqual(files.glob(".*/*.py", self.dir), [self.p(".hid/d.py")])
        self.assertEqual(files.glob(".*.py", self.dir), [self.p(".h.py")])
        self.assertEqual(files.glob("*", self.dir), [self.p("e.txt"), self.p("sub"), self.p("a.py")])
        self.assertEqual(files.glob("*.rs", self.dir), [])
        old = os.getcwd()
        os.chdir(self.dir)
        try:
            self.assertEqual(files.glob("*.py"), ["a.py"])
        finally:
            os.chdir(old)
        self.assertRefused(OSError, "glob", files.glob, "*", self.p("nope"))


TREE = {
    "a.txt": "foo\nbar\nFoo bar\n",
    "src/m.py": "import os\n\ndef foo(x,\n        y):\n    return x  # foo\n",
    "src/m.pyi": "def foo(x: int) -> int: ...\n",
    "src/w.txt": "crlf foo\r\nend\r\n",
    "src/deep/n.go": "package n\nfunc Foo() {}\n",
    "src/uni.txt": "caf\u00e9 foo\n\u00e9t\u00e9 \u0663\n",
    "src/latin1.txt": b"caf\xe9 foo\n",
    "noeol.txt": "x\nfoo",
    ".hidden.txt": "foo hidden\n",
    ".git/config": "foo = git\n",
    "src/.cache/c.py": "foo cached\n",
    "bin.dat": b"foo\0\nfoo\n",
    "late-nul.txt": "foo\n" + "x" * 9000 + "\0\nfoo again\n",
    "-dash.txt": "foo -e\n",
    "sp ace.txt": "foo: colon\n",
    "long.txt": "foo" + "y" * 3000 + "\n",
    ".gitignore": "a.txt\n",
}

CASES = [
    ("foo", {}),
    ("foo", {"hidden": True}),
    ("FOO", {"ignore_case": True}),
    ("^def ", {}),
    ("bar$", {}),
    ("end$", {}),
    (r"foo\(x,\n\s+y\)", {"multiline": True}),
    (r"x\nfoo", {"multiline": True}),
    (r"^\w+\n", {"multiline": True, "path": "src"}),
    ("foo", {"glob": "*.py"}),
    ("foo", {"glob": "*.{go,pyi}", "ignore_case": True}),
    ("foo", {"glob": ["n.go", "m.py"], "ignore_case": True}),
    ("foo", {"type": "py", "hidden": True}),
    ("foo", {"type": "py", "glob": "*.pyi"}),
    ("foo", {"files_only": True}),
    ("foo", {"files_only": True, "hidden": True, "multiline": True}),
    ("o", {"max_count": 1}),
    ("foo", {"context": 1, "path": "src"}),
    ("foo", {"path": ".git"}),
    ("foo", {"path": "src/m.py"}),
    (r"\w+ foo", {}),
    ("\u00e9T\u00c9", {"ignore_case": True}),
    (r"\d", {"path": "src/uni.txt"}),
    ("(?<=x  # )foo", {}),
    ("-e", {}),
    ("nothing-matches-this", {}),
    ("", {"path": "src/deep"}),
    ("o", {"limit": 3}),
]


class GrepTest(Base):
    def setUp(self):
        Base.setUp(self)
        for name, data in TREE.items():
            self.put(name, data)
        os.symlink("a.txt", self.p("src/link.txt"))
        os.symlink("src", self.p("srclink"))
        old = os.getcwd()
        os.chdir(self.dir)
        self.addCleanup(os.chdir, old)

    def run_case(self, backend, pattern, kw):
        kw = dict(kw)
        return files.grep(pattern, kw.pop("path", "."), backend=backend, **kw)

    def test_python(self):
        got = files.grep("foo", backend="python")
        self.assertIsInstance(got, Lines)
        self.assertEqual(got, [
            "-dash.txt:1:foo -e",
            "a.txt:1:foo",
            "late-nul.txt:1:foo",
            "late-nul.txt:3:foo again",
            "long.txt:1:foo" + "y" * 1997 + " ...(1003 more characters)",
            "noeol.txt:2:foo",
            "sp ace.txt:1:foo: colon",
            "src/latin1.txt:1:caf\ufffd foo",
            "src/m.py:3:def foo(x,",
            "src/m.py:5:    return x  # foo",
            "src/m.pyi:1:def foo(x: int) -> int: ...",
            "src/uni.txt:1:caf\u00e9 foo",
            "src/w.txt:1:crlf foo",
        ])
        self.assertEqual(files.grep("foo", "src", context=1, backend="python", type="py"), [
            "src/m.py-2-",
            "src/m.py:3:def foo(x,",
            "src/m.py-4-        y):",
            "src/m.py:5:    return x  # foo",
            "--",
            "src/m.pyi:1:def foo(x: int) -> int: ...",
        ])
        self.assertEqual(files.grep(r"foo\(x,\n\s+y\)", multiline=True, backend="python"),
                         ["src/m.py:3:def foo(x,", "src/m.py:4:        y):"])
        total = len(files.grep("o", limit=None, backend="python"))
        self.assertEqual(files.grep("o", limit=2, backend="python")[2:],
                         ["... (%d more lines; narrow the search with glob, type, max_count or a longer pattern)" % (total - 2)])
        self.assertEqual(files.grep("foo", self.dir, glob="m.py", backend="python"),
                         [self.p("src/m.py") + ":3:def foo(x,", self.p("src/m.py") + ":5:    return x  # foo"])

    def check_backend(self, backend):
        if backend not in files.backends():
            self.skipTest("%s is not available" % backend)
        for pattern, kw in CASES + [("foo", dict(kw, path=self.dir)) for _, kw in CASES if "path" not in kw]:
            with self.subTest(pattern=pattern, **kw):
                want = self.run_case("python", pattern, kw)
                self.assertEqual(self.run_case(backend, pattern, kw), want)

    def test_rg_answers_as_python(self):
        if not shutil.which("rg"):
            self.skipTest("rg is not installed")
        self.check_backend("rg")

    def test_gnu_grep_answers_as_python(self):
        self.check_backend("grep")

    def test_a_cut_probe_is_not_kept(self):
        # A Ctrl-C in the look for GNU grep: the next call looks again.
        if not shutil.which("grep"):
            self.skipTest("no grep")
        saved, files._GNU = files._GNU, None
        try:
            want = files._gnu_grep()
            files._GNU = None
            with mock.patch.object(files.subprocess, "run", side_effect=KeyboardInterrupt):
                with self.assertRaises(KeyboardInterrupt):
                    files._gnu_grep()
            self.assertEqual(files._gnu_grep(), want)
            with mock.patch.object(files.subprocess, "run", side_effect=AssertionError("looked again")):
                self.assertEqual(files._gnu_grep(), want)  # kept
        finally:
            files._GNU = saved

    def test_default_answers_as_python(self):
        # The default is the first of backends(): rg or GNU grep, whose
        # tests above run every case, or python itself. Asked for by no
        # name, it is taken, and answers as it does by its name.
        default = files.backends()[0]
        self.assertIn(default, ("rg", "grep", "python"))
        for pattern, kw in CASES[:2]:
            with self.subTest(pattern=pattern, **kw):
                want = self.run_case("python", pattern, kw)
                self.assertEqual(self.run_case(None, pattern, kw), want)
                self.assertEqual(self.run_case(default, pattern, kw), want)

    def test_refused(self):
        msg = self.assertRefused(OSError, "grep", files.grep, "x", "nope")
        self.assertIn("no such file or folder", msg)
        msg = self.assertRefused(ValueError, "grep", files.grep, "x", type="cobol")
        self.assertIn("known:", msg)
        self.assertRefused(ValueError, "grep", files.grep, "x", glob="src/*.py")
        self.assertRefused(ValueError, "grep", files.grep, "x", backend="ack")
        for backend in files.backends():
            with self.subTest(backend=backend):
                msg = self.assertRefused(ValueError, "grep", files.grep, "(unclosed", backend=backend)
                self.assertIn("bad pattern", msg)

    def test_a_fifo_with_a_match_does_not_block(self):
        # The search program reads the FIFO's one writer to its end; the
        # look for a NUL that follows must not wait for another writer.
        fifo = self.p("pipe")
        os.mkfifo(fifo)
        for backend in files.backends():
            with self.subTest(backend=backend):
                def write():
                    try:
                        with open(fifo, "w") as f:
                            f.write("foo in a pipe\n")
                    except BrokenPipeError:
                        pass  # released by the cleanup below: no reader

                writer = threading.Thread(target=write, daemon=True)
                writer.start()
                got = []
                search = threading.Thread(target=lambda: got.append(files.grep("foo", fifo, backend=backend)), daemon=True)
                search.start()
                search.join(10)
                blocked = search.is_alive()
                # Whatever is still waiting for the other end gets it.
                for flags in (os.O_RDONLY, os.O_WRONLY):
                    try:
                        os.close(os.open(fifo, flags | os.O_NONBLOCK))
                    except OSError:
                        pass
                search.join(10)
                writer.join(10)
                self.assertFalse(blocked, "grep waited on the FIFO")
                self.assertEqual(len(got), 1)
                if backend != "grep":  # GNU grep skips FIFOs (-D skip)
                    self.assertIn("foo in a pipe", "\n".join(got[0]))


class HelpTest(unittest.TestCase):
    def test_every_helper_has_a_line(self):
        for name, line in files.HELP.items():
            self.assertTrue(callable(getattr(files, name)), name)
            self.assertTrue(line.startswith(name + "("), line)
            self.assertNotIn("\n", line)

    def test_results_show_as_text(self):
        self.assertEqual(show(files.diff("a", "a")), "(no change)")


if __name__ == "__main__":
    unittest.main()
