import sys
import threading
import unittest

from replhub_toolkit import relay


class ReplyTest(unittest.TestCase):

    def test_whole_once_set(self):
        """A reply seen set, by is_set or wait, has its data too: before
        3.10 another thread can run between two stores of one statement."""
        n = 200000
        replies = [relay.Reply() for _ in range(n)]
        data = b"x"

        def setter():
            for r in replies:
                r.set({"ok": True}, data)

        saved = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            t = threading.Thread(target=setter)
            t.start()
            torn = 0
            for i, r in enumerate(replies):
                if i % 2:
                    r.wait()
                else:
                    while not r.is_set():
                        pass
                if r.data is not data:
                    torn += 1
            t.join()
        finally:
            sys.setswitchinterval(saved)
        self.assertEqual(torn, 0)

    def test_set_once(self):
        r = relay.Reply()
        r.set({"ok": True}, b"first")
        r.set({"ok": False}, b"second")  # a late one (Link.fail) changes nothing
        r.wait()
        self.assertEqual((r.header, r.data), ({"ok": True}, b"first"))


if __name__ == "__main__":
    unittest.main()
