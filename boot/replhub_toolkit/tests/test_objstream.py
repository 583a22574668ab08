import pickle
import random
import sys
import unittest

from replhub_toolkit import relay

MB = 1 << 20


def receive(blob, bufs, chunk=3 * MB + 1):
    """What a receiving session does with a streamed object: buffers made
    from the header, chunks read into them where into says, then loads."""
    from replhub_toolkit import objstream
    st = relay.Stream()
    objs = st.expect({"bufs": objstream.sizes(bufs), "kinds": objstream.kinds(bufs)})
    for raw in bufs:
        for off in range(0, raw.nbytes, chunk):
            piece = raw[off:off + chunk]
            view = st.into(len(piece))
            assert view is not None and st.holds(view)
            view[:] = piece
    return relay.loads(blob, relay.PY, objs)


@unittest.skipIf(sys.version_info < (3, 8), "objects stream on Python 3.8+ only")
class ObjStream(unittest.TestCase):
    def setUp(self):
        from replhub_toolkit import objstream
        self.os = objstream
        # A test that found MADV_POPULATE_WRITE missing turns populate off
        # for the module: each test starts with it on.
        saved = objstream._no_populate[:]
        del objstream._no_populate[:]
        self.addCleanup(objstream._no_populate.extend, saved)

    def dumps(self, obj):
        bufs = self.os.Buffers()
        return relay.dumps(obj, bufs), bufs

    def test_round_trip_keeps_types_and_sharing(self):
        shared = bytes(range(256)) * (2 * MB // 256)
        obj = {"b": shared, "again": shared, "ba": bytearray(b"q" * (MB + 7)),
               "mv": memoryview(bytearray(4 * MB)).cast("i", [1024, 1024]),
               "ro": memoryview(b"r" * (2 * MB)), "small": [b"s" * 10, bytearray(3), 5]}
        blob, bufs = self.dumps(obj)
        self.assertEqual(self.os.kinds(bufs), "baaa")  # shared goes once
        self.assertLess(len(blob), 4096)
        got = receive(blob, bufs)
        self.assertIs(type(got["b"]), bytes)
        self.assertEqual(got["b"], shared)
        self.assertIs(got["b"], got["again"])
        self.assertEqual(hash(got["b"]), hash(shared))
        self.assertIs(type(got["ba"]), bytearray)
        self.assertEqual(got["ba"], obj["ba"])
        self.assertEqual((got["mv"].format, got["mv"].shape, got["mv"].readonly), ("i", (1024, 1024), False))
        self.assertTrue(got["ro"].readonly)
        self.assertEqual(got["ro"].tobytes(), b"r" * (2 * MB))
        self.assertEqual(got["small"], obj["small"])

    def test_pickle_buffers_go_out_of_band(self):
        big = PB(b"p" * (3 * MB))
        blob, bufs = self.dumps([big, PB(b"tiny")])
        self.assertEqual(len(bufs), 1)
        got = receive(blob, bufs)
        self.assertEqual(got, [big, PB(b"tiny")])
        self.assertIs(type(got[0]), PB)

    def test_into_refuses_what_does_not_fit(self):
        st = relay.Stream()
        st.expect({"bufs": [MB, 0, 10], "kinds": "aba"})
        self.assertIsNone(st.into(MB + 1))
        self.assertEqual(len(st.into(MB)), MB)
        self.assertIsNone(st.into(11))  # the empty buffer is skipped
        self.assertEqual(len(st.into(10)), 10)
        self.assertIsNone(st.into(1))
        self.assertFalse(st.holds(memoryview(bytearray(3))))
        self.assertIsNone(relay.Stream().into(1))  # nothing expected

    def test_bad_headers_are_kept_as_errors(self):
        rnd = random.Random(7)
        values = [None, 1, "x", -1, 2 ** 70, [], [1], [-1], ["1"], [1.5], [True], [1] * 5000, {}, "ab", "", "b",
                  [2 ** 40], [2 ** 70], [-2 ** 70]]
        for _ in range(500):
            st = relay.Stream()
            header = {"bufs": rnd.choice(values), "kinds": rnd.choice(values)}
            objs = st.expect(header)
            if objs is None:
                with self.assertRaises(self.os.StreamError):
                    st.expecting()
            else:
                self.assertEqual(st.expecting(), sum(len(o) for o in objs))

    def test_loader_keeps_buffers_in_step(self):
        blob, bufs = self.dumps([bytes(MB), bytes(MB)])
        with self.assertRaises(self.os.StreamError):
            relay.loads(blob, relay.PY, [bytearray(MB)])  # one short
        with self.assertRaises(self.os.StreamError):
            relay.loads(blob, relay.PY, [bytearray(MB)] * 3)  # one too many
        odd = pickle.dumps(0, protocol=5)
        loader = self.os.Loader([bytearray(1)])
        for pid in [("replhub-buf", 1, "b", "B", None, False), ("x",), "s",
                    ("replhub-buf", 0, "z", "B", None, False)]:
            with self.assertRaises((self.os.StreamError, pickle.UnpicklingError)):
                loader.persistent_load(pid)
        self.assertEqual(pickle.loads(odd), 0)

    def test_mangled_pickles_fail_cleanly(self):
        blob, bufs = self.dumps({"a": bytes(MB), "b": [1, 2, bytearray(MB)]})
        rnd = random.Random(11)
        for _ in range(300):
            b = bytearray(blob)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            try:
                relay.loads(bytes(b), relay.PY, [bytearray(MB), bytearray(MB)])
            except Exception:
                pass

    def test_persistent_ids_only_where_they_pay(self):
        has_big = self.os.has_big
        self.assertTrue(has_big({"a": [1, (2, bytearray(MB))]}))
        self.assertTrue(has_big(Holder(memoryview(bytes(MB)))))
        self.assertFalse(has_big({"a": bytes(MB - 1), "b": list(range(1000))}))
        # What a function takes along: globals it names, cells, defaults.
        global BIG
        BIG = bytes(MB)
        self.assertTrue(has_big(("func", lambda: len(BIG), (), {})))
        self.assertTrue(has_big(lambda: [lambda: BIG]))
        big = bytes(MB)
        self.assertTrue(has_big(lambda: big))
        self.assertTrue(has_big(lambda x=big: x))
        self.assertFalse(has_big(lambda: len(self)))
        # In a graph past the walk, only buffers big enough to pay.
        many = list(range(self.os._WALK))
        self.assertFalse(has_big([many, bytes(MB)]))
        self.assertTrue(has_big([many, bytes(self.os._BIG_GRAPH)]))
        blob, bufs = self.dumps([many, bytes(MB)])
        self.assertEqual(len(bufs), 0)
        self.assertEqual(receive(blob, bufs), [many, bytes(MB)])

    def test_allocate(self):
        for kind, want in (("b", bytes), ("a", bytearray)):
            obj, view = self.os.allocate(5, kind)
            self.assertIs(type(obj), want)
            view[:] = b"hello"
            self.assertEqual(obj, b"hello")
        self.assertEqual(self.os.allocate(0, "b")[0], b"")

    def test_big_buffers_ask_for_huge_pages(self):
        asked = []
        saved = self.os._madvise[:]
        self.os._madvise[:] = [lambda addr, n, advice: asked.append((addr, n, advice)), 14]
        try:
            for kind in "ba":
                del asked[:]
                n = 16 * MB + 123
                obj, view = self.os.allocate(n, kind)
                if self.os._new[0] is None:
                    self.skipTest("no C API here: buffers are plain bytearrays")
                import ctypes
                base = ctypes.addressof(ctypes.c_char.from_buffer(view))
                self.assertEqual(len(asked), 1)
                addr, size, advice = asked[0]
                self.assertEqual(advice, 14)
                self.assertEqual(addr % self.os.HUGE, 0)
                self.assertEqual(size % self.os.HUGE, 0)
                self.assertTrue(base <= addr and addr + size <= base + n)
                self.assertGreaterEqual(size, n - 2 * self.os.HUGE)
                del asked[:]
                self.os.allocate(2 * MB, kind)
                self.assertEqual(asked, [])
        finally:
            self.os._madvise[:] = saved

    def test_into_populates_each_chunk_first(self):
        got = []
        saved = self.os.populate, self.os.prefault
        self.os.populate = lambda view: got.append((len(view), bytes(view[:1])))
        self.os.prefault = lambda views, objs: None
        try:
            st = relay.Stream()
            st.expect({"bufs": [16 * MB + 5], "kinds": "b"})
            first = st.into(8 * MB)
            second = st.into(8 * MB + 5)
            self.assertIsNone(st.into(1))
        finally:
            self.os.populate, self.os.prefault = saved
        self.assertEqual([n for n, _ in got], [8 * MB, 8 * MB + 5])
        self.assertTrue(st.holds(first) and st.holds(second))

    def test_into_leaves_to_the_prefault_what_it_has_done(self):
        class Fake(object):
            def __init__(self, views, objs):
                self.ready, self.taken, self.stopped = 0, [], False
                made.append(self)

            def took(self, n):
                self.taken.append(n)

            def stop(self):
                self.stopped = True
        made, got = [], []
        saved = self.os.populate, self.os.prefault
        self.os.populate = lambda view: got.append(len(view))
        self.os.prefault = Fake
        key = ("id", -7)
        self.addCleanup(relay.close_stream, key)
        try:
            st = relay.open_stream(key)
            st.expect({"bufs": [8 * MB, 16 * MB], "kinds": "ba"})
            made[0].ready = 12 * MB  # the first buffer, half the second
            st.into(8 * MB)          # all in: not again
            st.into(4 * MB)          # in too
            st.into(8 * MB)          # 12 to 20 MiB: not yet
            self.assertEqual(got, [8 * MB])
            self.assertEqual(made[0].taken, [8 * MB, 12 * MB, 20 * MB], "told how far the reader is")
            st.expect({"bufs": [16 * MB], "kinds": "b"})
            self.assertTrue(made[0].stopped, "a second object stops the first's prefault")
            st.cancel()
            self.assertTrue(made[1].stopped, "a cancelled transfer stops its prefault")
            st.expect({"bufs": [16 * MB], "kinds": "b"})
            relay.close_stream(key)
            self.assertTrue(made[2].stopped, "so does a closed one")
        finally:
            self.os.populate, self.os.prefault = saved

    def gated_populate(self, at):
        """populate replaced, for the test, by one that records each
        view's length and holds call number at until released; returns
        (lengths, reached, release), the two events."""
        import threading
        got, reached, release = [], threading.Event(), threading.Event()

        def populate(view):
            got.append(len(view))
            if len(got) == at:
                reached.set()
                release.wait(10)
        saved = self.os.populate
        self.os.populate = populate
        self.addCleanup(setattr, self.os, "populate", saved)
        return got, reached, release

    def test_prefault_goes_in_order_and_stops(self):
        import threading
        got, second, release = self.gated_populate(2)
        a, b = bytearray(10 * MB), bytearray(20 * MB)
        pf = self.os.Prefault([memoryview(a), memoryview(b)], [a, b])
        self.assertTrue(second.wait(10), "the prefault runs on its own thread")
        self.assertEqual(pf.ready, 8 * MB)
        stopping = threading.Thread(target=pf.stop)
        stopping.start()
        release.set()
        stopping.join(10)
        self.assertFalse(pf.thread.is_alive(), "stop waits for it")
        self.assertEqual(got, [8 * MB, 2 * MB], "chunk by chunk from the start, and no more once stopped")
        self.assertEqual(pf.ready, 10 * MB)
        a += b"resized"  # nothing holds a view of it any more

    def test_prefault_keeps_to_the_reader(self):
        import time
        chunk, ahead = self.os.CHUNK, self.os.Prefault.AHEAD
        got, first, go = self.gated_populate(1)
        buf = bytearray((ahead + 8) * chunk)  # never touched: populate is ours
        try:
            pf = self.os.Prefault([memoryview(buf)], [buf])
            self.assertTrue(first.wait(10))
            pf.took(4 * chunk)  # the reader went past chunks 1 to 3 itself
            go.set()
            for _ in range(500):
                if pf.ready >= (ahead + 4) * chunk:
                    break
                time.sleep(0.01)
            time.sleep(0.2)
            self.assertEqual(pf.ready, (ahead + 4) * chunk, "AHEAD chunks past the reader, and no further")
            self.assertEqual(len(got), 1 + ahead, "not the chunks the reader had taken")
            pf.took((ahead + 8) * chunk)
            pf.thread.join(10)
            self.assertEqual(pf.ready, len(buf))
            self.assertEqual(len(got), 1 + ahead, "nor those it took while it waited")
        finally:
            pf.stop()

    def test_prefault_is_none_without_a_thread(self):
        import threading

        class NoThread(threading.Thread):
            def start(self):
                raise RuntimeError("can't start new thread")
        saved = self.os._madvise[:], self.os.threading.Thread
        self.os._madvise[:] = [lambda addr, n, advice: 0, 14]
        self.os.threading.Thread = NoThread
        try:
            buf = bytearray(16 * MB)
            self.assertIsNone(self.os.prefault([memoryview(buf)], [buf]), "the transfer goes on without")
        finally:
            self.os._madvise[:], self.os.threading.Thread = saved

    def test_populate_is_turned_off_only_by_a_refusal(self):
        import ctypes
        import errno
        failure = []

        def madvise(addr, n, advice):
            ctypes.set_errno(failure[0])
            return -1
        saved = self.os._madvise[:]
        self.os._madvise[:] = [madvise, 14]
        buf = bytearray(4 * MB)
        try:
            for failure[:] in ([errno.ENOMEM], [errno.EFAULT]):
                self.os.populate(memoryview(buf))
                self.assertEqual(self.os._no_populate, [], "a passing failure")
            failure[:] = [errno.EINVAL]
            self.os.populate(memoryview(buf))
            self.assertEqual(self.os._no_populate, [True], "a kernel without MADV_POPULATE_WRITE")
        finally:
            self.os._madvise[:] = saved

    def fresh(self, n):
        """An mmap of n bytes of fresh pages (whatever malloc keeps) and a
        view of it, both closed at the test's end; the test is skipped
        without madvise."""
        import mmap
        if self.os._find_madvise()[0] is None:
            self.skipTest("no madvise here")
        area = mmap.mmap(-1, n)
        view = memoryview(area)
        self.addCleanup(area.close)
        self.addCleanup(view.release)
        return area, view

    @unittest.skipUnless(sys.platform.startswith("linux"), "MADV_POPULATE_WRITE is Linux's")
    def test_prefault_faults_the_buffers_in(self):
        import ctypes
        area, view = self.fresh(40 * MB)
        self.os.populate(view[-2 * MB:])  # the last 2 MiB: is it there?
        if self.os._no_populate:
            self.skipTest("no MADV_POPULATE_WRITE here (Linux before 5.14)")
        addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
        before = mapping_kb(addr, "Rss:")
        pf = self.os.prefault([view], [area])
        self.assertIsNotNone(pf)
        pf.thread.join(30)
        self.assertEqual(pf.ready, 40 * MB)
        self.assertGreaterEqual(mapping_kb(addr, "Rss:") - before, 36 * 1024, "the other 38 MiB faulted in")
        small = bytearray(16 * MB)
        self.assertIsNone(self.os.prefault([memoryview(small)[1:]], [small]), "not for under two chunks")
        pf = self.os.prefault([memoryview(small)], [small])
        self.assertIsNotNone(pf, "but for two")
        pf.stop()

    @unittest.skipUnless(sys.platform.startswith("linux"), "MADV_POPULATE_WRITE is Linux's")
    def test_populate_faults_the_slice_in(self):
        import ctypes
        area, view = self.fresh(64 * MB)
        part = view[16 * MB:48 * MB]
        try:
            addr = ctypes.addressof(ctypes.c_char.from_buffer(part))
            before = mapping_kb(addr, "Rss:")
            self.os.populate(part)
            if self.os._no_populate:
                self.skipTest("no MADV_POPULATE_WRITE here (Linux before 5.14)")
            self.assertGreaterEqual(mapping_kb(addr, "Rss:") - before, 30 * 1024, "32 MiB faulted in")
            part[:4] = b"data"  # still the same memory, written as before
            self.assertEqual(area[16 * MB:16 * MB + 4], b"data")
            self.assertEqual(area[16 * MB + 4:16 * MB + 8], bytes(4), "populating writes nothing")
        finally:
            part.release()

    @unittest.skipUnless(sys.platform.startswith("linux"), "transparent huge pages are Linux's")
    def test_big_buffers_get_huge_pages(self):
        try:
            with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
                mode = f.read()
        except OSError:
            self.skipTest("no transparent huge pages here")
        if "[never]" in mode:
            self.skipTest("transparent huge pages are off here")
        n = 64 * MB
        obj, view = self.os.allocate(n, "b")
        if self.os._new[0] is None or self.os._madvise[0] is None:
            self.skipTest("no C API or madvise here")
        view[:] = b"x" * n
        import ctypes
        addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
        # madvise splits the mapping: look in the advised part.
        inner = (addr + self.os.HUGE - 1) & ~(self.os.HUGE - 1)
        self.assertGreater(mapping_kb(inner, "AnonHugePages:"), 0)


def mapping_kb(addr, field):
    """A field of /proc/self/smaps ("Rss:") for the mapping that holds
    addr, in KiB."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == field:
                return int(line.split()[1])
    return 0


class Holder(object):
    def __init__(self, v):
        self.v = v


class PB(bytearray):
    """Gives a PickleBuffer, as numpy arrays do."""

    def __reduce_ex__(self, protocol):
        return type(self), (pickle.PickleBuffer(self),), None


if __name__ == "__main__":
    unittest.main()
