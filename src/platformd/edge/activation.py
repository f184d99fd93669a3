"""
The sockets a supervisor passed to this process (socket activation), found as
``sd_listen_fds_with_names(3)`` finds them, so that any supervisor that follows that
protocol works, not only systemd:

- ``LISTEN_PID`` must be this process's PID; unset, or another's (the variables were
  inherited from a parent they were meant for), nothing was passed to this process.
- ``LISTEN_FDS`` counts the passed descriptors, from 3 (``SD_LISTEN_FDS_START``) on;
  unset, none.
- ``LISTEN_FDNAMES`` names them, colon-separated, and is optional: systemd always sets
  it (a socket unit's ``FileDescriptorName=``, else the unit's name), other supervisors
  and ``systemd-socket-activate`` without ``--fdname`` do not; each is then
  ``unknown``, as systemd's library says.

Values that do not parse, or names that do not match the count, are an error
(``sd_listen_fds`` answers ``-EINVAL``): sockets may have been passed, and which they are
cannot be told, so the caller must not go on as if none had been.

The variables are read from the environment the process was started with
(``/proc/self/environ``), not from ``os.environ``: importing
``twisted.internet.endpoints`` (twistd's plugin scan does, before any platformd code
runs) removes ``LISTEN_PID`` and ``LISTEN_FDS`` from it, and Twisted keeps the
descriptors for its ``systemd:`` endpoint only when they are named.
"""

from __future__ import annotations

import os
from typing import Mapping

import attrs

from platformd.process.startup import StartupError

#: ``SD_LISTEN_FDS_START``: the first passed descriptor.
FIRST = 3
#: The name of a descriptor passed without ``LISTEN_FDNAMES`` (systemd's).
UNKNOWN = "unknown"


@attrs.frozen
class Passed:
    """One passed descriptor and its name."""

    fd: int
    name: str


def passed(environ: Mapping[bytes, bytes], pid: int) -> list[Passed]:
    """
    The ``Passed`` descriptors ``environ`` (as ``initial_environment``) gives process
    ``pid``, or ``StartupError`` when its variables do not parse or disagree (see
    module docstring).
    """
    if b"LISTEN_PID" not in environ or _number(environ, b"LISTEN_PID") != pid:
        return []
    if b"LISTEN_FDS" not in environ:
        return []
    count = _number(environ, b"LISTEN_FDS")
    if count < 1:
        raise StartupError(f"LISTEN_FDS={count}: not a count of passed sockets")
    names = environ.get(b"LISTEN_FDNAMES")
    if names is None:
        named = [UNKNOWN] * count
    else:
        named = os.fsdecode(names).split(":")
        if len(named) != count:
            raise StartupError(f"LISTEN_FDNAMES names {len(named)} sockets and LISTEN_FDS"
                               f" counts {count}: which socket is which cannot be told")
    return [Passed(FIRST + n, name) for n, name in enumerate(named)]


def _number(environ: Mapping[bytes, bytes], variable: bytes) -> int:
    value = environ[variable]
    try:
        return int(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise StartupError(f"{variable.decode()}={os.fsdecode(value)!r} is not a number"
                           ) from None


def initial_environment() -> Mapping[bytes, bytes]:
    """
    The environment this process was started with (``/proc/self/environ``, see module
    docstring).  Where there is no ``/proc`` (not Linux), ``os.environb``: there the
    variables are found only if nothing has removed them.
    """
    try:
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
    except OSError:
        return os.environb
    pairs = (entry.partition(b"=") for entry in block.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}
