"""
``x-kubernetes-validations``: compiling a node's rules (upstream's
``pkg/apiserver/schema/cel/compilation.go`` with the checks of
``ValidateCustomResourceDefinitionOpenAPISchema``) and evaluating them against an object
and its previous version (``cel/validation.go``).

Compilation type-checks a rule against its schema: ``self`` and ``oldSelf`` are the
protobuf messages ``celtypes`` declares, so a misspelt field is ``undefined field 'x'``
and a type error ``found no matching overload`` when the CRD is written, as upstream.
A rule's result must be a bool (``cel expression must evaluate to a bool``), a
messageExpression's a string.  Evaluation compiles the rule again, unchecked, over
``dyn`` variables bound to the object's values (``celtypes.cel_value``; only the parts
the node's rules select, ``celpaths``): a field absent from the object is ``no such
key: x evaluating rule: ...``, as upstream.

Evaluation follows upstream: rules using ``oldSelf`` (transition rules) run only where an
old value correlates (same property, same map key, same map-list key); an
``optionalOldSelf: true`` rule runs everywhere, its ``oldSelf`` an optional (of the old
value where one correlates, else empty), as it was type-checked; a rule without
``oldSelf`` failing on a value equal to its old one is let through (ratcheting); a
false rule gives
``fieldErrorForReason`` of its message, its messageExpression's value, or ``failed rule:
<rule>``, at the node's path plus ``fieldPath``; an object's or list's value is omitted
from the message, a scalar's shown.  The static cost (``cost``) is enforced when the CRD
is written; cel-expr-python measures no cost at run time, so neither ``PerCallLimit``
nor ``RuntimeCELCostBudget`` is enforced when objects are validated.
"""

from __future__ import annotations

import functools
import re
from typing import Optional

from platformd import cel
from platformd.apiextensions.schema import causes, cost
from platformd.apiextensions.schema.node import RULES, Node
from platformd.apiextensions.schema.paths import child, index


@functools.cache
def _environment() -> cel.Environment:
    """The environment rules are evaluated in: ``self`` and ``oldSelf`` are dyn, bound
    to ``celtypes.cel_value`` of the object.  Made at the first rule (CEL's library is
    imported then, not with this module)."""
    return cel.Environment({"self": cel.DYN, "oldSelf": cel.DYN})


_RUNTIME: dict = {}
_RUNTIME_LIMIT = 4096


def _runtime(source: str, optional: bool = False):
    """
    ``source`` compiled for evaluation, and whether it uses ``oldSelf``; ``(None,
    False)`` when it does not parse.  A rule that type-checked against its schema
    (``compile_causes``) is compiled here without checking: cel-cpp's checker refuses
    some expressions over ``dyn`` that are fine over the schema's types (a comprehension
    over ``self.m['k']``), and the values are dynamic anyway.  An ``optional`` rule
    (``optionalOldSelf``) runs inside ``_OPTIONAL_RUNTIME``, which makes ``oldSelf`` an
    optional: empty when it is bound to null (no old value), else of the old value.
    """
    found = _RUNTIME.get((source, optional))
    if found is not None:
        return found
    env = _environment()
    try:
        program = env.parse(source)
        if optional:
            program = env.parse(_OPTIONAL_RUNTIME.format(source))
    except cel.CompileError:
        return None, False
    found = (program, _names(env.parse(source).parsed().expr, "oldSelf"))
    if len(_RUNTIME) >= _RUNTIME_LIMIT:
        _RUNTIME.clear()
    _RUNTIME[(source, optional)] = found
    return found


#: An ``optionalOldSelf`` rule as it runs and as it is checked: cel-expr-python cannot
#: bind a variable to an optional value, so the rule is the body of a one-element
#: ``map`` whose element, named ``oldSelf``, is the optional (CEL has no other binding
#: here: upstream's environment has no ``cel.bind``).  The rule starts a line of its
#: own, so a compile error's line is one more than upstream's (``_unwrapped_error``).
_OPTIONAL_RUNTIME = "[oldSelf == null ? optional.none() : optional.of(oldSelf)].map(oldSelf,\n{}\n)[0]"
_OPTIONAL_CHECKED = "[optional.of(oldSelf)].map(oldSelf,\n{}\n)[0]"
_LINE = re.compile(r"<input>:(\d+):")


def _unwrapped_error(problem: str) -> str:
    """A compile error of a wrapped rule as upstream words it for the rule alone."""
    return _LINE.sub(lambda m: f"<input>:{int(m.group(1)) - 1}:", problem)


def _unwrapped(program):
    """The checked AST of a wrapped rule (``_OPTIONAL_CHECKED``) reduced to the rule's
    own: the map's loop step is ``accumulator + [rule]``."""
    tree = program.checked()
    comprehension = tree.expr.call_expr.args[0].comprehension_expr
    tree.expr.CopyFrom(comprehension.loop_step.call_expr.args[1].list_expr.elements[0])
    return tree


