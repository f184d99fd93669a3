"""
Values that may come now or later.

The seams that answer per request (authenticators, authorizers, admission plugins,
filters) may answer at once or with a Deferred: a static token is a dict lookup, a JWKS
fetch or an authorization webhook is a network call.  ``then`` keeps the first case free
of Deferred overhead on the hot path and the second correct.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred


def then(result, callback, *args):
    """``callback(result, *args)`` at once, or when ``result`` fires if it is a Deferred."""
    if isinstance(result, Deferred):
        return result.addCallback(callback, *args)
    return callback(result, *args)
