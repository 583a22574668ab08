import unittest

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


if __name__ == "__main__":
    unittest.main()
