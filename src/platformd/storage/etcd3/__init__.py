"""
The etcd v3 backend (issue 17, ``docs/etcd.md``): ``--storage-backend etcd3``.

- ``client.py``: the gRPC channel over ``--etcd-servers`` and unary calls off the reactor;
- ``watchstream.py``: an etcd watch read in its own thread, handed to the reactor;
- ``store.py``: ``EtcdStorage``, the IStorage;
- ``txn.py``: a write as etcd's transaction, and the sizes etcd and clientv3 refuse;
- ``compactor.py``: the periodic compaction every replica runs (``--etcd-compaction-interval``).
"""
