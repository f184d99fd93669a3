"""
``fieldValidation`` (spec 4.8.3, 4.8.4): what a write does with the strict problems of
its body, as upstream's handlers do (``endpoints/handlers``: create.go, update.go,
patch.go, rest.go).

A problem is one of upstream's strict decoding errors: sigs.k8s.io/json's ``unknown
field "a.b"`` and ``duplicate field "a.c"``, ``json patch unknown field "[0].x"`` for a
JSON patch's operations, and go-yaml's ``yaml: unmarshal errors:\\n  line 5: key "name"
already set in map`` for a YAML document's repeated keys.  ``Strict``: the request fails
with ``refuse`` of runtime's ``NewStrictDecodingError`` (``strict decoding error: `` and
the problems), each handler wording the refusal as upstream's does; ``Warn`` (the
default): one warning per problem, a YAML error's lines one each
(``addStrictDecodingWarnings``, ``parseYAMLWarnings``), and the request goes on, so a
later refusal (422 Invalid, 409) carries them; ``Ignore``: nothing.  A body that cannot
be decoded at all (a field of the wrong type) fails before any of this, alone.
"""

from __future__ import annotations

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"

#: How go-yaml's strict errors begin, bare or as ``sigs.k8s.io/yaml.Unmarshal`` wraps
#: them (rest.go's ``shortPrefix`` and ``longPrefix``).
_YAML_PREFIXES = ("yaml: unmarshal errors:\n",
                  "error converting YAML to JSON: yaml: unmarshal errors:\n")


def report(call, level: str, problems, refuse, worded=None) -> None:
    """
    Refuse (``Strict``: ``refuse(worded(problems))``, ``worded`` being runtime's
    ``strict_error`` unless the handler words it otherwise), warn of (``Warn``) or drop
    (``Ignore``) ``problems``.
    """
    if not problems or level == IGNORE:
        return
    if level == STRICT:
        raise refuse((worded or strict_error)(problems))
    for problem in problems:
        for text in warnings_of(problem):
            call.warn(text)


def strict_error(problems) -> str:
    """runtime's ``strictDecodingError.Error()``."""
    return "strict decoding error: " + ", ".join(problems)


def warnings_of(problem: str) -> list:
    """rest.go ``parseYAMLWarnings``: a go-yaml error's lines, or the problem as it is."""
    for prefix in _YAML_PREFIXES:
        if problem.startswith(prefix):
            return [line.strip() for line in problem[len(prefix):].split("\n")]
    return [problem]


def parse(codec, data: bytes) -> tuple:
    """
    ``(value, problems)``: the body, and the strict problems its parser finds itself
    (YAML's repeated keys; JSON's are marked in the value for the schema walk to name in
    order).
    """
    strict = getattr(codec, "decode_strict", None)
    return strict(data) if strict is not None else (codec.decode(data), [])
