"""
The SQL of ``SQLiteStorage`` (``sqlite.py``): the schema, the statements, and the reads
the reader threads and the writer share (a key's version, a range's versions, the event
log).  Plain functions of a connection, so any thread can run them on its own.
"""

from __future__ import annotations

import sqlite3
from typing import Optional

import attrs

from platformd.storage.interface import DELETE, PUT, Event, KeyValue
from platformd.storage.transformers import Transformed

#: Each connection's page cache, in KiB (SQLite's default is 2,000 KiB, filled by any
#: connection that reads or writes that much: the writer after a few thousand writes,
#: a reader after one full range).  The writer's work is an append to the table and an
#: insert into the key index, whose interior pages fit in far less; a reader's ranges
#: are scans, read once; the operating system's page cache holds the file either way.
#: 512 KiB keeps ~1.5 MiB per connection out of the server's memory (docs/performance.md).
CACHE_KIB = 512
CACHE_SIZE = f"PRAGMA cache_size=-{CACHE_KIB}"

SCHEMA = """
CREATE TABLE IF NOT EXISTS revisions (
    mod_revision INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    create_revision INTEGER NOT NULL,
    value BLOB NOT NULL,
    deleted INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS revisions_by_key ON revisions (key, mod_revision);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('compacted_revision', 0);
"""

INSERT = "INSERT INTO revisions VALUES (?, ?, ?, ?, ?)"

#: Rows at or below :revision that another row of their key at or below it supersedes,
#: and tombstones at or below it.  What stays is exactly the state at :revision.
COMPACT = """
DELETE FROM revisions WHERE mod_revision <= :revision AND (deleted OR EXISTS (
    SELECT 1 FROM revisions AS newer WHERE newer.key = revisions.key
    AND newer.mod_revision > revisions.mod_revision AND newer.mod_revision <= :revision))
"""

#: Each change after ? up to ? of a key starting with ?, with the version it replaced
#: (the key's previous row, unless the change is a create).
EVENTS = """
SELECT r.key, r.value, r.create_revision, r.mod_revision, r.deleted,
       p.value, p.create_revision, p.mod_revision
FROM revisions AS r LEFT JOIN revisions AS p
    ON r.create_revision < r.mod_revision AND p.mod_revision = (
        SELECT max(mod_revision) FROM revisions
        WHERE key = r.key AND mod_revision < r.mod_revision)
WHERE r.mod_revision > ? AND r.mod_revision <= ? AND substr(r.key, 1, ?) = ?
ORDER BY r.mod_revision
"""


def select_kvs(db, values: Transformed, low: str, high: Optional[str], revision: int) -> list:
    """The version at ``revision`` of every live key in [low, high), in key order."""
    bounds: tuple[str, ...]
    bound, bounds = "key >= ?", (low,)
    if high is not None:
        bound, bounds = "key >= ? AND key < ?", (low, high)
    # The newest revision of each key comes from the index alone; then one row per key.
    rows = db.execute(f"""
        SELECT r.key, r.value, r.create_revision, r.mod_revision
        FROM (SELECT max(mod_revision) AS newest FROM revisions
              WHERE {bound} AND mod_revision <= ? GROUP BY key) AS latest
        JOIN revisions AS r ON r.mod_revision = latest.newest
        WHERE NOT r.deleted ORDER BY r.key""", bounds + (revision,))
    if values.identity:
        return [KeyValue(*row) for row in rows]
    read = values.value
    return [KeyValue(key, read(key, data), create, mod) for key, data, create, mod in rows]


def select_kv(db, values: Transformed, key: str, revision: int) -> Optional[KeyValue]:
    """The version of ``key`` at ``revision``, or None."""
    row = db.execute("""
        SELECT value, create_revision, mod_revision, deleted FROM revisions
        WHERE key = ? AND mod_revision <= ? ORDER BY mod_revision DESC LIMIT 1""",
                     (key, revision)).fetchone()
    if row is None or row[3]:
        return None
    data, create, mod, _ = row
    return KeyValue(key, values.value(key, data), create, mod)


def select_events(db, values: Transformed, prefix: str, after: int, upto: int) -> list:
    """The events of keys under ``prefix`` in (after, upto], in revision order."""
    events = []
    read = values.value
    for key, data, create, mod, deleted, *old in db.execute(
            EVENTS, (after, upto, len(prefix), prefix)):
        prev = None if old[2] is None else KeyValue(key, read(key, old[0]), old[1], old[2])
        if deleted:
            assert prev is not None, f"{key}: a tombstone at {mod} with no version before it"
            events.append(Event(DELETE, attrs.evolve(prev, mod_revision=mod), prev))
        else:
            events.append(Event(PUT, KeyValue(key, read(key, data), create, mod), prev))
    return events


def prefix_end(prefix: str) -> Optional[str]:
    """The least string above every string that starts with ``prefix``; None: no bound."""
    for i in reversed(range(len(prefix))):
        code = ord(prefix[i]) + 1
        if code == 0xD800:  # surrogates cannot be encoded: skip them
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return None


def connect(path: str, **options) -> sqlite3.Connection:
    """A connection to the database at ``path`` in autocommit mode, its page cache bounded."""
    db = sqlite3.connect(path, isolation_level=None, **options)
    db.execute(CACHE_SIZE)
    return db
