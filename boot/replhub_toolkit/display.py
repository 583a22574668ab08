"""replhub toolkit: how a result shows itself.

A cell's value is shown as its repr, unless its type defines
__replhub_show__(): then the worker shows the text that method returns.  The
value stays what it is, so a helper can return something that reads well and
still works as data: Text is a str, Lines a list of str.  Standard library
only, Python 3.6+.
"""


class Text(str):
    """A str shown as itself: file contents, diffs, short reports."""

    __slots__ = ()

    def __replhub_show__(self):
        return str.__str__(self)


class Lines(list):
    """A list of str shown one item a line: paths, matches."""

    def __replhub_show__(self):
        return "\n".join(str(x) for x in self)


def show(value):
    """The text to show for value, or None where its repr will do."""
    method = getattr(type(value), "__replhub_show__", None)
    if method is None:
        return None
    return method(value)
