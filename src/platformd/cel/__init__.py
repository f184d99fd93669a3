"""
CEL expressions: compiled and type-checked once, evaluated many times, for every
configuration that holds CEL (upstream's ``k8s.io/apiserver/pkg/cel`` and the compilers of
``authentication/cel``, ``authorization/cel`` and ``admission/plugin/cel``).

One module over ``cel-expr-python`` (Google's CEL C++ implementation behind Python
bindings; see docs/authorization.md for why this library), at the bottom layer so that
authentication, authorization, admission and the registry's validation all compile and
evaluate through it: an expression that validation accepts is compiled by the admission
plugin in the same environment, with the same checks and the same messages, and a change
of library stays here.

An ``Environment`` declares the variables an expression may use and their types;
``Environment.compile`` parses and type-checks an expression, checks its result type
(``compile(src, BOOL)``) and keeps the compiled ``Program`` (same environment, same
source and result types: same object); ``Program.evaluate`` binds the variables and
answers a Python value or raises ``EvaluationError``.

Object-shaped variables (a SubjectAccessReview's spec, a user) are protobuf messages
declared at run time (``proto_file``), so field names and types are checked at compile
time as upstream's DeclTypes are: ``request.nope`` is a compile error, ``request.user``
is a string.  Dynamic variables (``DYN``: admission's ``object``) are checked when
evaluated.

Every environment has what upstream's base environment adds at 1.36 and
cel-expr-python can build (``platformd.cel.library``): optional types, the strings
extension (version 2), sets, two-variable comprehensions, and Kubernetes' lists, regex,
url, quantity, ip, cidr and semver libraries.  An expression is type-checked against
the libraries' declared overloads and evaluated compiled again, unchecked, in a second
environment where they are Python functions (``Environment.runnable``): the binding
runs a Python function per parameter kinds, not per declared overload.

Messages are worded as upstream words them: a compile error is ``compilation failed:
ERROR: <input>:1:9: ...`` (cel-cpp's issues without its status code); a wrong result type
is ``must evaluate to bool but got string`` (``must evaluate to one of [bool string]`` for
several, as the authentication compiler words it); an evaluation error is cel-cpp's, with
the commonest reworded as cel-go's (``no such key: x``, ``division by zero``).

Limits.  Costs are static only.  ``cost`` is cel-go's estimator (``checker/cost.go``)
over the checked AST (``Program.checked()``, ``Program.estimated_cost(sizes)``), with
what it cannot know of sizes asked of an ``ISizeEstimator`` (the seam of cel-go's
``checker.CostEstimator``).  Upstream's limits are named below with their sources; the
one user upstream checks an estimate for at configuration time is CRD validation rules
(``STATIC_ESTIMATED_COST_LIMIT`` per rule and messageExpression times its cardinality,
``STATIC_ESTIMATED_CRD_COST_LIMIT`` per schema, with the schema's sizes:
``apiextensions/schema/cost.py``).  Upstream's compilers for admission
(``admission/plugin/cel/compile.go``: webhooks' matchConditions and
ValidatingAdmissionPolicy),
authentication (``authentication/cel/compile.go``: claim and user mappings and
validation rules) and authorization (``authorization/cel/compile.go``: webhooks'
matchConditions) estimate no cost, and their configurations' validation checks none; so
neither does platformd.  Upstream bounds admission's expressions and CRD rules at run
time instead: ``PER_CALL_LIMIT`` per evaluation (interrupted every ``CHECK_FREQUENCY``
comprehension iterations) and ``RUNTIME_CEL_COST_BUDGET`` per policy binding or custom
resource; the authentication and authorization compilers make their programs with no
cost option at all.

Those runtime budgets are not enforced here, for any user: cel-expr-python neither
counts the cost of an evaluation nor can interrupt one (no ``ActualCost``, no cost limit
or interrupt option in its ``NewEnv``/``eval``).  Enforcing them would need cel-cpp's
``RuntimeOptions`` cost tracking exposed through the bindings (an evaluation listener or
``max_cost``-style option that aborts with an error past a limit, and the cost actually
spent returned with the value), or evaluating in a worker that can be killed at a
deadline.  Until then the static limits bound what a CRD rule may do, and an
expensive admission or authentication expression runs to its end.  The library's parser
limits apply to every environment (an expression of more than 100,000 code points, or
nested too deep, does not compile).  The configurations' own limits (how many
conditions, how long a value expression) are checked by their validation.

Submodules: ``cost`` (the estimator), ``matchconditions`` (any-false-skips evaluation
of webhooks' conditions, for authorization and admission) and ``admission`` (the
environments admission webhooks and ValidatingAdmissionPolicy share with their kinds'
validation).  The environments with one user are next to it: JWT claims and user rules
in ``auth/authnconfig.py``, authorization webhooks' ``request`` in ``auth/sar.py``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs

from platformd.cel import cost as _cost

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

# -- upstream's limits ------------------------------------------------------------------
# k8s.io/apiserver/pkg/apis/cel/config.go:

#: ``PerCallLimit``: the runtime cost of one evaluation (roughly 0.1 s).  Not enforced
#: here (see Limits above).
PER_CALL_LIMIT = 1_000_000
#: ``RuntimeCELCostBudget``: the runtime cost of all of a ValidatingAdmissionPolicy
#: binding's or a custom resource's expressions (roughly 1 s).  Not enforced here.
RUNTIME_CEL_COST_BUDGET = 10_000_000
#: ``CheckFrequency``: comprehension iterations between checks for interruption.
CHECK_FREQUENCY = 100
#: ``MaxRequestSizeBytes``: the largest request, which bounds every unbounded list, map
#: and string of a CRD schema in the estimator.
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
#: ``MaxEvaluatedMessageExpressionSizeBytes``: the longest messageExpression result.
MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES = 5 * 1024

# k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go:

#: ``StaticEstimatedCostLimit``: the estimated cost of one rule or messageExpression of
#: a CRD schema (times its cardinality).
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
#: ``StaticEstimatedCRDCostLimit``: the estimated costs of all of a schema's rules.
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000

# -- the binding, imported at first use ---------------------------------------------------

#: cel-expr-python's ``cel`` module once ``_binding()`` imported it.  The library (and
#: the protobuf runtime and messages it brings) is ~6 MiB of every process that imports
#: it; a server whose configuration holds no CEL never compiles an expression, so it is
#: imported by the first type, environment or message declaration asked for, not by
#: importing this module (which validation and admission do, for its errors).
_cel: Any = None

#: The types every environment knows, by the names they are reached by here
#: (``cel.BOOL``: a module attribute made on first access, ``__getattr__``).
_TYPES = ("BOOL", "STRING", "INT", "DYN")


def _binding():
    """cel-expr-python's ``cel`` module (imported on the first call)."""
    global _cel
    if _cel is None:
        from cel_expr_python import cel
        _cel = cel
    return _cel


