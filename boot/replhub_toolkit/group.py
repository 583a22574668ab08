"""replhub toolkit: a group of sessions, NAME@HOST on several hosts,
driven at once (sessions_on). Each method is one request that the hub runs
on every host concurrently; this side only packs the request and unpacks
the answers, a value or an exception per host. Standard library only,
Python 3.6+; loaded at the first sessions_on().
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
        self._failed = {}   # host -> why it could not be opened
        for item in items:
            host = item.get("host")
            self.hosts.append(host)
            if item.get("ok"):
                self._members[host] = item.get("target")
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

    def _fan(self, kind, blob=None, **fields):
        """Send one request for every opened host; return {host: (item, blob)}
        and the failures as {host: exception}, each in the hosts' order."""
        hosts = [host for host in self.hosts if host in self._members]
        parts = {}
        if hosts:
            header, data = relay._need_link().request(kind, blob, targets=[self._members[host] for host in hosts], **fields)
            view, off = memoryview(data or b""), 0
            for host, item in zip(hosts, header.get("fan") or []):
                n = item.get("len") or 0
                parts[host] = (item, view[off:off + n])
                off += n
        return parts

    def _collect(self, parts, value):
        out = {}
        for host in self.hosts:
            if host in self._failed:
                out[host] = self._failed[host]
                continue
            item, blob = parts.get(host, ({"error": "no answer"}, None))
            if not item.get("ok"):
                out[host] = relay.HubError(item.get("error") or "refused")
                continue
            try:
                out[host] = value(item, blob)
            except Exception as e:
                out[host] = e
        return out

    def call(self, f_or_name, *args, **kwargs):
        """Run f (or the function of that name there) in every session;
        {host: its value} (with into=, the values stay there: None)."""
        into = kwargs.pop("into", None)
        blob, src, cells = relay._call_parts(f_or_name, args, kwargs)
        parts = self._fan("call", blob, into=into, src=src, cells=cells)
        if into is not None:
            return self._collect(parts, lambda item, data: None)
        return self._collect(parts, lambda item, data: relay.loads(data, item.get("py")))

    def put(self, *pair, **names):
        """Copy names into every session: put(name, obj) or put(x=obj, ...);
        {host: None, or why it failed}."""
        if pair:
            if len(pair) != 2:
                raise TypeError("put() takes a name and an object, or name=object pairs")
            names[pair[0]] = pair[1]
        return self._collect(self._fan("put", relay.dumps(names), names=sorted(names)), lambda item, data: None)

    def get(self, *names):
        """Copies of names from every session: {host: value}, or {host:
        tuple} for several names."""
        if not names:
            raise TypeError("get() needs at least one name")

        def value(item, data):
            values = relay.loads(data, item.get("py"))
            return values[0] if len(names) == 1 else tuple(values)
        return self._collect(self._fan("get", names=list(names)), value)

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
