"""
Kubernetes' CEL libraries (upstream's ``k8s.io/apiserver/pkg/cel/library`` and the cel-go
extensions ``environment/base.go`` enables), for every ``platformd.cel.Environment``.

Upstream's base environment at the 1.36 compatibility version has, beyond CEL's standard
library: cel-go's ``strings`` extension at version 2, ``sets``, optional types and
two-variable comprehensions (here cel-cpp's own, enabled by name in the environment's
configuration: ``CONFIG``), and Kubernetes' ``lists``, ``regex``, ``urls``, ``quantity``,
``ip``, ``cidr``, ``format``, ``semver``, ``authz`` and ``image`` libraries.  Those built
here are Python functions (``lists``, ``regex``, ``urls``, ``quantity``, ``net`` for ip and
cidr, ``semver``); see docs/customresources-schema.md for the ones left out and why.

cel-expr-python registers a Python function by the *kinds* of its parameters (list,
map, message, string, dyn ...), not by their types: two overloads of one name whose
parameters are lists of different element types collide, and a parameter declared with
a type parameter (``list(A)``) or a result of an optional or type-parameter type cannot
cross the binding.  So a library is two tables:

- ``Overload``: what the type checker sees, upstream's overloads with their ids and types
  (``list_int_sum_int``: ``list(int).sum() -> int``), declared without an implementation;
  the ids are upstream's, so the cost estimator (``cost``) finds them in the checked AST.
- ``Implementation``: what runs, one Python function per name, receiver style and
  parameter kinds, taking and returning values of any type (``dyn``) and dispatching on
  the values it gets.

An ``Environment`` therefore checks an expression with the declarations and evaluates it
compiled again, unchecked, with the implementations (``declarations()`` and
``implementations()``).  The opaque values (a quantity, a URL, an IP, a CIDR, a semver) are
protobuf messages named as upstream's types (``types``), holding a canonical string, so
that ``==`` compares them as upstream does and ``type()`` names them as upstream.
"""

from __future__ import annotations

import functools

from cel_expr_python import cel as _cel

from platformd.cel.library import comparisons, lists, net, quantity, regex, semver, urls

#: cel-cpp's extensions by name, as ``environment/base.go`` enables cel-go's at 1.36.
CONFIG = """
extensions:
  - name: optional
  - name: strings
    version: 2
  - name: sets
  - name: two-var-comprehensions
"""


#: Every library built here, in upstream's order.
LIBRARIES = (lists.LIBRARY, regex.LIBRARY, urls.LIBRARY, quantity.LIBRARY, net.IP_LIBRARY,
             net.CIDR_LIBRARY, semver.LIBRARY, comparisons.LIBRARY)


def _grouped(pairs) -> list:
    by_name: dict = {}
    for name, overload in pairs:
        by_name.setdefault(name, []).append(overload)
    return [_cel.FunctionDecl(name, overloads) for name, overloads in by_name.items()]


def config():
    """The configuration enabling cel-cpp's extensions (``CONFIG``)."""
    return _cel.NewEnvConfigFromYaml(CONFIG)


@functools.cache
def declarations():
    """The extension declaring every library's overloads, for the type checker (made
    once: every environment shares it)."""
    return _cel.CelExtension("kubernetes", _grouped(
        (o.function, o.declared()) for lib in LIBRARIES for o in lib.overloads))


@functools.cache
def implementations():
    """The extension implementing every library's functions, for unchecked evaluation
    (made once: every environment shares it)."""
    pairs: list = []
    for lib in LIBRARIES:
        for implementation in lib.implementations:
            pairs.append((implementation.function, implementation.registered(len(pairs))))
    return _cel.CelExtension("kubernetes", _grouped(pairs))