def _names(expr, name: str) -> bool:
    """Whether the parsed ``expr`` refers to the variable ``name``."""
    kind = expr.WhichOneof("expr_kind")
    if kind == "ident_expr":
        return expr.ident_expr.name == name
    if kind == "select_expr":
        return _names(expr.select_expr.operand, name)
    if kind == "call_expr":
        call = expr.call_expr
        return call.HasField("target") and _names(call.target, name) or any(
            _names(a, name) for a in call.args)
    if kind == "list_expr":
        return any(_names(e, name) for e in expr.list_expr.elements)
    if kind == "struct_expr":
        return any(_names(e.value, name) or e.WhichOneof("key_kind") == "map_key" and
                   _names(e.map_key, name) for e in expr.struct_expr.entries)
    if kind == "comprehension_expr":
        c = expr.comprehension_expr
        if name in (c.iter_var, c.iter_var2, c.accu_var):
            return _names(c.iter_range, name) or _names(c.accu_init, name)
        return any(_names(e, name) for e in (c.iter_range, c.accu_init, c.loop_condition,
                                             c.loop_step, c.result))
    return False

_STRUCT = re.compile(r"(undefined field '[^']*') not found in struct '[^']*'")


def _compile(source: str, env: cel.Environment, optional: bool = False):
    """``source`` compiled against its schema (wrapped if ``optional``: an
    ``optionalOldSelf`` rule's), or its error as upstream words it."""
    try:
        if optional:
            return env.compile(_OPTIONAL_CHECKED.format(source)), None
        return env.compile(source), None
    except cel.CompileError as error:
        # cel-cpp names the message; cel-go does not
        problem = _STRUCT.sub(r"\1", str(error))
        return None, _unwrapped_error(problem) if optional else problem


def _uses_old_self(program) -> bool:
    tree = program.checked()
    return any(ref.name == "oldSelf" for ref in tree.reference_map.values())


def _result_type(program) -> str:
    return cel.type_name(program._compiled.return_type())


def _go_rule(rule: dict):
    """The internal ValidationRule as field.Error prints it (Go field names, no tags)."""
    from platformd.model.fielderrors import go_json
    return go_json({"Rule": rule.get("rule", ""), "Message": rule.get("message", ""),
                    "MessageExpression": rule.get("messageExpression", ""),
                    "Reason": rule.get("reason"), "FieldPath": rule.get("fieldPath", ""),
                    "OptionalOldSelf": rule.get("optionalOldSelf")})


def _cardinality_for(node: Node, cardinality: Optional[int], resource_root: bool) -> int:
    if cardinality is not None:
        return cardinality
    return cost.unbounded_cardinality(node, resource_root)


def compile_causes(node: Node, path: str, resource_root: bool, uncorrelatable: Optional[str],
                   total: cost.Total, cardinality: Optional[int]) -> list:
    """The compile errors and estimated-cost errors of ``node``'s rules, type-checked
    against the schema (``celtypes``)."""
    from platformd.apiextensions.schema import celtypes  # protobuf: only with rules
    out: list = []
    times = _cardinality_for(node, cardinality, resource_root)
    env = celtypes.Declarations(node, resource_root).environment()
    for i, rule in enumerate(node.rules):
        where = index(child(path, "x-kubernetes-validations"), i)
        source = rule.get("rule") or ""
        if not source.strip():
            continue
        optional = rule.get("optionalOldSelf") is True
        program, problem = _compile(source, env, optional)
        estimated = 0
        if program is not None:
            if _result_type(program) != "bool":
                problem = "cel expression must evaluate to a bool"
            else:
                estimated = cost.guarded_product(cost.estimate(
                    _unwrapped(program) if optional else program, node, resource_root),
                    times)
        if estimated > cel.STATIC_ESTIMATED_COST_LIMIT:
            out.append(causes.forbidden(child(where, "rule"), cost.message(
                "estimated rule cost", estimated, cel.STATIC_ESTIMATED_COST_LIMIT)))
        total.observe(child(where, "rule"), estimated)
        if problem is not None:
            out.append(causes.invalid(child(where, "rule"), _go_rule(rule), problem))
            continue
        expression = rule.get("messageExpression") or ""
        if expression:
            message_program, message_problem = _compile(expression, env, optional)
            if message_program is None:
                out.append(causes.invalid(child(where, "messageExpression"), _go_rule(rule),
                                          "messageExpression " + (message_problem or "")))
            elif _result_type(message_program) != "string":
                out.append(causes.invalid(child(where, "messageExpression"), _go_rule(rule),
                                          "messageExpression must evaluate to a string"))
            else:
                message_cost = cost.guarded_product(cost.estimate(
                    _unwrapped(message_program) if optional else message_program, node,
                    resource_root), times)
                if message_cost > cel.STATIC_ESTIMATED_COST_LIMIT:
                    out.append(causes.forbidden(child(where, "messageExpression"), cost.message(
                        "estimated messageExpression cost", message_cost,
                        cel.STATIC_ESTIMATED_COST_LIMIT)))
                total.observe(child(where, "messageExpression"), message_cost)
        assert program is not None
        if _runtime(source)[1] if optional else _uses_old_self(program):
            if uncorrelatable is not None:
                out.append(causes.invalid(child(where, "rule"), source, "oldSelf cannot be used "
                                          "on the uncorrelatable portion of the schema within "
                                          f"{uncorrelatable}"))
        elif rule.get("optionalOldSelf") is not None:
            out.append(causes.invalid(child(where, "optionalOldSelf"), rule["optionalOldSelf"],
                                      "may not be set if oldSelf is not used in rule"))
    return out


