"""
A write as one etcd transaction, and the sizes at which etcd and its Go client refuse
one (``docs/storage.md``, "Sizes").

``transaction`` is the etcd store's shape of a write, or of several keys' writes
together (``IStorage.commit``; ``store.py``'s module docstring): ``EtcdStorage`` sends
it, ``SQLiteStorage`` only measures it, so that SQLite refuses the writes an etcd with
its default limits refuses, with the same answer.  A write
over a limit meets it on its way:

- clientv3 sends no message over its default ``MaxCallSendMsgSize``, 2 MiB (upstream's
  kube-apiserver keeps it): grpc-go's ``ResourceExhausted``, ``trying to send message
  larger than max (N vs. 2097152)``, N the message's size;
- etcd takes no raft request over its ``--max-request-bytes``, 1.5 MiB by default:
  ``etcdserver: request is too large``.

Upstream's etcd3 store passes either error on as it is, and its handler answers it
500 with the error's text and no reason (``client.refused`` says why).  That is the
object's encoding as stored (JSON here) that counts, as upstream's Protobuf does there.

etcd's messages are imported with the first transaction built: SQLite builds one only
for writes near the limits (``may_be_refused``), and a server on SQLite needs neither
them nor the protobuf runtime until then.
"""

from __future__ import annotations

from typing import Optional

from platformd import errors
from platformd.storage import mvcc

#: clientv3's default ``MaxCallSendMsgSize``: etcd's default request limit plus gRPC's
#: overhead (``embed.DefaultMaxRequestBytes + grpcOverheadBytes``).
MAX_SEND = 2 * 1024 * 1024
#: etcd's default ``--max-request-bytes`` (``embed.DefaultMaxRequestBytes``).
MAX_REQUEST = 1536 * 1024
#: What etcd wraps a transaction in before it measures it (``InternalRaftRequest``):
#: the header (field 100: a 2-byte tag, its length, a request ID of up to 10 bytes with
#: its tag), then the transaction's own tag and length (``_raft_size``).
_HEADER = 2 + 1 + 1 + 10


def transaction(writes: list):
    """
    The ``TxnRequest`` of ``writes``: (etcd key, ``mvcc`` operation, value as stored or
    None for a delete) each.  A create compares ``CreateRevision == 0``, an update or
    delete ``CreateRevision > 0`` (and ``ModRevision == expected``); then Put (with
    ``prev_kv`` but for a create) or Delete (with ``prev_kv``), in the given order.  A
    lone create neither asks for the previous version nor reads the key back (failing,
    the key exists); otherwise the else branch reads every key back, in the same order,
    so the caller can tell which condition failed and why.
    """
    from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
    compares: list = []
    success = []
    for etcd_key, op, stored in writes:
        compares.extend(_compares(rpc_pb2, etcd_key, op))
        success.append(_request(rpc_pb2, etcd_key, op, stored))
    lone_create = len(writes) == 1 and isinstance(writes[0][1], mvcc.Create)
    failure = [] if lone_create else [
        rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=etcd_key))
        for etcd_key, _op, _stored in writes]
    return rpc_pb2.TxnRequest(compare=compares, success=success, failure=failure)


def _compares(rpc_pb2, etcd_key: bytes, op) -> list:
    """The conditions of one write (see ``transaction``), of etcd's ``rpc_pb2``."""
    Compare = rpc_pb2.Compare
    if isinstance(op, mvcc.Create):
        return [Compare(key=etcd_key, target=Compare.CREATE, result=Compare.EQUAL,
                        create_revision=0)]
    compares = [Compare(key=etcd_key, target=Compare.CREATE, result=Compare.GREATER,
                        create_revision=0)]
    if op.expected_revision is not None:
        compares.append(Compare(key=etcd_key, target=Compare.MOD, result=Compare.EQUAL,
                                mod_revision=op.expected_revision))
    return compares


def _request(rpc_pb2, etcd_key: bytes, op, stored: Optional[bytes]):
    """The Put or Delete of one write (see ``transaction``), of etcd's ``rpc_pb2``."""
    if stored is None:
        return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(
            key=etcd_key, prev_kv=True))
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(
        key=etcd_key, value=stored, prev_kv=not isinstance(op, mvcc.Create)))


def send_refusal(txn) -> Optional[errors.StatusError]:
    """clientv3's refusal to send ``txn``, or None."""
    size = txn.ByteSize()
    if size <= MAX_SEND:
        return None
    return refused("rpc error: code = ResourceExhausted desc = trying to send message "
                   f"larger than max ({size} vs. {MAX_SEND})")


def refusal(txn) -> Optional[errors.StatusError]:
    """The refusal of ``txn`` by clientv3, else by an etcd with default limits, or None."""
    refusal = send_refusal(txn)
    if refusal is None and _raft_size(txn.ByteSize()) > MAX_REQUEST:
        refusal = refused("etcdserver: request is too large")
    return refusal


def may_be_refused(stored: list) -> bool:
    """
    Whether a transaction writing ``stored`` ((etcd key, value as stored) pairs) comes
    near enough to the limits to be measured: each key is in it at most four times,
    with less than 64 bytes around each.  (Building the message of every write would
    cost its writer.)
    """
    size = sum(len(value) + 4 * (len(etcd_key) + 64) for etcd_key, value in stored)
    return size + _HEADER + 4 > MAX_REQUEST


def refused(text: str) -> errors.StatusError:
    """A write refused by etcd or clientv3, as upstream's handler answers it."""
    return errors.StatusError(500, "", text)


def _raft_size(size: int) -> int:
    """The size of the raft request wrapping a transaction of ``size`` bytes."""
    return _HEADER + 1 + _varint_size(size) + size


def _varint_size(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)
