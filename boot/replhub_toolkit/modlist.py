"""replhub toolkit: modules(), the list of replhub's modules.

A module is a helper bigger than a toolkit function, or one that serves
one site: `from replhub import NAME` imports it in any session, here, as
root or on a host, with nothing installed there. The shipped ones come with
replhub; the user's are the NAME.py files of ~/.config/replhub/modules/ and
shadow a shipped one of the same name. The hub answers the listing (see
package modules). Standard library only, Python 3.6+.
"""
import collections
import json

__all__ = ["modules", "HELP"]

HELP = {"modules": "modules(): the modules `from replhub import NAME` imports, shipped and yours"}

# hub_request(kind, **fields) -> (header, data); set by the toolkit.
HUB_REQUEST = None

Module = collections.namedtuple("Module", "name doc user shadows error")


class ModuleList(list):
    """modules()'s answer: a list of Module, shown as the hub words it."""

    text = ""

    def __replhub_show__(self):
        return self.text or "\n".join("%s  %s" % (m.name, m.doc) for m in self)


def modules():
    """Every module `from replhub import NAME` finds, shipped and yours,
    with the first line of its docstring."""
    if HUB_REQUEST is None:
        raise RuntimeError("modules(): this session cannot ask the hub")
    header, data = HUB_REQUEST("modules")
    out = ModuleList(Module(d.get("name", ""), d.get("doc", ""), bool(d.get("user")), bool(d.get("shadows")),
                            d.get("error", "")) for d in json.loads(bytes(data or b"[]").decode("utf-8")))
    out.text = header.get("message") or ""
    return out
