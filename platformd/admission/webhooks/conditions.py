"""
The CEL of ``matchConditions`` when no compiler is handed in: ``object``, ``oldObject``
and ``request`` (all dynamic), a bool result, straight over ``cel-expr-python``, the
library under ``auth/cel.py`` (which the admission layer may not import).  ``compose``
hands in ``registry.kinds.webhookshapes.compile_condition``, the one validation uses;
this is the same environment, for plugins built by name (``plugin_factory``).
"""

from __future__ import annotations

from cel_expr_python import cel as _cel
from google.protobuf import descriptor_pool, struct_pb2

_env = None
_programs: dict = {}


class Program:
    def __init__(self, source: str, compiled):
        self.source = source
        self._compiled = compiled

    def evaluate(self, variables: dict):
        try:
            result = self._compiled.eval(data=variables)
        except Exception as error:
            raise ValueError(str(error)) from None
        if result.type() == _cel.Type.ERROR:
            raise ValueError(str(result.value()))
        return result.plain_value()


def compile_condition(expression: str) -> Program:
    """The compiled condition; ValueError when it does not compile to a bool."""
    global _env
    program = _programs.get(expression)
    if program is not None:
        return program
    if _env is None:
        pool = descriptor_pool.DescriptorPool()
        pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
        _env = _cel.NewEnv(pool, variables={"object": _cel.Type.DYN,
                                            "oldObject": _cel.Type.DYN,
                                            "request": _cel.Type.DYN})
    try:
        compiled = _env.compile(expression)
    except Exception as error:
        raise ValueError(f"compilation failed: {error}") from None
    if compiled.return_type() != _cel.Type.BOOL:
        raise ValueError("must evaluate to bool")
    program = _programs[expression] = Program(expression, compiled)
    return program
