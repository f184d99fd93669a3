"""
Admission: plugins that see every write after it is decoded and before it is stored,
with the request's context and the old and new objects (upstream's
``k8s.io/apiserver/pkg/admission``).  Mutating plugins run first, in order, and may
change the new object; validating plugins run after the kind's own validation and may
only refuse.  ``NamespaceLifecycle`` is the first plugin; webhooks, policies and the
ServiceAccount plugin plug into the same chain (issue 15).
"""
