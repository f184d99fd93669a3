"""
Egress selection (``--egress-selector-config-file``, docs/egress.md): which network a
connection the server makes goes through — directly, or tunnelled through an HTTP
CONNECT proxy — by what it connects to (``controlplane``, ``etcd``, ``cluster``).
"""
