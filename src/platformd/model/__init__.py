"""
The object model every layer shares: the schema language (``schema``), ObjectMeta and
its rules (``meta``), field errors in upstream's words (``fielderrors``) and times
(``times``).  It imports nothing of platformd but ``errors``, so storage, cache, patch,
registry and api can all stand on it without importing each other.
"""
