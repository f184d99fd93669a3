"""The one exception of encryption at rest's configuration."""

from __future__ import annotations


class EncryptionConfigError(Exception):
    """
    An ``EncryptionConfiguration`` that cannot be used: unreadable, undecodable, invalid
    (upstream's field errors, their words and paths) or naming a provider that cannot be
    built.  ``str()`` is one line.
    """

    def __init__(self, message: str):
        super().__init__(" ".join(message.split("\n")))
        self.message = str(self.args[0])

    def __str__(self) -> str:
        return self.message
