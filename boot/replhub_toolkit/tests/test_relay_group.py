import pickle
import unittest

from replhub_toolkit import relay


class FakeLink(object):
    """Answers a group's requests as the hub would: one item per target,
    their blobs one after another."""

    def __init__(self, answers):
        self.answers = answers  # target -> (ok, value or error)
        self.sent = []

    def start(self, kind, blob=None, opens=None, **fields):
        return len(self.sent), self.request(kind, blob, **fields)

    def finish(self, rid, answer):
        return answer

    def request(self, kind, blob=None, stream=None, **fields):
        self.sent.append((kind, fields))
        if kind == "open":
            items = []
            for host in ["a1", "a2", "a3"]:
                ok = host != "a3"
                items.append({"host": host, "target": "p@" + host, "ok": ok, "error": None if ok else "refused"})
            return {"ok": True, "fan": items}, None
        items, data = [], b""
        for target in fields["targets"]:
            ok, value = self.answers[target]
            if ok:
                blob = pickle.dumps([value] if kind == "get" else value, protocol=4)
                items.append({"target": target, "ok": True, "py": relay.PY, "len": len(blob)})
                data += blob
            else:
                items.append({"target": target, "ok": False, "error": value})
        return {"ok": True, "fan": items}, data


class GroupTest(unittest.TestCase):
    def setUp(self):
        self.saved = relay._link
        self.link = FakeLink({"p@a1": (True, 1), "p@a2": (False, "ValueError: no")})
        relay._link = self.link

    def tearDown(self):
        relay._link = self.saved

    def test_values_and_failures_by_host(self):
        g = relay.sessions_on("a[1-3]", name="p")
        self.assertEqual(g.hosts, ["a1", "a2", "a3"])
        self.assertEqual(repr(g), "<group 'p' on 2 hosts; 1 could not be opened: a3>")
        got = g.get("x")
        self.assertEqual(list(got), ["a1", "a2", "a3"])
        self.assertEqual(got["a1"], 1)
        self.assertIsInstance(got["a2"], relay.HubError)
        self.assertIn("ValueError: no", str(got["a2"]))
        self.assertEqual(str(got["a3"]), "refused")
        kind, fields = self.link.sent[-1]
        self.assertEqual((kind, fields["targets"]), ("get", ["p@a1", "p@a2"]))

    def test_call_by_name_and_put(self):
        g = relay.sessions_on(["a1", "a2", "a3"], name="p")
        self.assertEqual(g.call("f", 2)["a1"], 1)
        self.assertIsNone(g.call("f", into="kept")["a1"])
        self.link.answers["p@a1"] = (True, None)
        self.assertIsNone(g.put("x", 5)["a1"])
        self.assertEqual(self.link.sent[-1][1]["names"], ["x"])
        with self.assertRaises(TypeError):
            g.put("x")


if __name__ == "__main__":
    unittest.main()
