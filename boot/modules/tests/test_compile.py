"""Every shipped module compiles under this Python (they run on 3.6
through 3.13) and opens with a docstring, whose first line modules()
lists."""

import ast
import glob
import os
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Compile(unittest.TestCase):
    def test_every_module(self):
        files = sorted(glob.glob(os.path.join(HERE, "*.py")))
        self.assertTrue(files)
        for path in files:
            with open(path, encoding="utf-8") as f:
                src = f.read()
            tree = ast.parse(src, path)
            compile(tree, path, "exec")
            doc = ast.get_docstring(tree)
            self.assertTrue(doc and doc.strip().splitlines()[0], "%s has no docstring" % path)


if __name__ == "__main__":
    unittest.main()
