"""RFC 7386 JSON merge patch: small enough that a library would add nothing."""


def merge_patch(target, patch):
    """Apply ``patch`` to ``target`` (neither is modified); the merged value."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
