"""
Small building blocks with no other home, each depending on nothing of platformd above
``goformat``: values now-or-later (``deferreds``), work on the loop in slices (``slices``),
identifiers (``ids``), rate-limited logs (``ratelog``), label selectors, warning headers and
the outbound HTTP client.  Upstream keeps the same kind of parts under ``pkg/util``.
"""
