"""
Preparing the pods socket's path (spec 5.1: only local admins may connect).

The directory is created with mode 0750 (an existing one is left as it is: it may be
shared); the socket itself is made 0600 by the caller right after binding.  A socket
file that nobody answers on is what a crash leaves behind and is removed; one that a
live process answers on is refused — grpc would otherwise unlink it and take the path
over from under that process.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

DIRECTORY_MODE = 0o750
SOCKET_MODE = 0o600


class SocketPathError(Exception):
    """The socket path cannot be used; the message says why, in one line."""


def prepare(path: str) -> None:
    """Make ``path`` ready to bind, or raise ``SocketPathError``."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        try:
            os.makedirs(directory, mode=DIRECTORY_MODE)
            os.chmod(directory, DIRECTORY_MODE)  # whatever the umask
        except OSError as e:
            raise SocketPathError(f"cannot create {directory}: {e.strerror}") from None
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SocketPathError(f"{path} exists and is not a socket; remove it or choose "
                              "another --pods-socket")
    if _answers(path):
        raise SocketPathError(f"{path} is served by another running process; stop it or "
                              "choose another --pods-socket")
    os.unlink(path)


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise SocketPathError(f"cannot check {path}: {e.strerror}") from None
    finally:
        probe.close()
    return True
