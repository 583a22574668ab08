import unittest

import base64
import io
import sys

from replhub_toolkit import display as d
from replhub_toolkit.display import Lines, Text, show


class DisplayTest(unittest.TestCase):
    def test_text_shows_itself_and_stays_a_str(self):
        t = Text("a\nb\n")
        self.assertEqual(show(t), "a\nb\n")
        self.assertIs(type(show(t)), str)
        self.assertEqual(t + "c", "a\nb\nc")
        self.assertEqual(t.splitlines(), ["a", "b"])
        self.assertIsInstance(t, str)

    def test_lines_show_one_a_line_and_stay_a_list(self):
        ls = Lines(["x", "y"])
        self.assertEqual(show(ls), "x\ny")
        self.assertEqual(show(Lines()), "")
        self.assertEqual(ls[1], "y")
        self.assertIsInstance(ls, list)

    def test_other_values_use_repr(self):
        for v in (3, "plain", ["a"], None, str, Text):
            self.assertIsNone(show(v), v)

    def test_any_type_can_show_itself(self):
        class Table(object):
            def __replhub_show__(self):
                return "a | b"
        self.assertEqual(show(Table()), "a | b")
        self.assertIsNone(show(Table))


class Png(object):
    def _repr_png_(self):
        return b"\x89PNG-ish", {"width": 3}


class Both(object):
    def _repr_mimebundle_(self, include=None, exclude=None):
        self.asked = (include, exclude)
        return {"image/png": base64.b64encode(b"from-bundle").decode("ascii"),
                "text/plain": "Both()"}, {}

    def _repr_png_(self):
        return b"from-method"

    def _repr_html_(self):
        return "<b>x</b>"


class Anything(object):
    """Answers every attribute, as a mock does."""

    def __getattr__(self, name):
        return lambda *a, **k: "<b>%s</b>" % name


class Broken(object):
    def _repr_png_(self):
        raise ValueError("no")

    def _repr_html_(self):
        return None


class Html(object):
    def _repr_html_(self):
        return "<i>h</i>"


class HtmlWithRepr(Html):
    def __repr__(self):
        return "HtmlWithRepr()"


class RichTest(unittest.TestCase):
    def setUp(self):
        d.take()

    def test_methods_and_tuples(self):
        self.assertEqual(d.bundle(Png()), {"image/png": b"\x89PNG-ish"})
        self.assertEqual(d.richest(Png()), ("image/png", b"\x89PNG-ish"))

    def test_mimebundle_first_then_methods_include_exclude(self):
        b = Both()
        got = d.bundle(b, include=None, exclude=["text/html"])
        self.assertEqual(got, {"image/png": b"from-bundle"})
        self.assertEqual(b.asked, (None, ["text/html"]))
        self.assertEqual(d.bundle(Both(), include=["text/html"]), {"text/html": b"<b>x</b>"})

    def test_classes_and_mocks_have_no_representations(self):
        self.assertEqual(d.bundle(Png), {})
        self.assertEqual(d.bundle(Anything()), {})

    def test_a_failing_method_is_noted_and_skipped(self):
        err, sys.stderr = sys.stderr, io.StringIO()
        try:
            self.assertEqual(d.bundle(Broken()), {})
            self.assertIn("_repr_png_ raised ValueError: no", sys.stderr.getvalue())
        finally:
            sys.stderr = err

    def test_html_is_not_asked_of_an_object_whose_repr_says_something(self):
        asked = []

        class Frame(object):
            def _repr_html_(self):
                asked.append(1)
                return "<table></table>"

            def __repr__(self):
                return "Frame()"
        self.assertIsNone(d.richest(Frame()))
        self.assertEqual(asked, [])

    def test_html_stands_in_only_for_a_repr_that_says_nothing(self):
        self.assertEqual(d.richest(Html()), ("text/html", b"<i>h</i>"))
        self.assertIsNone(d.richest(HtmlWithRepr()))
        self.assertTrue(d.value(Html()))
        self.assertFalse(d.value(HtmlWithRepr()))
        self.assertEqual(d.take(), ([("text/html", b"<i>h</i>")], 0))

    def test_display_queues_and_prints(self):
        out, sys.stdout = sys.stdout, io.StringIO()
        try:
            d.display(Png(), 42, Text("t"), {"image/jpeg": base64.b64encode(b"jj")}, raw=False)
            d.display({"text/markdown": "# m", "text/plain": "m"}, {"text/plain": "only"}, raw=True)
            printed = sys.stdout.getvalue()
        finally:
            sys.stdout = out
        self.assertEqual(printed.splitlines()[:2], ["42", "t"])
        self.assertIn("only", printed)
        items, dropped = d.take()
        self.assertEqual(items, [("image/png", b"\x89PNG-ish"), ("text/markdown", b"# m")])
        self.assertEqual(dropped, 0)
        self.assertEqual(d.take(), ([], 0))

    def test_bounds(self):
        for _ in range(d.MAX_ITEMS + 3):
            d.add("image/png", b"x")
        items, dropped = d.take()
        self.assertEqual((len(items), dropped), (d.MAX_ITEMS, 3))
        self.assertFalse(d.add("image/png", b"x" * (d.MAX_BYTES + 1)))
        d.add("text/html", b"h" * (d.TEXT_CAP + 10))
        items, dropped = d.take()
        self.assertEqual((len(items[0][1]), dropped), (d.TEXT_CAP, 1))

    def test_json(self):
        class J(object):
            def _repr_json_(self):
                return {"a": [1, 2]}
        self.assertEqual(d.richest(J()), ("application/json", b'{\n "a": [\n  1,\n  2\n ]\n}'))


class WorkerTwinTest(unittest.TestCase):
    def test_the_worker_looks_for_the_methods_display_uses(self):
        # The worker keeps its own list so that it need not load display to
        # look at a value; it must name the same methods.
        import ast
        import os
        path = os.path.join(os.path.dirname(d.__file__), "..", "worker.py")
        with open(path) as f:
            tree = ast.parse(f.read())
        found = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", "") == "_RICH_METHODS" for t in n.targets)]
        self.assertEqual(found, [("_repr_mimebundle_",) + tuple(m for _, m in d._METHODS)])


if __name__ == "__main__":
    unittest.main()
