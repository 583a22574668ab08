import os
import shutil
import socket
import tempfile
import threading
import unittest

from replhub_toolkit import relay


class _Chan(object):
    def release(self, data):
        pass

    def send_file(self, header, f, offset, n):
        return False


class _Link(object):
    chan = _Chan()


class _Stream(object):
    """A serve's stream: the chunks it is given, then their end."""

    def __init__(self, chunks):
        self.frames = [({"seq": i}, c) for i, c in enumerate(chunks)] + [({"eof": True}, None)]

    def get(self):
        return self.frames.pop(0)

    def wait_window(self, seq):
        pass


class TransferTest(unittest.TestCase):
    """A file a transfer names, on either side, is a regular file or
    refused in one line; nothing blocks the session on it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.fifo = os.path.join(self.dir, "ff")
        os.mkfifo(self.fifo)
        self.file = os.path.join(self.dir, "f.txt")
        with open(self.file, "wb") as f:
            f.write(b"hi\n")
        self.sent = []
        saved = relay._send, relay._link
        relay._send, relay._link = (lambda h, data=None: self.sent.append(h)), _Link()
        self.addCleanup(setattr, relay, "_send", saved[0])
        self.addCleanup(setattr, relay, "_link", saved[1])

    def answer(self, f, *args):
        """f(*args)'s first value (or its exception, raised): it must not
        block."""
        out = []

        def run():
            try:
                out.append(f(*args)[0])
            except Exception as e:
                out.append(e)
        t = threading.Thread(target=run)
        t.daemon = True
        t.start()
        t.join(5)
        self.assertTrue(out, "%s blocked" % f.__name__)
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]

    def read(self, path):
        return self.answer(relay.serve_read, {"sid": 1, "path": path}, _Stream(()))

    def write(self, path, chunks=(), size=0):
        return self.answer(relay.serve_write, {"sid": 1, "path": path, "size": size}, _Stream(chunks))

    def test_pull_of_a_fifo_is_refused(self):
        r = self.read(self.fifo)
        self.assertEqual(r, {"ok": False, "error": "%s is a named pipe, not a regular file: "
                                                   "pull copies regular files only" % self.fifo})

    def test_pull_of_a_fifo_put_there_after_the_check(self):
        # The check before the open saw a file: the open does not block.
        st = os.stat(self.file)
        saved = relay.os.stat
        relay.os.stat = lambda p: st
        try:
            r = self.read(self.fifo)
        finally:
            relay.os.stat = saved
        self.assertIn("is a named pipe, not a regular file", r["error"])

    def test_pull_of_a_device_or_socket_is_refused(self):
        self.assertIn("/dev/null is a character device, not a regular file", self.read("/dev/null")["error"])
        sock = os.path.join(self.dir, "sock")
        s = socket.socket(socket.AF_UNIX)
        self.addCleanup(s.close)
        s.bind(sock)
        self.assertIn("sock is a socket, not a regular file", self.read(sock)["error"])

    def test_empty_path_is_refused(self):
        for r in (self.read(""), self.read(None), self.write("")):
            self.assertEqual(r, {"ok": False, "error": "the file's path is empty: give the file's path"})
        self.assertEqual(self.sent, [])

    def test_pull_of_a_file_goes(self):
        r = self.read(self.file)
        self.assertEqual(r, {"ok": True})
        self.assertEqual(self.sent[0]["size"], 3)
        self.assertTrue(self.sent[-1].get("eof"))

    @unittest.skipUnless(os.path.exists("/sys/class/net/lo/address"), "Linux's sysfs")
    def test_pull_of_a_file_whose_size_says_more(self):
        # sysfs says 4096 bytes for a line: the size told is what it holds.
        path = "/sys/class/net/lo/address"
        with open(path, "rb") as f:
            want = f.read()
        sent = []
        relay._send = lambda h, data=None: sent.append((h, bytes(data or b"")))
        self.assertEqual(self.read(path), {"ok": True})
        self.assertEqual(sent[0][0]["size"], len(want))
        self.assertEqual(b"".join(d for h, d in sent if h.get("op") == "chunk"), want)
        self.assertTrue(sent[-1][0].get("eof"))

    def test_pull_of_an_empty_file(self):
        empty = os.path.join(self.dir, "empty")
        open(empty, "wb").close()
        self.assertEqual(self.read(empty), {"ok": True})
        self.assertEqual(self.sent[0]["size"], 0)
        self.assertEqual([h.get("seq") for h in self.sent[1:]], [0])
        self.assertTrue(self.sent[-1].get("eof"))

    def test_a_read_that_finds_nothing_yet_waits(self):
        # A file that waits for what it gives is read nonblocking: nothing
        # yet is waited for (on a descriptor past select's 1023 too), not
        # taken for its end, and the transfer's end stops the wait.
        r, w = os.pipe()
        self.addCleanup(os.close, w)
        fd = r
        try:
            import resource
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft <= 1500:
                resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
                self.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
            os.dup2(r, 1500)
            os.close(r)
            fd = 1500
        except (ImportError, OSError, ValueError):
            pass  # a hard limit below it: the descriptor stays low
        os.set_blocking(fd, False)
        f = os.fdopen(fd, "rb")
        self.addCleanup(f.close)
        threading.Timer(0.2, os.write, (w, b"late")).start()
        self.assertEqual(relay._waiting(f, f.read, 100, None), b"late")

        class Over(object):
            def check(self):
                raise relay.Cancelled()
        buf = bytearray(10)
        out = []

        def run():
            try:
                relay._waiting(f, f.readinto, buf, Over())
            except relay.Cancelled:
                out.append("cancelled")
        t = threading.Thread(target=run)
        t.daemon = True
        t.start()
        t.join(5)
        self.assertEqual(out, ["cancelled"])

    def test_a_small_file_that_waits_is_read_to_its_end(self):
        # Its size says little: what it gives first is not all of it.
        r, w = os.pipe()
        os.set_blocking(r, False)
        f = os.fdopen(r, "rb")
        self.addCleanup(f.close)
        os.write(w, b"ab")

        def rest():
            os.write(w, b"cd")
            os.close(w)
        threading.Timer(0.2, rest).start()
        self.assertEqual(relay._whole_if_small(f, 10), b"abcd")

    def test_push_to_a_fifo_is_refused(self):
        r = self.write(self.fifo, [b"x"])
        self.assertEqual(r, {"ok": False, "error": "%s is a named pipe, not a regular file: "
                                                   "only a regular file is replaced" % self.fifo})
        self.assertTrue(os.path.exists(self.fifo) and not os.path.isfile(self.fifo), "still a FIFO")
        self.assertEqual(sorted(os.listdir(self.dir)), ["f.txt", "ff"], "no part file")

    def test_push_from_a_fifo_is_refused(self):
        h = relay.SessionHandle({"name": "t"})
        with self.assertRaises(relay.HubError) as cm:
            self.answer(lambda: (h.push(self.fifo, "x"),))
        self.assertEqual(str(cm.exception), "%s is a named pipe, not a regular file: push copies regular files only" % self.fifo)

    def test_short_push_leaves_nothing(self):
        dest = os.path.join(self.dir, "out")
        r = self.write(dest, [b"abc"], size=10)
        self.assertEqual(r, {"ok": False, "error": "the copy of %s ended at 3 of its 10 bytes (did it shrink meanwhile?)" % dest})
        self.assertFalse(os.path.exists(dest))
        self.assertFalse(os.path.exists(dest + ".replhub-part"))
        # A size that says nothing (0), or a file that grew: what came.
        for size in (0, 2, 3):
            self.assertEqual(self.write(dest, [b"abc"], size=size), {"ok": True, "size": 3})
            with open(dest, "rb") as f:
                self.assertEqual(f.read(), b"abc")


if __name__ == "__main__":
    unittest.main()
