"""
The server's Prometheus metrics: upstream kube-apiserver's names, labels and buckets,
kept cheap enough to record on every request.

``core`` holds the metric families (plain dicts of label tuples, updated on the reactor
thread) and the text exposition; ``apiserver`` declares upstream's families; ``requests``
turns a finished request into their labels.  The process collector and the exposition
format come from ``prometheus_client``.
"""
