"""
The import graph: no cycle between modules, and no upward import between the layers
drawn in docs/architecture.md.  Read from the source with ``ast`` (imports inside
functions count too), so a new edge that breaks the layering fails here.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict

from twisted.trial.unittest import SynchronousTestCase

import platformd

ROOT = os.path.dirname(platformd.__file__)

#: Lowest first.  A unit (a package below platformd, or a top-level module) may import
#: only units of lower layers.
LAYERS = (
    {"goformat", "protos"},
    {"process", "util", "errors", "featuregates", "requestinfo", "cel",
     "__version__", "metrics", "informing", "bulklane"},
    {"files"},
    {"model", "storage", "codecs", "edge", "options"},
    {"tracing", "egress", "apiextensions"},
    {"auth", "cache", "patch", "audit"},
    {"admission"},
    {"context"},
    {"registry", "podinfo"},
    {"controllers"},
    {"api"},
    {"compose"},
    {"service"},
)
RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def _modules():
    for directory, _dirs, files in os.walk(ROOT):
        if os.sep + "protos" in directory:
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                module = "platformd." + os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield module.removesuffix(".__init__"), path


def _imports(path: str, known) -> set:
    """
    The platformd modules ``path`` imports.  ``from platformd.x import y`` is an edge to
    the module ``platformd.x.y`` when ``y`` is one (a file or a package), else to
    ``platformd.x`` (``y`` is a name it defines).
    """
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "platformd" and not node.module.startswith("platformd."):
                continue
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in known or node.module == "platformd":
                    targets.add(submodule)
                else:
                    targets.add(node.module)
        elif isinstance(node, ast.Import):
            targets.update(a.name for a in node.names if a.name.startswith("platformd."))
    return targets


def _unit(module: str) -> str:
    return module.split(".")[1] if "." in module else module


class ImportGraphTests(SynchronousTestCase):
    def setUp(self):
        self.graph = defaultdict(set)
        known = dict(_modules())
        for module, path in known.items():
            for target in _imports(path, known):
                # A name of a module that is not a file here (platformd.__version__, or
                # a generated protos module): its nearest enclosing module.
                while target not in known and target.count(".") > 1:
                    target = target.rsplit(".", 1)[0]
                self.graph[module].add(target)

    def test_every_unit_has_a_layer(self):
        units = {_unit(m) for m in self.graph} | {_unit(t) for ts in self.graph.values() for t in ts}
        self.assertEqual(sorted(units - set(RANK)), [])

    def test_no_upward_import(self):
        upward = sorted(
            f"{module} imports {target}"
            for module, targets in self.graph.items() for target in targets
            if _unit(module) != _unit(target) and RANK[_unit(target)] >= RANK[_unit(module)])
        self.assertEqual(upward, [])

    def test_no_cycle(self):
        """Tarjan's strongly connected components over modules: none larger than one."""
        index, low, on_stack, stack, cycles = {}, {}, set(), [], []
        counter = [0]

        def visit(node):
            index[node] = low[node] = counter[0]
            counter[0] += 1
            stack.append(node)
            on_stack.add(node)
            for target in self.graph.get(node, ()):
                if target not in index:
                    visit(target)
                    low[node] = min(low[node], low[target])
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))

        for node in list(self.graph):
            if node not in index:
                visit(node)
        self.assertEqual(cycles, [])
