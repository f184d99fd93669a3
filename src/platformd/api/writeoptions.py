"""
The options of a write (``dryRun``, ``fieldValidation``, ``fieldManager``, ``force``),
validated as upstream's ``ValidateCreateOptions`` / ``ValidateUpdateOptions`` /
``ValidatePatchOptions`` validate them: a bad value is 422 Invalid on kind
``CreateOptions``, ``UpdateOptions`` or ``PatchOptions`` (group ``meta.platform.io``),
naming the option.
"""

from __future__ import annotations

import attrs

from platformd import errors
from platformd.model import fielderrors as fe

OPTION_KINDS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions",
                "delete": "DeleteOptions", "deletecollection": "DeleteOptions"}
FIELD_VALIDATION = ("Ignore", "Strict", "Warn")
MAX_MANAGER = 128


@attrs.frozen
class WriteOptions:
    dry_run: bool
    field_validation: str
    field_manager: str
    force: bool


def default_manager(user_agent: str) -> str:
    """Upstream's default field manager: the User-Agent up to its first '/'."""
    return user_agent.split("/", 1)[0][:MAX_MANAGER] or "unknown"


def dry_run_causes(values) -> list:
    bad = [v.decode("utf-8", "replace") for v in values if v not in (b"All", b"")]
    return [fe.not_supported("dryRun", bad[0] if len(bad) == 1 else bad, ["All"])] if bad else []


def invalid(verb: str, causes) -> errors.StatusError:
    return errors.invalid(OPTION_KINDS[verb], "meta.platform.io", "", causes)


def parse(call, apply: bool = False) -> WriteOptions:
    """The write options of ``call``, or 422 Invalid naming every bad one."""
    dry_values = call.values("dryRun")
    causes = dry_run_causes(dry_values or ())
    level = call.arg("fieldValidation") or "Warn"
    if level not in FIELD_VALIDATION:
        causes.append(fe.not_supported("fieldValidation", level, FIELD_VALIDATION))
    manager = call.arg("fieldManager")
    if manager is not None:
        if len(manager) > MAX_MANAGER:
            causes.append(fe.too_long("fieldManager", MAX_MANAGER))
        elif not manager.isprintable():
            causes.append(fe.invalid("fieldManager", manager, "must consist of printable "
                                     "characters"))
    force = False
    if call.has_arg("force"):
        if call.info.verb != "patch" or not apply:
            causes.append(fe.forbidden("force", "may not be specified for non-apply patch"))
        else:
            force = call.bool_arg("force")
    if apply and not manager:
        causes.append(fe.required("fieldManager", "is required for apply patch"))
    if causes:
        raise invalid(call.info.verb, causes)
    if not manager:
        agent = call.request.getHeader(b"user-agent") or b""
        manager = default_manager(agent.decode("utf-8", "replace"))
    return WriteOptions(dry_values is not None, level, manager, force)
