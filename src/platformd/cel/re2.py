"""
RE2 itself, through cel-cpp: the standard ``matches`` function is RE2's partial match,
which is Go's ``regexp.MatchString`` (both RE2: same syntax, leftmost-first, and time
linear in the text whatever the pattern).  Python's ``re`` backtracks: ``^(a+)+$`` over
``'a' * 40 + '!'`` takes longer than a client waits, holding the reactor.  So wherever a
user's pattern meets a user's text (a CRD schema's ``pattern``, the ``find``/``findAll``
of CRD rules and policies), the answer whether it matches is asked of RE2 here.

``search(pattern, text)`` is that answer; ``refusal(pattern)`` is Go's error for a
pattern RE2 does not compile (``error parsing regexp: invalid repeat count: `{1001}```,
where RE2 says ``invalid repetition size: {1001}``), None when it compiles.
Each call compiles the pattern anew (cel-cpp does not cache a pattern that is not a
constant): about 20 µs for a short one.  Over the bindings directly, in an environment
of its own with the standard library only: ``platformd.cel``'s libraries use this.
"""

from __future__ import annotations

import functools
from typing import Optional

_PREFIX = "INVALID_ARGUMENT: invalid regular expression: "


@functools.cache
def _matches():
    """The compiled expression and the bindings' module, imported at first use (a server
    without custom resources or CEL imports neither: ``tests/test_startup.py``)."""
    from cel_expr_python import cel
    from google.protobuf import descriptor_pool
    environment = cel.NewEnv(descriptor_pool.DescriptorPool(), variables={
        "text": cel.Type.STRING, "pattern": cel.Type.STRING})
    return environment.compile("text.matches(pattern)"), cel.Type.ERROR


def search(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern`` somewhere, as RE2 (and Go) answer;
    ``ValueError`` with RE2's words for a pattern it does not compile."""
    program, error = _matches()
    result = program.eval(data={"text": text, "pattern": pattern})
    if result.type() == error:
        raise ValueError(str(result.value()).removeprefix(_PREFIX))
    return bool(result.plain_value())


def refusal(pattern: str) -> Optional[str]:
    """Go's ``regexp.Compile`` error for a ``pattern`` RE2 refuses (the words of its
    repetition limit, RE2's own otherwise), None when it compiles."""
    try:
        search(pattern, "")
    except ValueError as error:
        message = str(error)
    else:
        return None
    what, _, fragment = message.partition(": ")
    if what == "invalid repetition size":
        return f"error parsing regexp: invalid repeat count: `{fragment}`"
    return f"error parsing regexp: {message}"
