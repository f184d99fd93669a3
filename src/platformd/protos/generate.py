"""
Regenerate the Python code under ``src/platformd/protos`` from the ``.proto`` sources under
``proto/``: ``PYTHONPATH=src python -m platformd.protos.generate`` from the checkout (needs
grpcio-tools; see docs/protobuf.md).

protoc names a generated module after its ``.proto`` path and imports its dependencies
by that path (``from platform.api.core.v1 import generated_pb2``).  A top-level package
named ``platform`` would shadow the standard library's ``platform`` module, so the code
lives under ``platformd.protos`` and this script rewrites those imports to match; it
also writes the ``__init__.py`` files that make each directory a package.
``tests/test_protos_fresh.py`` runs ``generate`` into a temporary directory and fails
when the checked-in code differs.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

#: Where the .proto sources live, relative to the repository root.
PROTO_ROOT = "proto"
#: The Python package the code is generated into, and its directory.
PACKAGE = "platformd.protos"
PACKAGE_DIR = os.path.join("src", "platformd", "protos")
#: The first path segment of every .proto: ours, etcd's v3 API (proto/etcd/README.md),
#: konnectivity's client protocol (proto/konnectivity/README.md) and CEL's checked
#: expressions (proto/cel/README.md).
PROTO_NAMESPACES = ("platform", "etcd", "konnectivity", "cel")


def repository_root() -> str:
    """The checkout this module was imported from (``src/platformd/protos/generate.py``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))


def proto_sources(root: str) -> list:
    """The .proto files under ``proto/``, relative to it, in a stable order."""
    base = os.path.join(root, PROTO_ROOT)
    found = []
    for directory, _dirs, files in os.walk(base):
        found.extend(os.path.relpath(os.path.join(directory, f), base)
                     for f in files if f.endswith(".proto"))
    return sorted(found)


def generate(out_dir: str, root: str | None = None) -> list:
    """
    Write the generated modules for every .proto into ``out_dir`` (the directory of
    ``platformd.protos``); the paths written, relative to ``out_dir``.
    """
    from grpc_tools import protoc
    import grpc_tools

    root = root or repository_root()
    sources = proto_sources(root)
    # Start from nothing, so code of a deleted .proto does not linger.
    for namespace in PROTO_NAMESPACES:
        shutil.rmtree(os.path.join(out_dir, namespace), ignore_errors=True)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    status = protoc.main([
        "grpc_tools.protoc", f"-I{os.path.join(root, PROTO_ROOT)}", f"-I{well_known}",
        f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *sources])
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status}")
    written = []
    for directory, _dirs, files in walk(out_dir):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            with open(path) as f:
                text = f.read()
            if name.endswith("_pb2_grpc.py") and "Stub" not in text:
                # protoc writes a gRPC module for every .proto; only services need one.
                os.remove(path)
                continue
            with open(path, "w") as f:
                f.write(_rename_modules(text))
        init = os.path.join(directory, "__init__.py")
        open(init, "a").close()
        written.extend(os.path.relpath(os.path.join(directory, n), out_dir)
                       for n in os.listdir(directory) if n.endswith(".py"))
    return sorted(set(written))


def walk(out_dir: str):
    """``os.walk`` over each namespace's generated directory."""
    for namespace in PROTO_NAMESPACES:
        yield from os.walk(os.path.join(out_dir, namespace))


def _rename_modules(text: str) -> str:
    """Point protoc's references to modules by .proto path at ``platformd.protos``."""
    for ns in PROTO_NAMESPACES:
        text = re.sub(rf"^(from|import) {ns}\.", rf"\1 {PACKAGE}.{ns}.", text,
                      flags=re.MULTILINE)
        text = text.replace(f"(DESCRIPTOR, '{ns}.", f"(DESCRIPTOR, '{PACKAGE}.{ns}.")
    return text


def main() -> None:
    root = repository_root()
    out_dir = os.path.join(root, PACKAGE_DIR)
    for path in generate(out_dir, root):
        sys.stdout.write(f"{os.path.join(PACKAGE_DIR, path)}\n")


if __name__ == "__main__":
    main()
