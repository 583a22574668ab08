import _thread
import errno
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
import unittest

from replhub_toolkit import atomic


class ReplaceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tkatomic-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.path = os.path.join(self.dir, "f")

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()

    def test_a_new_file_has_mode_less_the_umask(self):
        old = os.umask(0o027)
        self.addCleanup(os.umask, old)
        atomic.replace(self.path, b"one")
        self.assertEqual(self.read(), b"one")
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o640)
        os.unlink(self.path)
        atomic.replace(self.path, b"two", mode=0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)

    def test_keep_gives_the_old_mode(self):
        with open(self.path, "wb") as f:
            f.write(b"old")
        os.chmod(self.path, 0o751)
        atomic.replace(self.path, bytearray(b"new" * 100000), keep=os.stat(self.path))
        self.assertEqual(self.read(), b"new" * 100000)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o751)

    def test_the_new_bytes_are_never_more_readable_than_the_old(self):
        with open(self.path, "wb") as f:
            f.write(b"old secret")
        os.chmod(self.path, 0o600)
        old = os.umask(0o022)
        self.addCleanup(os.umask, old)
        seen = []
        real = os.write

        def write(fd, b):
            seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
            return real(fd, b)

        atomic.os.write = write
        try:
            atomic.replace(self.path, b"new secret", keep=os.stat(self.path))
        finally:
            atomic.os.write = real
        self.assertEqual(seen, [0o600])
        self.assertEqual(self.read(), b"new secret")

    @unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "needs root")
    def test_root_keeps_owner_and_setuid(self):
        with open(self.path, "wb") as f:
            f.write(b"old")
        os.chown(self.path, 65534, 65534)
        os.chmod(self.path, 0o6755)
        atomic.replace(self.path, b"new", keep=os.stat(self.path))
        st = os.stat(self.path)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (65534, 65534, 0o6755))

    def test_a_large_write_goes_in_chunks_a_ctrl_c_can_come_between(self):
        with open(self.path, "wb") as f:
            f.write(b"old")
        calls = []
        real = os.write

        def write(fd, b):
            calls.append(len(b))
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real(fd, b)

        atomic.os.write = write
        try:
            with self.assertRaises(KeyboardInterrupt):
                atomic.replace(self.path, b"x" * (3 * atomic.WRITE_CHUNK))
        finally:
            atomic.os.write = real
        self.assertEqual(calls, [atomic.WRITE_CHUNK] * 2)
        self.assertEqual(self.read(), b"old")
        self.assertEqual(os.listdir(self.dir), ["f"])

    def test_a_ctrl_c_stops_the_wait_for_a_large_write_s_sync(self):
        # A sync that does not end (frozen storage), where no signal cuts
        # it short: it is made off the main thread; a KeyboardInterrupt
        # ends the wait for it, the old file stays, and the thread that
        # syncs closes its dup of the fd once the sync ends.
        with open(self.path, "wb") as f:
            f.write(b"old")
        go_on, syncing, real = threading.Event(), threading.Event(), os.fsync
        on_main = []

        def fsync(fd):
            if os.fstat(fd).st_size >= atomic.WRITE_CHUNK:
                on_main.append(threading.current_thread() is threading.main_thread())
                # As the kernel's wait on storage: no signal cuts it short.
                mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
                try:
                    syncing.set()
                    go_on.wait(10)
                finally:
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            return real(fd)

        raised = threading.Event()

        def interrupt(*_):
            if not raised.is_set():  # one interrupt, however often sent
                raised.set()
                raise KeyboardInterrupt

        def kick():
            # Sent again until raised, as the worker sends an interrupt
            # (Session._nudge): a signal that lands just before the wait's
            # start is not one the wait sees.
            if syncing.wait(10):
                for _ in range(500):
                    signal.pthread_kill(main, signal.SIGALRM)
                    if raised.wait(0.02):
                        return

        before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        old = signal.signal(signal.SIGALRM, interrupt)
        atomic.os.fsync = fsync
        try:
            main = threading.main_thread().ident
            kicker = threading.Thread(target=kick)
            kicker.start()
            t = time.monotonic()
            with self.assertRaises(KeyboardInterrupt):
                atomic.replace(self.path, b"x" * atomic.WRITE_CHUNK)
            took = time.monotonic() - t
        finally:
            go_on.set()
            kicker.join()
            signal.signal(signal.SIGALRM, old)
            atomic.os.fsync = real
        self.assertEqual(on_main, [False])
        self.assertLess(took, 2)
        self.assertEqual(self.read(), b"old")
        self.assertEqual(os.listdir(self.dir), ["f"])
        if before is not None:
            for _ in range(200):
                if len(os.listdir("/proc/self/fd")) <= before:
                    break
                time.sleep(0.01)
            self.assertLessEqual(len(os.listdir("/proc/self/fd")), before, "the dup is left open")

    def test_a_large_write_s_sync_error_is_raised(self):
        with open(self.path, "wb") as f:
            f.write(b"old")
        real = os.fsync

        def fsync(fd):
            if os.fstat(fd).st_size >= atomic.WRITE_CHUNK:
                raise OSError(errno.EIO, "input/output error")
            return real(fd)

        atomic.os.fsync = fsync
        try:
            with self.assertRaises(OSError) as cm:
                atomic.replace(self.path, b"x" * atomic.WRITE_CHUNK)
        finally:
            atomic.os.fsync = real
        self.assertEqual(cm.exception.errno, errno.EIO)
        self.assertEqual(self.read(), b"old")
        self.assertEqual(os.listdir(self.dir), ["f"])

    def test_a_large_write_is_synced_where_no_thread_starts(self):
        real, synced = _thread.start_new_thread, []

        def none_left(*a, **k):
            raise RuntimeError("can't start new thread")

        real_fsync = os.fsync

        def fsync(fd):
            synced.append(threading.current_thread() is threading.main_thread())
            return real_fsync(fd)

        atomic._thread.start_new_thread, atomic.os.fsync = none_left, fsync
        try:
            atomic.replace(self.path, b"x" * atomic.WRITE_CHUNK)
        finally:
            atomic._thread.start_new_thread, atomic.os.fsync = real, real_fsync
        self.assertEqual(self.read(), b"x" * atomic.WRITE_CHUNK)
        self.assertEqual(synced[0], True)

    def test_a_failure_leaves_the_old_file_and_nothing_else(self):
        with open(self.path, "wb") as f:
            f.write(b"old")
        with self.assertRaises(TypeError):
            atomic.replace(self.path, "not bytes")
        self.assertEqual(self.read(), b"old")
        self.assertEqual(os.listdir(self.dir), ["f"])
        with self.assertRaises(OSError):
            atomic.replace(os.path.join(self.dir, "no", "f"), b"x")
        os.mkdir(os.path.join(self.dir, "d"))
        with self.assertRaises(OSError):  # a folder is not replaced
            atomic.replace(os.path.join(self.dir, "d"), b"x")
        self.assertEqual(sorted(os.listdir(self.dir)), ["d", "f"])
        self.assertEqual(os.listdir(os.path.join(self.dir, "d")), [])


if __name__ == "__main__":
    unittest.main()
