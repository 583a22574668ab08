import os
import sys
import threading
import time
import unittest

from replhub_toolkit import query


class Session(object):
    """What query.answer reads of the worker's Session, idle."""

    def __init__(self, ns):
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.idle_cond = threading.Condition(lock)
        self.phase, self.queue, self.key = "idle", [], None
        self.querying, self.query_until, self.queries = 0, 0.0, 0
        self.seen_cell, self.cells = 0, None
        self.base_values = {}
        self.ns = ns


USER = '''
import time
def spin():
    while True: pass
class Listing(object):
    __repr__ = lambda s: [None for _ in iter(int, 1)]
class Spinning(object):
    def __repr__(self):
        spin()
def step():
    return 1
class Calling(object):
    def __repr__(self):
        i = 0
        while True:
            i += step()
class Fine(object):
    def __repr__(self):
        return "fine"
'''


def user_ns():
    ns = {"__name__": "__main__"}
    exec(compile(USER, "<cell-1>", "exec"), ns)
    return ns


def runners():
    return [t for t in threading.enumerate() if t.name == "replhub-query-run"]


def cpu():
    t = os.times()
    return t[0] + t[1]


class QueryBoundTest(unittest.TestCase):

    def setUp(self):
        self.ns = user_ns()
        self.sess = Session(self.ns)
        self.saved = (query.BUDGET, query.LONG_TIME, query.QUIT, query._raiser[0])

    def tearDown(self):
        query.BUDGET, query.LONG_TIME, query.QUIT, query._raiser[0] = self.saved

    def ask(self, **header):
        t0 = time.monotonic()
        out = query.answer(self.sess, header)
        return out, time.monotonic() - t0

    def assertNothingRuns(self):
        """No runner thread is left, and none spins."""
        self.assertEqual(runners(), [])
        c = cpu()
        time.sleep(0.3)
        self.assertLess(cpu() - c, 0.15, "a thread spins on")
        self.assertEqual((self.sess.querying, self.sess.queries), (0, 0))

    def test_vars_stops_loops_without_calls(self):
        for cls in ("Listing", "Spinning", "Calling"):
            self.ns.update(a=self.ns[cls](), b=self.ns["Fine"]())
            out, took = self.ask(kind="vars")
            self.assertTrue(out["ok"], out)
            reprs = dict((v["name"], v["repr"]) for v in out["vars"])
            self.assertEqual(reprs["a"], "<repr() took over 0.2s>", cls)
            self.assertEqual(reprs["b"], "fine", cls)
            self.assertLess(took, 2.0, cls)
            self.assertNothingRuns()

    def test_inspect_stops_a_loop(self):
        query.LONG_TIME = 0.25
        out, took = self.ask(kind="inspect", expr="spin()")
        self.assertEqual(out, {"ok": False, "error": "evaluating spin() took over 0.25s"})
        self.assertGreater(took, 0.2)
        self.assertLess(took, 2.0)
        self.assertNothingRuns()
        out, took = self.ask(kind="inspect", expr="[Spinning()]")
        self.assertEqual(out["inspect"]["repr"], "<repr() took over 0.25s>")
        self.assertLess(took, 2.0)
        self.assertNothingRuns()

    def test_c_call_answered_at_the_budget(self):
        """A C call that does not return holds the runner, not the answer:
        the answer comes at the budget, and the runner keeps its place
        among the worker's queries until the call returns and Timeout
        lands."""
        query.BUDGET, query.LONG_TIME, query.QUIT = 0.5, 0.25, 0.5
        out, took = self.ask(kind="inspect", expr="time.sleep(1.5)")
        self.assertFalse(out["ok"])
        self.assertIn("C call", out["error"])
        self.assertGreater(took, query.BUDGET + query.QUIT - 0.1)
        self.assertLess(took, query.BUDGET + query.QUIT + 1.0)
        self.assertEqual(len(runners()), 1)
        self.assertEqual((self.sess.querying, self.sess.queries), (1, 1))
        for t in runners():
            t.join(5)
        self.assertNothingRuns()

    def test_trace_where_no_ctypes(self):
        """Without ctypes, the trace function stops Python code that calls."""
        query._raiser[0] = None
        self.ns.update(a=self.ns["Calling"](), b=self.ns["Fine"]())
        out, took = self.ask(kind="vars")
        reprs = dict((v["name"], v["repr"]) for v in out["vars"])
        self.assertEqual((reprs["a"], reprs["b"]), ("<repr() took over 0.2s>", "fine"))
        self.assertLess(took, 2.0)
        self.assertNothingRuns()

    def test_no_timeout_lands_outside_a_run(self):
        """Runs that end about when their deadline comes: each Timeout set
        lands in its run (or its end), never in the code after it."""
        raiser = query._async_raiser()
        if raiser is None:
            self.skipTest("no ctypes")
        d = query.Deadline(30, raiser)
        stray, stopped, done = [], [0], []

        def work(until):
            while time.monotonic() < until:
                pass

        def runner():
            try:
                for i in range(300):
                    until = time.monotonic() + 0.002 + (i % 7) * 0.0003
                    try:
                        d.run(lambda: work(until), 0.003)
                    except query.Timeout:
                        stopped[0] += 1
                    try:
                        work(time.monotonic() + 0.002)
                    except query.Timeout:
                        stray.append(i)
            except query.Timeout:
                stray.append("past the loop")
            finally:
                done.append(True)
                with d.cond:
                    d.cond.notify_all()

        t = threading.Thread(target=runner)
        t.start()
        self.assertTrue(d.watch(lambda: done, 0))
        t.join()
        self.assertEqual(stray, [])
        self.assertGreater(stopped[0], 0, "some runs were stopped")
        self.assertLess(stopped[0], 300, "some ended first")
        self.assertTrue(traced_loop_stops(), "a trace function sees each turn of a loop still")

    def test_timeout_set_as_the_run_ends(self):
        """The watcher takes a run whose code has just returned, and sets
        its Timeout late: the run's end waits for it, and it lands there."""
        raiser = query._async_raiser()
        if raiser is None:
            self.skipTest("no ctypes")
        d = query.Deadline(30, raiser)
        ident = threading.get_ident()

        def watcher(key):
            d.firing = key
            d.live.pop(key)
            time.sleep(0.05)
            raiser(ident, query.Timeout)
            d.firing = None

        def fn():
            key, = d.live
            threading.Thread(target=watcher, args=(key,)).start()
            return "done"
        for _ in range(3):
            self.assertEqual(d.run(fn, 10), "done")
            try:
                for _ in range(100000):
                    pass
                time.sleep(0.1)
            except query.Timeout:
                self.fail("a Timeout landed past its run")
        self.assertTrue(traced_loop_stops())

    def test_async_raiser(self):
        """The thread id is an unsigned long from 3.7, a long before; the
        function is ours: ctypes.pythonapi's keeps its argtypes."""
        raiser = query._async_raiser()
        if raiser is None:
            self.skipTest("no ctypes")
        import ctypes
        self.assertIsNone(ctypes.pythonapi.PyThreadState_SetAsyncExc.argtypes)
        with self.assertRaises(query.Timeout):
            raiser(threading.get_ident(), query.Timeout)
            while True:
                pass
        self.assertTrue(traced_loop_stops())


def traced_loop_stops():
    """Whether a trace function stops a loop of calls (on 3.11, an async
    exception taken back with NULL leaves the eval breaker set, and lines
    untraced)."""
    out = []

    def step():
        return 1

    def calls():
        i = 0
        while True:
            i += step()

    def traced():
        end = time.monotonic() + 0.1

        def trace(frame, event, arg):
            if time.monotonic() > end:
                raise query.Timeout()
            return trace
        sys.settrace(trace)
        try:
            calls()
        except query.Timeout:
            out.append(True)
        finally:
            sys.settrace(None)
    t = threading.Thread(target=traced)
    t.daemon = True
    t.start()
    t.join(2)
    return out == [True]


if __name__ == "__main__":
    unittest.main()
