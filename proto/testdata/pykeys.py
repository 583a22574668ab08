"""Lists the frame keys the Python that travels writes and reads, by
reading its source (ast), for proto's TestPythonKeys.

Written: every dict literal with a constant "op" gives that op's keys;
keys assigned later to the same variable (done["rss"] = ...) and keyword
arguments of .update(op=...) count too; so do the keyword arguments of
Link.request(...) calls, which become a "req" frame's keys.
Read: every header.get("k") / header["k"] (and h, msg) is a key the worker
reads from a frame the hub sent.
Prints JSON: {"sent": {op: [keys]}, "read": [keys]}.
"""
import ast
import json
import sys

FRAME_NAMES = {"header", "h"}
REQUEST_SKIP = {"blob", "stream"}


def const(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Str):  # Python < 3.8
        return node.s
    return None


def key(sub):
    """The constant key of a subscript, on every Python's ast."""
    sl = sub.slice
    if sl.__class__.__name__ == "Index":  # Python < 3.9
        sl = sl.value
    return const(sl)


def main(paths):
    sent, read = {}, set()
    for path in paths:
        tree = ast.parse(open(path).read(), path)
        # variable name -> op, over the whole file: the same name (done)
        # is the same frame in the functions that pass it on.
        bound = {}
        for fn in (tree, tree):  # twice: names bound later in the file count too
            for node in ast.walk(fn):
                if isinstance(node, ast.Dict):
                    keys = [const(k) for k in node.keys if k is not None]
                    if "op" in keys:
                        op = const(node.values[keys.index("op")])
                        if op:
                            sent.setdefault(op, set()).update(k for k in keys if k)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                    keys = [const(k) for k in node.value.keys if k is not None]
                    if "op" in keys:
                        op = const(node.value.values[keys.index("op")])
                        for t in node.targets:
                            if isinstance(t, ast.Name) and op:
                                bound[t.id] = op
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                and t.value.id in bound):
                            k = key(t)
                            if k:
                                sent.setdefault(bound[t.value.id], set()).add(k)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    kw = {k.arg: k.value for k in node.keywords if k.arg}
                    if node.func.attr == "update" and "op" in kw and const(kw["op"]):
                        sent.setdefault(const(kw["op"]), set()).update(kw)
                    if node.func.attr == "request":
                        sent.setdefault("req", set()).update(k for k in kw if k not in REQUEST_SKIP)
                    if (node.func.attr == "get" and isinstance(node.func.value, ast.Name)
                            and node.func.value.id in FRAME_NAMES and node.args and const(node.args[0])):
                        read.add(const(node.args[0]))
                if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                        and isinstance(node.value, ast.Name) and node.value.id in FRAME_NAMES):
                    k = key(node)
                    if k:
                        read.add(k)
    print(json.dumps({"sent": dict((k, sorted(v)) for k, v in sent.items()), "read": sorted(read)}))


main(sys.argv[1:])
