"""
CEL for the admission plugins, straight over ``cel-expr-python`` (the library under
``auth/cel.py``, which the admission layer may not import): an ``Environment`` of
dynamic variables compiling expressions of a required result type.

``compile_condition`` is the webhooks' ``matchConditions`` environment (``object``,
``oldObject``, ``request``, a bool result) for plugins built by name
(``plugin_factory``); ``compose`` may hand in ``registry.kinds.webhookshapes``'s, the one
validation uses, which is the same environment.  Admission policies
(``admission/policy``) make their own ``Environment`` with more variables.
"""

from __future__ import annotations

import re
from typing import Optional

from cel_expr_python import cel as _cel
from google.protobuf import descriptor_pool, struct_pb2

#: Result types ``Environment.compile`` can require.
_RESULTS = {"bool": _cel.Type.BOOL, "string": _cel.Type.STRING}


_NO_SUCH_KEY = re.compile(r'^Key not found in map : "(.*)"$')


def go_error(text: str) -> str:
    """cel-cpp's evaluation error as cel-go words the common ones (``no such key: x``)."""
    text = re.sub(r"^[A-Z_]+: ", "", text)
    missing = _NO_SUCH_KEY.match(text)
    if missing:
        return f"no such key: {missing.group(1)}"
    return {"divide by zero": "division by zero",
            "modulus by zero": "modulus by zero"}.get(text, text)


class Program:
    def __init__(self, source: str, compiled):
        self.source = source
        self._compiled = compiled

    def evaluate(self, variables: dict):
        try:
            result = self._compiled.eval(data=variables)
        except Exception as error:
            raise ValueError(go_error(str(error))) from None
        if result.type() == _cel.Type.ERROR:
            raise ValueError(go_error(str(result.value())))
        return result.plain_value()


class Environment:
    """Dynamic ``variables`` (names); compiled programs are kept per source."""

    def __init__(self, variables):
        pool = descriptor_pool.DescriptorPool()
        pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
        self._env = _cel.NewEnv(pool, variables={name: _cel.Type.DYN for name in variables})
        self._programs: dict = {}

    def compile(self, expression: str, result: Optional[str] = None) -> Program:
        """
        The compiled ``expression``; ValueError when it does not compile or, with
        ``result`` (``"bool"``, ``"string"``), has another type.
        """
        key = (expression, result)
        program = self._programs.get(key)
        if program is not None:
            return program
        try:
            compiled = self._env.compile(expression)
        except Exception as error:
            raise ValueError(f"compilation failed: {error}") from None
        if result is not None and compiled.return_type() != _RESULTS[result]:
            raise ValueError(f"must evaluate to {result}")
        program = self._programs[key] = Program(expression, compiled)
        return program


_conditions: Optional[Environment] = None


def compile_condition(expression: str) -> Program:
    """The compiled condition; ValueError when it does not compile to a bool."""
    global _conditions
    if _conditions is None:
        _conditions = Environment(("object", "oldObject", "request"))
    return _conditions.compile(expression, "bool")
