"""
Go's forms of text and numbers: how upstream's Go code reads a client's JSON and numbers and
writes its messages and durations.  Each module here exists because a client or a
conformance test sees the difference between Go's form and Python's (``%q`` quoting, float
formatting, 64-bit overflow, ``1h30m``).  The bottom of the package: imports nothing else
from ``platformd``.
"""
