"""
``Call``: one API request as the handlers see it: the Twisted request, its
``RequestContext`` (what it asks, who asks, dry run, field manager ...), the kind, and
the response's negotiation.
"""

from __future__ import annotations

from typing import Optional

from platformd import errors
from platformd.goformat import gonumbers
from platformd.util import warningheaders
from platformd.api import query


class Call:
    __slots__ = ("request", "context", "info", "user", "kind", "negotiator", "accept",
                 "pretty", "gates", "_args")

    def __init__(self, context, negotiator, gates):
        request = context.request
        self.request = request
        self.context = context
        self.gates = gates
        self.accept = request.getHeader(b"accept")
        self.info = context.info
        self.user = context.user
        self.kind = None
        self.negotiator = negotiator
        self._args = request.args
        self.pretty = query.pretty_requested(request)

    def indented(self, choice) -> bool:
        """Whether the response as ``choice`` is indented (query, User-Agent or Accept)."""
        return self.pretty or choice.pretty

    def pick(self, views):
        """The best acceptable (codec, view) among plain and ``views``; 406 if none."""
        return self.negotiator.pick(self.accept, views, self.kind)

    def authorize_as(self, verb: str):
        """
        Authorize this request again as ``verb`` (None, or a Deferred): an apply that
        creates is a ``create`` (spec 2.1.10), so it needs that permission too.
        """
        return self.context.authorize_as(verb)

    def arg(self, name: str) -> Optional[str]:
        """The first value of query parameter ``name`` (str), or None when absent."""
        values = self._args.get(name.encode())
        if not values:
            return None
        return values[0].decode("utf-8", "replace")

    def has_arg(self, name: str) -> bool:
        return name.encode() in self._args

    def values(self, name: str):
        """
        Every value of query parameter ``name`` (bytes), or None when absent; a bare
        ``?dryRun`` (no ``=``) is one empty value, as upstream (``query.values``).
        """
        return query.values(self.request, name.encode())

    def bool_arg(self, name: str) -> bool:
        """A boolean parameter, read as upstream does (``query.flag``)."""
        return query.flag(self.values(name))

    def int_arg(self, name: str) -> Optional[int]:
        """
        An int64 parameter (None when absent), read as upstream's parameter codec reads
        it (``Convert_Slice_string_To_int64``: ``strconv.ParseInt``, an empty value
        included); one that does not parse is 400 in ``ParseInt``'s words.
        """
        value = self.arg(name)
        if value is None:
            return None
        try:
            return gonumbers.parse_int(value)
        except gonumbers.NumError as e:
            raise errors.bad_request(str(e)) from None

    def warn(self, text: str) -> None:
        """
        Add an RFC 7234 ``Warning: 299 - "text"`` header now, as upstream's warning
        recorder writes each warning into the response's headers when it is added: it
        goes out with whatever the request answers, an error too (a body with an unknown
        field that then fails validation is a 422 with its warning; spec 4.8.4 is about a
        body that cannot be decoded, which warns of nothing).
        """
        warningheaders.add(self.request.responseHeaders, text)
