"""
The controllers (upstream's ``pkg/controller``), each over informers
(``cache/informers.py``) and one work queue (``controllers/queue.py``):

- ``namespaces``: a terminating namespace's content is deleted, then the namespace;
- ``serviceaccounts``: every active namespace has its ``default`` ServiceAccount;
- ``aggregation``: aggregating ClusterRoles hold the rules of the roles they select.

``controllers/worker.py`` runs a controller's sync function over its queue.
"""
