import sys
import threading
import unittest

from replhub_toolkit import relay

MB = 1 << 20


class FakeHub(object):
    """A channel that answers a group's streamed request as the hub and its
    targets would, on the caller's own thread: each part of request rid
    is told under its own id, as the reader thread would route it. A put
    part says it is ready, acknowledges every chunk and ends; a get part
    sends its value in chunks, waits for their acks and ends; the parts in
    fail end with their error at once."""

    def __init__(self, kind, n, fail=(), value=None):
        self.kind, self.n, self.fail, self.value = kind, n, set(fail), value
        self.link = relay.Link(self)
        self.rid = None
        self.got = {}    # part -> bytes taken
        self.acked = {}  # part -> acks from the caller
        self.ended = set()
        self.cancels = []

    def part(self, i):
        from replhub_toolkit import objstream
        return objstream.part_id(self.rid, i)

    def parts(self):
        return [self.part(i) for i in range(self.n)]

    def tell(self, header, data=None):
        if header.get("op") == "chunk":
            view = relay.chunk_into(header, len(data))
            view[:] = data
            data = view
        if header.get("op") == "reply" and header.get("id") == self.rid:
            self.link.dispatch(header, data)
        else:
            relay.route(header, data)

    def end(self, i, ok=True, error=None):
        self.ended.add(i)
        self.tell({"op": "reply", "id": self.part(i), "ok": ok, "error": error})
        if len(self.ended) == self.n:
            fan = [{"ok": j not in self.fail, "error": "failed" if j in self.fail else None, "py": relay.PY}
                   for j in range(self.n)]
            self.tell({"op": "reply", "id": self.rid, "ok": True, "fan": fan})

    def send(self, header, data=None):
        op = header.get("op")
        if op == "req" and header.get("kind") == "cancel":
            self.cancels.append(header["id"])
            self.fail.add(self.parts().index(header["id"]))
            self.end(self.parts().index(header["id"]), False, "cancelled")
        elif op == "req":
            self.rid = header["id"]
            self.size = sum(header.get("bufs") or [])
            for i in range(self.n):
                if i in self.fail:
                    self.end(i, False, "failed")
                elif self.kind == "put":
                    self.tell({"op": "reply", "id": self.part(i), "ok": True, "first": True})
                else:
                    from replhub_toolkit import objstream
                    bufs = objstream.Buffers()
                    blob = relay.dumps(self.value, bufs)
                    self.tell({"op": "reply", "id": self.part(i), "ok": True, "first": True, "py": relay.PY,
                               "bufs": objstream.sizes(bufs), "kinds": objstream.kinds(bufs)}, blob)
                    self.acked[i] = 0
                    seq = 0
                    for raw in bufs:
                        for off in range(0, raw.nbytes, 3 * MB):
                            self.tell({"op": "chunk", "id": self.part(i), "seq": seq}, bytes(raw[off:off + 3 * MB]))
                            seq += 1
                    self.chunks = seq
        elif op == "chunk":
            i = self.parts().index(header["id"])
            self.got[i] = self.got.get(i, 0) + len(data)
            self.tell({"op": "ack", "id": header["id"], "seq": header["seq"]})
            if self.got[i] == self.size:
                self.end(i)
        elif op == "ack":
            i = self.parts().index(header["id"])
            self.acked[i] += 1
            if self.acked[i] == self.chunks:
                self.end(i)


@unittest.skipIf(sys.version_info < (3, 8), "objects stream on Python 3.8+ only")
class Fan(unittest.TestCase):
    def setUp(self):
        from replhub_toolkit import objstream
        self.os = objstream

    def test_put_sends_every_part_the_same_buffers(self):
        hub = FakeHub("put", 3, fail=[1])
        bufs = self.os.Buffers()
        obj = {"x": bytes(range(256)) * (20 * MB // 256)}
        blob = relay.dumps(obj, bufs)
        (header, _), parts = self.os.fan(hub.link, "put", blob, bufs, False, 3, {"targets": ["a", "b", "c"]})
        self.assertEqual([item["ok"] for item in header["fan"]], [True, False, True])
        self.assertEqual(hub.got, {0: 20 * MB, 2: 20 * MB}, "the failed part is sent nothing")
        self.assertEqual([p.error for p in parts], [None, "failed", None])
        self.assertFalse(relay.streams, "every part's stream is closed")

    def test_get_takes_each_value(self):
        value = [bytearray(b"v" * (7 * MB + 5))]
        hub = FakeHub("get", 3, fail=[0], value=value)
        (header, _), parts = self.os.fan(hub.link, "get", None, None, True, 3, {"targets": ["a", "b", "c"]})
        self.assertEqual(hub.acked, {1: 3, 2: 3})
        self.assertIsNone(parts[0].value)
        for p in parts[1:]:
            self.assertEqual(relay.loads(*p.value), value)
        self.assertEqual(hub.cancels, [])

    def test_a_part_out_of_step_is_cancelled_alone(self):
        hub = FakeHub("put", 2)
        bufs = self.os.Buffers()
        blob = relay.dumps(bytes(2 * MB), bufs)
        real = hub.send

        def send(header, data=None):
            real(header, data)
            if header.get("op") == "req" and header.get("kind") == "put":
                hub.tell({"op": "reply", "id": hub.part(0), "ok": True, "first": True, "bufs": [5]}, b"")
        hub.send = send
        hub.link.chan = hub
        (header, _), parts = self.os.fan(hub.link, "put", blob, bufs, False, 2, {"targets": ["a", "b"]})
        self.assertEqual(parts[0].error, "the transfer went out of step")
        self.assertIsNone(parts[1].error)
        self.assertEqual([item["ok"] for item in header["fan"]], [False, True])
        self.assertEqual(hub.cancels, [hub.part(0)])

    def test_a_refused_request_ends_at_once(self):
        # The hub refuses the group's request as a whole (too many
        # requests in flight, too many sessions): its reply comes, no part
        # is ever told anything, and fan must not wait for them.
        hub = FakeHub("put", 3)

        def send(header, data=None):
            if header.get("op") == "req" and header.get("kind") == "put":
                hub.rid = header["id"]
                hub.link.dispatch({"op": "reply", "id": hub.rid, "error": "too many requests at once"}, None)
        hub.send = send
        hub.link.chan = hub
        bufs = self.os.Buffers()
        blob = relay.dumps(bytes(2 * MB), bufs)
        out = []

        def run():
            try:
                self.os.fan(hub.link, "put", blob, bufs, False, 3, {"targets": ["a", "b", "c"]})
            except relay.HubError as e:
                out.append(str(e))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(10)
        self.assertFalse(t.is_alive(), "fan still waits for parts the hub never started")
        self.assertEqual(out, ["too many requests at once"])
        self.assertFalse(relay.streams, "every part's stream is closed")


if __name__ == "__main__":
    unittest.main()
