"""replhub toolkit: a group of sessions, NAME@HOST on several hosts,
driven at once (sessions_on). Each method is one request that the hub runs
on every host concurrently; this side packs the request and unpacks the
answers, a value or an exception per host. Between sessions of the same
Python (3.8+) objects stream as a single session's do (objstream.fan):
pickled once, their big buffers sent to each session as chunks; sessions
of another Python get the one blob. Standard library only, Python 3.6+;
loaded at the first sessions_on().
"""

from replhub_toolkit import relay


class GroupHandle(object):
    """The sessions NAME@HOST of a group, driven at once: each method is one
    request, which the hub runs on every host concurrently. Results come as
    {host: value} in the hosts' order; a host that failed (it could not be
    opened, it is busy, the call raised there) has the exception as its
    value, and the others go on."""

    def __init__(self, name, items):
        self.name = name
        self.hosts = []
        self._members = {}  # host -> session name
        self._python = {}   # host -> its Python's version
        self._failed = {}   # host -> why it could not be opened
        for item in items:
            host = item.get("host")
            self.hosts.append(host)
            if item.get("ok"):
                self._members[host] = item.get("target")
                self._python[host] = (item.get("info") or {}).get("python")
            else:
                self._failed[host] = relay.HubError(item.get("error") or "refused")

    def __repr__(self):
        n = len(self._members)
        text = "<group %r on %d host%s" % (self.name, n, "" if n == 1 else "s")
        if self._failed:
            text += "; %d could not be opened: %s" % (len(self._failed), ", ".join(sorted(self._failed)))
        return text + ">"

    def __len__(self):
        return len(self.hosts)

    def _fan(self, kind, dumps=None, oob=False, **fields):
        """Send kind to every opened host; return {host: (item, load)},
        load() giving that host's value. dumps(bufs) pickles the object
        that goes (bufs None: protocol 4, for any Python). Hosts of this
        same Python (3.8+) get one request whose objects stream
        (objstream.fan) when the object has big buffers, or with oob, the
        values: pickled once, its buffers sent to each as chunks. The
        others get one request with the object's blob, as a single
        session of another Python would."""
        hosts = [host for host in self.hosts if host in self._members]
        fast = [host for host in hosts if relay.streams_with(self._python[host])]
        bufs = blob = None
        if fast and dumps is not None:
            bufs = relay._objstream().Buffers()
            blob = dumps(bufs)
        if not (bufs or (fast and oob)):
            fast = []
        slow = [host for host in hosts if host not in fast]
        link = relay._need_link()
        parts, pending = {}, None
        try:
            if slow:
                pending = link.start(kind, dumps(None) if dumps is not None else None,
                                     targets=[self._members[host] for host in slow], **fields)
            if fast:
                (header, data), streamed = relay._objstream().fan(
                    link, kind, blob, bufs, oob, len(fast),
                    dict(fields, targets=[self._members[host] for host in fast]))
                _unpack(parts, fast, header, data, streamed)
            if pending is not None:
                header, data = link.finish(*pending)
                pending = None
                _unpack(parts, slow, header, data, None)
        finally:
            if pending is not None:
                link.drop(pending[0])
                link.cancel(pending[0])
        return parts

    def _collect(self, parts, value):
        out = {}
        for host in self.hosts:
            if host in self._failed:
                out[host] = self._failed[host]
                continue
            item, load = parts.get(host, ({"error": "no answer"}, None))
            if not item.get("ok"):
                out[host] = relay.HubError(item.get("error") or "refused")
                continue
            try:
                out[host] = value(load)
            except Exception as e:
                out[host] = e
        return out

    def call(self, f_or_name, *args, **kwargs):
        """Run f (or the function of that name there) in every session;
        {host: its value} (with into=, the values stay there: None)."""
        into = kwargs.pop("into", None)
        src, cells = relay._call_notes(f_or_name)

        def dumps(bufs):
            return relay._call_blob(f_or_name, args, kwargs, bufs)
        parts = self._fan("call", dumps, into is None, into=into, src=src, cells=cells)
        if into is not None:
            return self._collect(parts, lambda load: None)
        return self._collect(parts, lambda load: load())

    def put(self, *pair, **names):
        """Copy names into every session: put(name, obj) or put(x=obj, ...);
        {host: None, or why it failed}."""
        if pair:
            if len(pair) != 2:
                raise TypeError("put() takes a name and an object, or name=object pairs")
            names[pair[0]] = pair[1]
        parts = self._fan("put", lambda bufs: relay.dumps(names, bufs), names=sorted(names))
        return self._collect(parts, lambda load: None)

    def get(self, *names):
        """Copies of names from every session: {host: value}, or {host:
        tuple} for several names."""
        if not names:
            raise TypeError("get() needs at least one name")

        def value(load):
            values = load()
            return values[0] if len(names) == 1 else tuple(values)
        return self._collect(self._fan("get", oob=True, names=list(names)), value)

    def session(self, host):
        """The session of one host, as session() would return it."""
        return relay.session(self._members[host])


def sessions_on(hosts, name, sudo=None, python=None, jump=None):
    """Open (or attach to) session NAME@HOST on every host at once: hosts is
    a list of hosts or node sets ("lab-[1-4]", "@group"), or one string.
    Returns a GroupHandle; hosts that could not be opened are in it with
    their error."""
    if isinstance(hosts, str):
        hosts = [hosts]
    header, _ = relay._need_link().request("open", name=name, hosts=list(hosts), sudo=sudo, python=python,
                                     jump=list(jump) if jump is not None else None)
    return GroupHandle(name, header.get("fan") or [])


def _unpack(parts, hosts, header, data, streamed):
    """Put each host's item of a group reply in parts, with what loads its
    value: the part's streamed value (streamed, objstream.Part), or its
    blob in the reply's data."""
    view, off = memoryview(data or b""), 0
    for i, (host, item) in enumerate(zip(hosts, header.get("fan") or [])):
        n = item.get("len") or 0
        blob, off = view[off:off + n], off + n
        part = streamed[i] if streamed else None
        if part is not None and part.error and item.get("ok"):
            item = dict(item, ok=False, error=part.error)
        if part is not None and part.value is not None:
            parts[host] = (item, lambda v=part.value: relay.loads(v[0], v[1], v[2]))
        else:
            parts[host] = (item, lambda b=blob, py=item.get("py"): relay.loads(b, py))
