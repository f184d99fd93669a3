"""
Loaded into a benchmark's server (``bench/bench_memory.py --holders``: this directory
first on its PYTHONPATH) to say what holds the server's memory.  On SIGUSR2 the server
writes, to ``$PLATFORMD_MEMREPORT``, a JSON report: its RSS, glibc malloc's figures
(``mallinfo2``: bytes in use, free bytes it keeps, mmapped), pymalloc's arenas, and the
bytes reachable from each holder (every object counted once, the first holder to reach it
claiming it, in the order listed): the watch cache's objects (split into their stored
bytes, JSON bytes, other encodings, decoded dicts, the ``CachedObject``s themselves and
the containers), the history, the informers' users (the RBAC index), the snapshot cache,
the open watches and their connections.  Analysis only: nothing here is imported by
platformd.
"""

import ctypes
import gc
import json
import os
import signal
import sys


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def mallinfo() -> dict:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {name: getattr(info, name) for name, _ in _MallInfo2._fields_}


def pymalloc() -> dict:
    """pymalloc's arenas (``sys._debugmallocstats`` writes to C's stderr)."""
    import re
    import tempfile
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    out = {}
    for name, key in (("arenas_kib", r"# arenas allocated current\s*=\s*([\d,]+)"),
                      ("used_bytes", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
                      ("free_bytes", r"# bytes in available blocks\s*=\s*([\d,]+)"),
                      ("unused_pools", r"(\d[\d,]*) unused pools \*")):
        m = re.search(key, text)
        if m:
            out[name] = int(m.group(1).replace(",", ""))
    return out


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sizer:
    """Deep sizes with every object counted once across calls."""

    def __init__(self):
        self.seen: set = set()
        self.stop: set = set()

    def size(self, root, stop_types=()) -> tuple:
        """(bytes, objects) newly reachable from ``root``."""
        total = count = 0
        stack = [root]
        seen, stop = self.seen, self.stop
        while stack:
            obj = stack.pop()
            i = id(obj)
            if i in seen or i in stop:
                continue
            if isinstance(obj, type) or type(obj).__name__ in ("module", "function", "method",
                                                               "builtin_function_or_method"):
                continue
            if stop_types and isinstance(obj, stop_types):
                continue
            seen.add(i)
            total += sys.getsizeof(obj)
            count += 1
            if isinstance(obj, (str, bytes, int, float, bool, type(None))):
                continue
            if isinstance(obj, dict):
                stack.extend(obj.keys())
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
                stack.extend(obj)
            else:
                stack.extend(gc.get_referents(obj))
        return total, count


def _instances(name: str) -> list:
    return [o for o in gc.get_objects() if type(o).__name__ == name]


def report() -> dict:
    gc.unfreeze()
    gc.collect()
    out: dict = {"rss_kib": rss_kib(), "mallinfo": mallinfo()}
    sizer = Sizer()
    holders: dict = {}

    def add(name, root, stop_types=()):
        b, n = sizer.size(root, stop_types)
        entry = holders.setdefault(name, [0, 0])
        entry[0] += b
        entry[1] += n

    caches = _instances("WatchCache")
    from platformd.cache import watchcache as wc  # the server's own module
    kinds = [k for c in caches for k in c._kinds.values()]
    stop = (wc.KindCache,)
    for kc in kinds:
        # Current objects, part by part.
        for entry in kc._objects.values():
            if hasattr(entry, "_data"):  # one byte form (stored bytes or JSON)
                add("objects: bytes (one form: stored or JSON)", entry._data)
            else:
                add("objects: stored bytes (raw)", entry.raw)
            for attr, name in (("_json", "objects: JSON bytes"),
                               ("_obj", "objects: decoded dicts"),
                               ("_encodings", "objects: other encodings"),
                               ("_cbor", "objects: other encodings"),
                               ("_protobuf", "objects: other encodings")):
                value = getattr(entry, attr, None)
                if value is not None:
                    add(name, value)
            add("objects: CachedObject instances", entry, ())
            add("objects: keys (str)", entry.key)
        add("objects: per-kind dict + key list", kc._objects)
        add("objects: per-kind dict + key list", kc._keys)
    for kc in kinds:
        for event in kc.history:
            for attr in ("_frames", "_gone"):
                value = getattr(event, attr, None)
                if value is not None:
                    add("history: frames and gone", value)
            for attr, name in (("old", "history: old versions"), ("new", "history: new versions (not current)")):
                value = getattr(event, attr, None)
                if value is not None:
                    add(name, value)
            add("history: CacheEvent instances", event, stop)
        add("history: deques", kc.history, stop)
    from platformd.cache import informers as inf
    stop = (wc.KindCache, wc.WatchCache, inf.Informer, inf.Lister)
    streams = _instances("WatchStream")
    # (the stream's Deferred reaches the handler's closures: the app, the authorizer)
    for o in streams:
        # The stream's own state first (its scope, options, timers, registration), the
        # request, its connection and what the server shares left out.
        from twisted.internet import reactor
        shared = [o.request, o.server, o.encoder, o.kind, o._metrics, o._write, reactor,
                  o.server.clock, o.done]
        sizer.stop.update(id(x) for x in shared)
        add("watches: the stream's own state", o, stop)
        sizer.stop.difference_update(id(x) for x in shared)
    for o in streams:
        add("watches: the request (+channel, transport)", o.request, stop)
    for o in _instances("RBACIndex"):
        for attr in ("roles", "cluster_roles", "bindings", "namespaces", "cluster_scope"):
            add("RBAC index", getattr(o, attr), stop)
    for name in ("SnapshotCache", "Snapshots", "ContinueSnapshots"):
        for o in _instances(name):
            add("snapshot cache", o, stop)
    for name in ("WatchStream",):
        for o in _instances(name):
            add("watches: WatchStream (+request, transport)", o, stop)
    for name in ("PlatformTLSTransport", "TLSMemoryBIOProtocol", "APIChannel", "Request"):
        for o in _instances(name):
            add(f"connections: {name}", o, stop)
    counts: dict = {}
    for o in gc.get_objects():
        t = type(o).__name__
        counts[t] = counts.get(t, 0) + 1
    out["holders"] = holders
    out["counts"] = sorted(counts.items(), key=lambda kv: -kv[1])[:40]
    out["kinds"] = {kc.kind.plural: [len(kc._objects), len(kc.history)] for kc in kinds
                    if len(kc._objects) > 50}
    out["blocks"] = sys.getallocatedblocks()
    out["pymalloc"] = pymalloc()
    gc.freeze()
    return out


def _on_signal(signum, frame):
    path = os.environ.get("PLATFORMD_MEMREPORT", "/tmp/platformd-memreport.json")
    try:
        data = report()
    except Exception as e:  # noqa: BLE001 - a debugging aid
        data = {"error": repr(e)}
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.rename(path + ".tmp", path)


if os.environ.get("PLATFORMD_MEMREPORT"):
    signal.signal(signal.SIGUSR2, _on_signal)
