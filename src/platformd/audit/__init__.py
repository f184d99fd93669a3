"""
The audit log (issue 16): which requests are recorded and how much of them
(``policy.py``, upstream's ``audit.platform.io/v1`` Policy), the events themselves
(``event.py``, upstream's ``Event`` byte for byte), the filter that records them
(``record.py``), and the writer thread that puts them in a rotated file
(``sink.py``, ``rotation.py``).  See docs/audit.md.
"""
