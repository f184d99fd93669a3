"""
The connection edge, below HTTP: listening sockets (socket activation included), accepting
under file-descriptor exhaustion, the TLS transport and its settings, and how long a
connection may stay silent.  HTTP itself (``api/site.py``, ``api/http2.py``) sits above.
"""
