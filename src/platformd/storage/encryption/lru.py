"""
The KMS providers' cache of decrypted data keys (upstream ``k8s.io/utils/lru``): a
bounded map that evicts the least recently used entry first.  Shared by the storage
reader and writer threads, so every operation takes a lock.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Hashable, Optional


class LRUCache:
    """At most ``size`` entries; ``size <= 0`` stores nothing (the cache is off)."""

    def __init__(self, size: int):
        self.size = size
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()

    def get(self, key: Hashable) -> Optional[Any]:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def add(self, key: Hashable, value: Any) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