# -- fieldPath -------------------------------------------------------------------------

def _tokens(text: str) -> list:
    """upstream's scanner: ``.``, ``[``, ``]`` alone, single-quoted strings whole, the
    text between them."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "'":
            j = i + 1
            while j < len(text) and not (text[j] == "'" and text[j - 1] != "\\"):
                j += 1
            out.append(text[i:j + 1])
            i = j + 1
        elif char in ".[]":
            out.append(char)
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in ".[]":
                j += 1
            out.append(text[i:j])
            i = j
    return out


_UNESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
              "v": "\v", "'": "'", '"': '"', "\\": "\\"}


def field_path(text: str, node: Node) -> Optional[str]:
    """
    ``ValidFieldPath``: the field path (``spec.x``, ``labels[key]``) that ``text``
    (``.spec.x``, ``['labels'].key``) names in ``node``'s schema, None when it names
    none.  Lists cannot be indexed.
    """
    tokens = _tokens(text)
    out = ""
    current = node
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "[":
            if i + 2 >= len(tokens) or tokens[i + 2] != "]":
                return None
            quoted = tokens[i + 1]
            if len(quoted) < 2 or quoted[0] != "'" or quoted[-1] != "'":
                return None
            try:
                name = re.sub(r"\\(.)", lambda m: _UNESCAPES[m.group(1)], quoted[1:-1])
            except KeyError:
                return None
            i += 3
        elif token == ".":
            if i + 1 >= len(tokens):
                return None
            name = tokens[i + 1]
            i += 2
        else:
            return None
        if current.properties:
            found = current.properties.get(name)
            if found is None:
                return None
            out = f"{out}.{name}" if out else name
            current = found
        elif current.additional_allows:
            out = f"{out}[{name}]"
            if current.additional is None:
                return out if i >= len(tokens) else None
            current = current.additional
        else:
            return None
    return out or None


# -- evaluation ------------------------------------------------------------------------


def _reason_cause(path: str, node: Node, value, detail: str, reason: Optional[str]):
    shown = value
    if reason == "FieldValueForbidden":
        return causes.forbidden(path, detail)
    if reason == "FieldValueRequired":
        return causes.required(path, detail)
    if node.type in ("object", "array"):
        kind = "FieldValueDuplicate" if reason == "FieldValueDuplicate" else "FieldValueInvalid"
        word = "Duplicate value" if kind == "FieldValueDuplicate" else "Invalid value"
        body = word if kind == "FieldValueDuplicate" else f"{word}: {detail}"
        return causes.Cause(kind, body, path)
    if reason == "FieldValueDuplicate":
        return causes.duplicate(path, shown)
    return causes.invalid(path, shown, detail)


def _message_of(rule: dict) -> str:
    message = rule.get("message") or ""
    return message.strip() if message else (rule.get("rule") or "").strip()


def validate(node: Node, value, old, path: str, root: bool = False,
             ratchet: bool = True) -> list:
    """The causes of ``node``'s rules, and its descendants', for ``value`` (``old``: its
    previous version, None on create); ``ratchet``: a rule without oldSelf failing on
    a value equal to its old one is let through (CRDValidationRatcheting)."""
    out: list = []
    _walk(node, value, old, path, out, old is not None, ratchet)
    return out


def validate_default(node: Node, value, path: str) -> list:
    """A default's rules, as ``defaulting.ValidateDefaults`` runs them: with the default
    as its own old value (no ratcheting), then, if that passed, as on create."""
    out = validate(node, value, value, path, ratchet=False)
    if not out:
        out = validate(node, value, None, path)
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(node: Node, value, old, path: str, out: list, has_old: bool,
          ratchet: bool = True) -> None:
    if value is None or RULES not in node.below:
        return
    if node.rules:
        _evaluate(node, value, old if has_old else None, path, out, has_old, ratchet)
    if isinstance(value, dict):
        old_map = old if has_old and isinstance(old, dict) else None
        for key, item in value.items():
            sub = node.properties.get(key)
            where = _join(path, key)
            if sub is None:
                sub = node.additional
                where = f"{path}[{key}]"
            if sub is None:
                continue
            previous = None
            correlated = False
            if old_map is not None and key in old_map and node.map_type != "atomic":
                previous, correlated = old_map[key], True
            _walk(sub, item, previous, where, out, correlated, ratchet)
    elif isinstance(value, list) and node.items is not None:
        olds: dict = {}
        if has_old and isinstance(old, list) and node.list_type == "map":
            for item in old:
                if isinstance(item, dict):
                    olds[_map_key(item, node)] = item
        for i, item in enumerate(value):
            previous = olds.get(_map_key(item, node)) if isinstance(item, dict) and olds \
                else None
            _walk(node.items, item, previous, f"{path}[{i}]", out, previous is not None,
                  ratchet)


def _map_key(item: dict, node: Node) -> tuple:
    return tuple(repr(item.get(k)) for k in node.list_map_keys)


#: ``MaxEvaluatedMessageExpressionSizeBytes``.
MAX_MESSAGE = 5 * 1024


def _evaluate(node: Node, value, old, path: str, out: list, has_old: bool,
              ratchet: bool = True) -> None:
    variables: Optional[dict] = None
    for rule in node.rules:
        source = rule.get("rule") or ""
        if not source.strip():
            continue
        optional = rule.get("optionalOldSelf") is True
        program, uses_old_self = _runtime(source, optional)
        if program is None:
            out.append(causes.invalid(path, node.type, "rule compile error: compilation "
                                      "failed"))
            continue
        if uses_old_self and not has_old and not optional:
            continue
        if variables is None:
            from platformd.apiextensions.schema import celpaths  # protobuf: only with rules
            reads_self, reads_old = _reads(node)
            variables = {"self": celpaths.bound(node, value, reads_self),
                         "oldSelf": celpaths.bound(node, old, reads_old) if has_old else None}
        try:
            result = program.evaluate(variables)
        except cel.EvaluationError as error:
            text = str(error)
            if text.startswith("no such overload") or text.startswith("No matching overload"):
                problem = (f"'{text}': call arguments did not match a supported operator, "
                          f"function or macro signature for rule: {_message_of(rule)}")
            else:
                problem = f"{text} evaluating rule: {_message_of(rule)}"
            out.append(causes.invalid(path, node.type, problem))
            continue
        if result is True:
            continue
        if ratchet and not uses_old_self and has_old and old == value:
            # CRDValidationRatcheting: an unchanged value keeps passing (upstream warns)
            continue
        where = path
        relative = rule.get("fieldPath")
        if relative:
            normalized = field_path(relative, node)
            if normalized:
                where = _join(path, normalized)
        detail: Optional[str] = None
        expression = rule.get("messageExpression") or ""
        if expression:
            detail = _message(expression, variables, optional)
        if detail is None:
            message = rule.get("message") or ""
            detail = message.strip() if message else f"failed rule: {source.strip()}"
        out.append(_reason_cause(where, node, value, detail, rule.get("reason")))


def _reads(node: Node) -> tuple:
    """What the node's rules and messageExpressions read of ``self`` and ``oldSelf``
    (``celpaths.trie``s), found once per node."""
    if node.cel_reads is None:
        from platformd.apiextensions.schema import celpaths
        found: dict = {"self": set(), "oldSelf": set()}
        for rule in node.rules:
            source = rule.get("rule") or ""
            if not source.strip():
                continue
            optional = rule.get("optionalOldSelf") is True
            for text in (source, rule.get("messageExpression") or ""):
                program = _runtime(text, optional)[0] if text else None
                if program is None:
                    continue
                expr = program.parsed().expr
                for name, paths in found.items():
                    if paths is not None:
                        more = celpaths.reads(expr, name)
                        found[name] = None if more is None else paths | more
        node.cel_reads = (celpaths.trie(_frozen(found["self"])),
                          celpaths.trie(_frozen(found["oldSelf"])))
    return node.cel_reads


def _frozen(paths: Optional[set]) -> Optional[frozenset]:
    return None if paths is None else frozenset(paths)


def _message(expression: str, variables: dict, optional: bool) -> Optional[str]:
    """A messageExpression's message; None (the rule's message is used) when it fails,
    is empty, too long or spans lines, as upstream (which logs why)."""
    program, _uses_old_self = _runtime(expression, optional)
    if program is None:
        return None
    try:
        text = program.evaluate(variables)
    except cel.EvaluationError:
        return None
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not text or len(text.encode()) > MAX_MESSAGE or "\n" in text:
        return None
    return text
