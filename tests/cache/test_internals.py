"""
The watch cache's internals stay inside ``cache/``: everything else reads it through
informers and listers (``informing.py``, ``cache/informers.py``) or the cache's named
reader methods (``get``, ``current``, ``served``, ``kind_counts``, ``sync``...).
"""

from __future__ import annotations

import ast
import os

from twisted.trial.unittest import SynchronousTestCase

import platformd

ROOT = os.path.dirname(platformd.__file__)
CACHE = os.path.join(ROOT, "cache")
WATCHCACHE = os.path.join(CACHE, "watchcache.py")


def _private_names() -> set:
    """The ``_``-names ``KindCache`` and ``WatchCache`` define (attributes, methods)."""
    with open(WATCHCACHE, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in ("KindCache", "WatchCache")):
            continue
        for node in ast.walk(cls):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_") \
                    and not node.name.startswith("__"):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") \
                    and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return names


def _uses(names: set) -> list:
    """``path:line: .name`` for each use of ``names`` on anything but ``self`` outside
    ``cache/``."""
    found = []
    for directory, _dirs, files in os.walk(ROOT):
        if directory == CACHE or directory.startswith(CACHE + os.sep) \
                or os.sep + "protos" in directory:
            continue
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in names and not (
                        isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: .{node.attr}")
    return found


class InternalsTests(SynchronousTestCase):
    def test_names_found(self):
        """The scan knows the cache's internals (a rename would empty it silently)."""
        self.assertTrue({"_objects", "_keys", "_keys_from", "_listeners", "_kinds"}
                        <= _private_names())

    def test_no_use_outside_the_cache(self):
        """No module outside cache/ reaches into KindCache's or WatchCache's internals."""
        self.assertEqual(_uses(_private_names()), [])
