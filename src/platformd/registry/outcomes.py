"""
What one step of a compare-and-swap update decides (``GenericStore.guaranteed_update``):
write an object, remove it, or keep it as it is and answer with it.
"""

from __future__ import annotations

from typing import Optional

import attrs


@attrs.define(eq=False)
class Write:
    """Store ``obj`` (create it when there is no object yet)."""

    obj: dict
    #: Set by the store: whether the write created the object.
    created: bool = False
    #: The transactions of what the kind's hooks took (and gave back) for it (a
    #: Service's address), through which the store writes it (``IWriteHooks``).
    transactions: Optional[list] = None


@attrs.define(eq=False)
class Remove:
    """Remove the object; ``obj`` is what the request answers with."""

    obj: dict


@attrs.define(eq=False)
class Keep:
    """Write nothing; answer with ``obj``."""

    obj: Optional[dict]