def __getattr__(name: str) -> Any:
    """``BOOL``, ``STRING``, ``INT``, ``DYN``: cel-expr-python's types, the binding
    imported on the first access (PEP 562)."""
    if name in _TYPES:
        return getattr(_binding().Type, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def list_of(element):
    """The CEL type ``list(element)``."""
    return _binding().Type.List(element)


def map_of(key, value):
    """The CEL type ``map(key, value)``."""
    return _binding().Type.Map(key, value)


def message_type(full_name: str):
    """The CEL type of the protobuf message ``full_name`` (declared with ``proto_file``)."""
    return _binding().Type(full_name)


#: The most unchecked compilations an environment keeps (see ``Environment.runnable``).
_RUNNABLES = 4096


class CompileError(ValueError):
    """An expression does not compile or has the wrong type; ``str`` names the problem."""


class EvaluationError(Exception):
    """An expression failed at run time (a missing map key, a type mismatch ...)."""


_PRIMITIVE = re.compile(r"\b(BOOL|BYTES|DOUBLE|DURATION|DYN|INT|UINT|STRING|TIMESTAMP|NULL|"
                        r"LIST|MAP|TYPE|ERROR|UNKNOWN)\b")
_GO_NAMES = {"NULL": "null_type", "ERROR": "*error*"}


def type_name(cel_type) -> str:
    """A type as cel-go prints it: ``bool``, ``list(string)``, ``map(string, dyn)``."""
    name = _PRIMITIVE.sub(lambda m: _GO_NAMES.get(m.group(1), m.group(1).lower()),
                          cel_type.name())
    return name.replace("<", "(").replace(">", ")")


def _issues(error) -> str:
    """cel-cpp's status text (an exception or an error value) without its status code."""
    text = re.sub(r"^[A-Z_]+: ", "", str(error))
    return re.sub(r"\s*\[[A-Z_]+\]$", "", text)


_NO_SUCH_KEY = re.compile(r'^Key not found in map : "(.*)"$', re.S)
_GO_ERRORS = {"divide by zero": "division by zero", "modulus by zero": "modulus by zero"}


def _go_error(error) -> str:
    """cel-cpp's evaluation error as cel-go words the common ones (``no such key: x``)."""
    text = _issues(error)
    missing = _NO_SUCH_KEY.match(text)
    if missing:
        return f"no such key: {missing.group(1)}"
    return _GO_ERRORS.get(text, text)


@attrs.frozen
class Program:
    """One compiled expression: ``_compiled`` checked (its type, its cost), evaluated as
    ``_environment`` runs it (see ``Environment.runnable``)."""

    source: str
    _compiled: Any = attrs.field(repr=False)
    _environment: Any = attrs.field(repr=False, eq=False)

    def evaluate(self, variables: dict):
        """The value of the expression with ``variables`` bound; ``EvaluationError``."""
        try:
            result = self._environment.runnable(self.source).eval(data=variables)
        except Exception as error:  # the bindings reject a value of the wrong type
            raise EvaluationError(_go_error(error)) from None
        if result.type() == _cel.Type.ERROR:
            raise EvaluationError(_go_error(result.value()))
        return result.plain_value()

    def parsed(self):
        """The syntax tree: a ``cel.expr.ParsedExpr`` (of a program from ``parse``)."""
        return _cost.parsed(self._compiled.serialize())

    def checked(self):
        """The checked AST: a ``cel.expr.CheckedExpr`` (every node's type, every call's
        overloads, every identifier's declaration)."""
        return _cost.checked(self._compiled.serialize())

    def estimated_cost(self, sizes=_cost.UNKNOWN_SIZES) -> int:
        """The most one evaluation may cost (``cost.estimate``), the sizes of variables'
        values asked of ``sizes`` (a ``cost.ISizeEstimator``; by default all unknown)."""
        return _cost.estimate(self.checked(), sizes)


class Environment:
    """
    Variables and their types.  ``messages`` is a ``FileDescriptorProto`` declaring the
    message types the variables use (see ``proto_file``); ``google/protobuf/struct.proto``
    is available to it (``google.protobuf.ListValue``, ``Struct``, ``Value``).
    """

    def __init__(self, variables: dict, messages: descriptor_pb2.FileDescriptorProto | None = None):
        from google.protobuf import descriptor_pool, struct_pb2

        from platformd.cel import library
        from platformd.cel.library import opaque
        cel = _binding()  # ``_cel`` from here on: every Program has an Environment
        self.pool = descriptor_pool.DescriptorPool()
        self.pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
        opaque.add_to(self.pool)
        if messages is not None:
            self.pool.Add(messages)
        self._variables = variables
        self._env = cel.NewEnv(self.pool, config=library.config(), variables=variables,
                               extensions=[library.declarations()])
        self._runtime: Any = None
        self._programs: dict = {}
        self._runnables: dict = {}

    def runnable(self, source: str):
        """
        ``source`` compiled for evaluation: unchecked, in a second environment (made on
        first use) where the Kubernetes libraries' functions are Python functions over
        values of any type (``platformd.cel.library``: the binding cannot run the typed
        overloads the checker sees).  ``CompileError`` when it does not parse.
        """
        found = self._runnables.get(source)
        if found is not None:
            return found
        if self._runtime is None:
            from platformd.cel import library
            self._runtime = _cel.NewEnv(self.pool, config=library.config(),
                                        variables=self._variables,
                                        extensions=[library.implementations()])
        try:
            found = self._runtime.compile(source, disable_check=True)
        except Exception as error:
            raise CompileError("compilation failed: " + _issues(error)) from None
        if len(self._runnables) >= _RUNNABLES:
            self._runnables.clear()
        self._runnables[source] = found
        return found

    def parse(self, source: str) -> Program:
        """``source`` parsed but not type-checked (its variables' values are checked
        when it runs); ``CompileError`` when it does not parse.  ``Program.parsed()``
        is its syntax tree."""
        return Program(source, self.runnable(source), self)

    def message_class(self, full_name: str):
        """The Python class of a declared message, to build variable values with."""
        from google.protobuf import message_factory
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    def compile(self, source: str, *result_types) -> Program:
        """
        The compiled ``source``; ``CompileError`` when it does not parse or type-check,
        or when its type is not one of ``result_types`` (any type when none is given).
        Compiled programs are kept: compiling the same source again costs a dict lookup.
        """
        key = (source, tuple(type_name(t) for t in result_types))
        program = self._programs.get(key)
        if program is not None:
            return program
        try:
            compiled = self._env.compile(source)
        except Exception as error:
            raise CompileError("compilation failed: " + _issues(error)) from None
        got = compiled.return_type()
        if result_types and not any(got == wanted for wanted in result_types):
            if len(result_types) == 1:
                reason = (f"must evaluate to {type_name(result_types[0])} but got "
                          f"{type_name(got)}")
            else:
                reason = f"must evaluate to one of [{' '.join(map(type_name, result_types))}]"
            raise CompileError(reason)
        program = self._programs[key] = Program(source, compiled, self)
        return program


def proto_file(name: str, package: str, messages: dict) -> descriptor_pb2.FileDescriptorProto:
    """
    A proto2 file declaring ``messages``: ``{message name: [(field, type), ...]}``, where a
    type is ``"string"``, ``"repeated string"``, a message name of this package, or
    ``"map<string, google.protobuf.ListValue>"``-style ``"map:<full value type>"``.
    proto2 so that ``has()`` on a set string field is true even when it is empty, as it
    is on upstream's unstructured objects.
    """
    from google.protobuf import descriptor_pb2
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto2")
    fd.dependency.append("google/protobuf/struct.proto")
    Field = descriptor_pb2.FieldDescriptorProto
    for message_name, fields in messages.items():
        message = fd.message_type.add(name=message_name)
        for number, (field_name, kind) in enumerate(fields, 1):
            field = message.field.add(name=field_name, number=number, json_name=field_name,
                                      label=Field.LABEL_OPTIONAL)
            if kind == "string":
                field.type = Field.TYPE_STRING
            elif kind == "repeated string":
                field.type, field.label = Field.TYPE_STRING, Field.LABEL_REPEATED
            elif kind.startswith("map:"):
                entry = message.nested_type.add(name=field_name[0].upper() + field_name[1:]
                                                + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=Field.TYPE_STRING,
                                label=Field.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=Field.TYPE_MESSAGE,
                                label=Field.LABEL_OPTIONAL, type_name="." + kind[4:])
                field.type, field.label = Field.TYPE_MESSAGE, Field.LABEL_REPEATED
                field.type_name = f".{package}.{message_name}.{entry.name}"
            else:
                field.type, field.type_name = Field.TYPE_MESSAGE, f".{package}.{kind}"
    return fd
