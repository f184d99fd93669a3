"""
The daemon's data are its user's alone (docs/security.md, "Files"): ``--data-dir`` is
0700, and the files that hold data (the SQLite database with its WAL and shared-memory
files, private keys, the admin kubeconfig) are 0600.  Secrets are stored in the
database, in plaintext unless encryption at rest is configured.

A file is created with its mode, never wider and narrowed after (another user could
open it in between and keep it open); an existing one is narrowed at every start,
since a directory made by an older release, by hand or from a backup may be wider.  A
directory is narrowed only when it is this user's own: ``--data-dir /var/lib`` by
mistake must not make /var/lib private, even as root; one that cannot be narrowed so is
refused.  Refusals are ``StartupError``: one line, exit status 1.
"""

from __future__ import annotations

import os
import stat
from typing import Optional

from platformd.process.startup import StartupError

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
#: The group's and others' bits.
_SHARED = 0o077


def directory(path: str, name: str) -> Optional[int]:
    """
    Make ``path`` (0700), or narrow it to 0700 if others have any access to it; the
    mode it had when narrowed, else None.  ``name`` is how the operator knows it (the
    flag, in the refusal's line).
    """
    try:
        os.makedirs(path, mode=DIRECTORY_MODE, exist_ok=True)
        info = os.stat(path)
    except OSError as e:
        raise StartupError(f"cannot create {name} {path}: {e.strerror}") from None
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _SHARED:
        return None
    if info.st_uid != os.geteuid():
        raise StartupError(
            f"{name} {path} is mode {mode:04o}, open to other users, and owned by uid "
            f"{info.st_uid}, not this user (uid {os.geteuid()}): make it 0700 or use "
            "a directory of this user's")
    _chmod(path, DIRECTORY_MODE)
    return mode


def file(path: str, create: bool = True) -> None:
    """
    ``path`` made private: created empty (0600) if it is missing and ``create``, else
    narrowed to 0600 if others have any access to it.
    """
    try:
        if create:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, FILE_MODE))
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        if create:
            raise StartupError(f"cannot create {path}: no such directory") from None
        return
    except OSError as e:
        raise StartupError(f"cannot open {path}: {e.strerror}") from None
    if mode & _SHARED:
        _chmod(path, FILE_MODE)


def _chmod(path: str, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except OSError as e:
        raise StartupError(f"cannot make {path} mode {mode:04o}: {e.strerror}") from None
