"""
Reading a request body into an object of the target kind, with field validation
(spec 4.8.3, 4.8.4).

Order of failures matches upstream's create and update handlers: a body that does not
parse, or has a field of the wrong type, fails first (400, that error alone); then its
unknown and duplicate fields are reported per ``fieldValidation`` (``fieldvalidation.py``:
``Strict``: 400 naming them all, before any validation; ``Warn``: one ``Warning`` header
each; ``Ignore``: dropped silently); then defaulting and validation (422, with the
warnings) run in the store.
"""

from __future__ import annotations

from platformd import errors
from platformd.api import fieldvalidation
from platformd.codecs.interface import CodecError
from platformd.model.schema import DecodeContext, DecodeError

#: Upstream's ``MaxRequestBodyBytes`` (server/config.go: 3 MiB, no flag).  The site
#: keeps at most one byte more of any body (``request.APIRequest``).
MAX_BODY = 3 * 1024 * 1024


def too_large() -> errors.StatusError:
    """handlers/rest.go ``limitedReadBody``: ``NewRequestEntityTooLargeError``."""
    return errors.StatusError(413, "RequestEntityTooLarge",
                              f"Request entity too large: limit is {MAX_BODY}")


def read_body(call) -> bytes:
    content = call.request.content
    data = content.read(MAX_BODY + 1) if content is not None else b""
    if len(data) > MAX_BODY:
        raise too_large()
    return data


def decode_object(call, level: str, schema, kind_name: str, api_version: str,
                  data: bytes | None = None, other_versions=()) -> dict:
    """
    The body as a pruned object of ``schema``; warnings go on the call.  Its apiVersion,
    if given, must be ``api_version`` or one of ``other_versions``.
    """
    codec = call.negotiator.for_request(call.request.getHeader(b"content-type"), api_version,
                                        kind_name)
    if data is None:
        data = read_body(call)
    if not data.strip():
        raise errors.bad_request("the body of the request was empty")

    def cannot_handle(problem: str) -> errors.StatusError:
        # handlers/rest.go transformDecodeError: a plain BadRequest, no details.
        return errors.bad_request(f"{kind_name} in version \"{_version(api_version)}\" cannot "
                                  f"be handled as a {kind_name}: {problem}")
    try:
        value, problems = fieldvalidation.parse(codec, data)
    except CodecError as e:
        raise cannot_handle(str(e)) from None
    if not isinstance(value, dict):
        raise cannot_handle("the body must be an object")
    _check_type(value, kind_name, api_version, other_versions)
    ctx = DecodeContext()
    try:
        obj = schema.decode(value, "", ctx)
    except DecodeError as e:
        raise cannot_handle(str(e)) from None
    fieldvalidation.report(call, level, problems + ctx.texts(), cannot_handle)
    call.context.audit_request(obj)
    return obj


def _version(api_version: str) -> str:
    return api_version.rsplit("/", 1)[-1]


def _check_type(value: dict, kind_name: str, api_version: str, other_versions) -> None:
    """A body of another kind or version is refused, as upstream's decoder refuses it."""
    kind = value.get("kind")
    version = value.get("apiVersion")
    if kind not in (None, "") and kind != kind_name:
        raise errors.bad_request(
            f'the kind "{kind}" of the body does not match the kind "{kind_name}" '
            "served at this path")
    if version not in (None, "", api_version, *other_versions):
        raise errors.bad_request(
            f'the API version in the data ({version}) does not match the expected API '
            f"version ({api_version})")
