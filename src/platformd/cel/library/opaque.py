"""
The opaque values of Kubernetes' libraries as protobuf messages: cel-expr-python cannot
carry a Python object through CEL (a custom abstract type's value has no conversion), but
it carries messages.  Each is named as upstream's type (``kubernetes.Quantity``,
``kubernetes.URL``, ``kubernetes.Semver``, ``net.IP``, ``net.CIDR``) so that ``type()``
and the checker's messages name it as upstream, and holds one string, ``_v``, canonical
for the value so that CEL's ``==`` (field by field) is upstream's ``Equal``: a quantity's
exact value, an IP address's canonical text.  ``add_to`` declares them in an
environment's pool; ``make`` and ``text`` build and read values.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

QUANTITY = "kubernetes.Quantity"
URL = "kubernetes.URL"
SEMVER = "kubernetes.Semver"
IP = "net.IP"
CIDR = "net.CIDR"

_F = descriptor_pb2.FieldDescriptorProto


def _file(package: str, names) -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name=f"platformd/cel/{package}.proto",
                                            package=package, syntax="proto3")
    for name in names:
        message = fd.message_type.add(name=name)
        message.field.add(name="_v", number=1, json_name="_v", type=_F.TYPE_STRING,
                          label=_F.LABEL_OPTIONAL)
    return fd


FILES = (_file("kubernetes", ("Quantity", "URL", "Semver")), _file("net", ("IP", "CIDR")))

_POOL = descriptor_pool.DescriptorPool()
for _fd in FILES:
    _POOL.Add(_fd)
_CLASSES = {name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(name))
            for name in (QUANTITY, URL, SEMVER, IP, CIDR)}


def add_to(pool) -> None:
    """Declare the library's types in ``pool`` (an environment's)."""
    for fd in FILES:
        pool.Add(fd)


def make(type_name: str, text: str):
    """A value of ``type_name`` holding ``text``."""
    return _CLASSES[type_name](_v=text)


def kind(value) -> str:
    """The library type of ``value`` ("" if it is none of them)."""
    descriptor = getattr(value, "DESCRIPTOR", None)
    name = getattr(descriptor, "full_name", "")
    return name if name in _CLASSES else ""


def text(value) -> str:
    """The string a library value holds."""
    return value._v
