"""replhub boot: starts a session on a host where nothing is installed.

The -c stub (stub.py) read this file and the module table after it from
stdin, byte-exact, and runs this file with PAYLOAD set to that table (JSON:
{"modules": {name: {"src": ..., "pkg": bool}}, "main": name}).  Here the
modules are served from memory by an import hook, their sources registered
with linecache so tracebacks show them, and the worker's main() is run.
A late module ({"late": true}, no "src") is asked of the hub at its first
import, through the importer's fetch (set by the worker).  Nothing is
written on the host.  Standard library only, Python 3.6+.
"""
import json
import linecache
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.util import spec_from_loader


class MemoryImporter(MetaPathFinder, Loader):
    """Finds and loads the payload's modules."""

    def __init__(self, modules):
        self.modules = modules
        self.fetch = None  # fetch(name) -> source, for late modules

    def find_spec(self, name, path=None, target=None):
        mod = self.modules.get(name)
        if mod is None:
            return None
        return spec_from_loader(name, self, origin=self.filename(name),
                                is_package=bool(mod.get("pkg")))

    def filename(self, name):
        mod = self.modules[name]
        return "<replhub>/%s%s" % (name.replace(".", "/"), "/__init__.py" if mod.get("pkg") else ".py")

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        mod = self.modules[name]
        src = mod.get("src")
        if src is None:
            if self.fetch is None:
                raise ImportError("replhub: %s is sent at its first import, and the hub cannot be asked yet" % name)
            src = mod["src"] = self.fetch(name)
        fname = self.filename(name)
        module.__file__ = fname
        if self.modules[name].get("pkg"):
            module.__path__ = []
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        exec(compile(src, fname, "exec"), module.__dict__)


def run(payload):
    table = json.loads(payload.decode("utf-8"))
    importer = MemoryImporter(table["modules"])
    sys.meta_path.insert(0, importer)
    main = __import__(table["main"])
    main.IMPORTER = importer
    main.main(table.get("argv") or ["--stdio"])


run(PAYLOAD)  # noqa: F821 (set by the stub)
