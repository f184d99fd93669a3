"""
RFC 7234 ``Warning: 299 - "text"`` headers, as upstream's warning recorder writes them
(``endpoints/filters/warning.go``): each text once per response, its quotes and
backslashes escaped.  Upstream's recorder sits outside authentication, so a warning an
authenticator records reaches even the 401; both the handlers and the authenticators
write through here.
"""

from __future__ import annotations


def add(headers, text: str) -> None:
    """Add ``text``'s Warning header to ``headers`` (twisted ``Headers``) unless present."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    value = f'299 - "{escaped}"'.encode()
    if value not in (headers.getRawHeaders(b"Warning") or ()):
        headers.addRawHeader(b"Warning", value)
