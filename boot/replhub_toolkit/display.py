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


# -- rich results ------------------------------------------------------------
#
# A cell's last value, and each object given to display(), is also shown by
# its richest representation, by IPython's conventions: _repr_mimebundle_
# (a dict, or a (data, metadata) tuple; include and exclude passed on), then
# the _repr_png_, _repr_jpeg_, _repr_svg_, _repr_markdown_, _repr_html_ and
# _repr_json_ methods (each may return None, the data, or a (data, metadata)
# tuple), and a matplotlib figure as a PNG (mplinline.py).  What is shown
# goes to the hub as the cell's display items (MIME type + bytes) in its done
# frame; the hub bounds images, the CLI writes them to files, MCP returns
# image blocks.
#
# One representation an object: its first image (PNG, JPEG, SVG) if it has
# one; else its Markdown; else its HTML or JSON, but only where its repr
# says nothing (object's own "<X object at 0x...>"): a DataFrame's repr
# reads better as text than its HTML table does.

IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
TEXTS = ("text/markdown", "text/html", "application/json")
_METHODS = (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
            ("image/svg+xml", "_repr_svg_"), ("text/markdown", "_repr_markdown_"),
            ("text/html", "_repr_html_"), ("application/json", "_repr_json_"))

# Bounds on what one cell sends (the hub's are the same or wider): items
# past them are counted, and the reply says how many were left out.
MAX_ITEMS = 16
MAX_BYTES = 32 << 20    # all of a cell's items
TEXT_CAP = 1 << 20      # one text item (HTML before the hub reduces it)

import threading as _threading  # noqa: E402

from replhub_toolkit import held as _held  # noqa: E402

_lock = _threading.Lock()
_items = []          # (mime, bytes) shown since the last take()
_size = [0, 0]       # their bytes, and how many were left out
_shown = set()       # ids of the figures shown since the last take()


def _real_method(obj, name):
    """obj's method name, IPython's way: not on a class, and not on an
    object that answers every attribute (a mock, a proxy)."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(obj, "_replhub_no_such_method_canary_", None) is not None:
            return None
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def _data(mime, value):
    """A representation as bytes, or None. Binary images come as bytes, or
    as base64 text in a mime bundle; JSON as data, dumped here."""
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]  # (data, metadata)
    if value is None:
        return None
    if mime == "application/json":
        import json
        if isinstance(value, (bytes, str)):
            value = value if isinstance(value, str) else value.decode("utf-8", "replace")
            return value.encode("utf-8")
        return json.dumps(value, indent=1, default=repr, ensure_ascii=False).encode("utf-8")
    if mime in ("image/png", "image/jpeg"):
        if isinstance(value, str):
            import base64
            import binascii
            try:
                return base64.b64decode(value.encode("ascii"), validate=False)
            except (ValueError, binascii.Error):
                return None
        return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value.encode("utf-8", "backslashreplace") if isinstance(value, str) else None


def _note(what, e):
    import sys
    sys.stderr.write("[display: %s raised %s: %s]\n" % (what, type(e).__name__, str(e)[:200]))


def bundle(obj, include=None, exclude=None, only=IMAGES + TEXTS):
    """obj's representations as {mime: bytes}, among those of only (its
    _repr_*_ methods of other types are not called)."""
    import sys
    wanted = [m for m in only
              if (include is None or m in include) and (exclude is None or m not in exclude)]
    out = {}
    m = _real_method(obj, "_repr_mimebundle_")
    if m is not None:
        try:
            got = m(include=include, exclude=exclude)
        except Exception as e:
            _note("_repr_mimebundle_", e)
            got = None
        if isinstance(got, tuple) and len(got) == 2:
            got = got[0]
        if isinstance(got, dict):
            for mime in wanted:
                if mime in got:
                    d = _data(mime, got[mime])
                    if d is not None:
                        out[mime] = d
    for mime, name in _METHODS:
        if mime in out or mime not in wanted:
            continue
        m = _real_method(obj, name)
        if m is None:
            continue
        try:
            d = _data(mime, m())
        except Exception as e:
            _note(name, e)
            continue
        if d is not None:
            out[mime] = d
    if "image/png" in wanted and "image/png" not in out and "matplotlib.figure" in sys.modules:
        figure = getattr(sys.modules["matplotlib.figure"], "Figure", None)
        if figure is not None and isinstance(obj, figure):
            from replhub_toolkit import mplinline
            d = mplinline.png(obj)
            if d is not None:
                out["image/png"] = d
                _shown.add(id(obj))
    return out


def _says_nothing(obj):
    """Whether obj's repr is object's own: "<X object at 0x...>"."""
    return type(obj).__repr__ is object.__repr__


def richest(obj, include=None, exclude=None):
    """(mime, bytes) of obj's one representation to show, or None. An
    object whose repr says something is not asked for HTML or JSON (a
    DataFrame's HTML table costs, and would be thrown away)."""
    only = IMAGES + TEXTS if _says_nothing(obj) else IMAGES + ("text/markdown",)
    reps = bundle(obj, include, exclude, only)
    for mime in only:
        if mime in reps:
            return mime, reps[mime]
    return None


def add(mime, data):
    """Queue one item for the cell's done frame, within the bounds."""
    if mime not in IMAGES and len(data) > TEXT_CAP:
        data = data[:TEXT_CAP]
    with _held(), _lock:  # user code's: see held
        if len(_items) >= MAX_ITEMS or _size[0] + len(data) > MAX_BYTES:
            _size[1] += 1
            return False
        _items.append((mime, data))
        _size[0] += len(data)
    return True


def take():
    """The items queued since the last take, and how many were left out."""
    with _held(), _lock:
        items, dropped = list(_items), _size[1]
        del _items[:]
        _size[0] = _size[1] = 0
        _shown.clear()
    return items, dropped


def display(*objs, **kwargs):
    """Show each object by its richest representation (an image, its
    Markdown, or HTML or JSON for an object whose repr says nothing); one
    without any is printed as its repr. include and exclude (lists of MIME
    types) choose among representations, as in IPython; raw=True takes each
    object as a {mime: data} bundle already made."""
    include, exclude = kwargs.get("include"), kwargs.get("exclude")
    for obj in objs:
        if kwargs.get("raw") and isinstance(obj, dict):
            for mime in IMAGES + TEXTS:
                if mime in obj and (include is None or mime in include) and (exclude is None or mime not in exclude):
                    d = _data(mime, obj[mime])
                    if d is not None:
                        add(mime, d)
                        break
            else:
                if "text/plain" in obj:
                    print(obj["text/plain"])
            continue
        got = richest(obj, include, exclude)
        if got is not None:
            add(*got)
        else:
            text = show(obj)
            print(text if text is not None else repr(obj))


def value(obj):
    """A cell's last value: queue its representation; True if that stands
    for the value (a text form), so that no Out[n] repeats it. A figure
    the cell showed already is not shown again."""
    if id(obj) in _shown:
        return False
    got = richest(obj)
    if got is None:
        return False
    add(*got)
    return got[0] in TEXTS
