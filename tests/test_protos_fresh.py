"""
The generated code under ``src/platformd/protos`` matches the ``.proto`` sources under
``proto/``: a change to a .proto without ``python -m platformd.protos.generate`` fails
here, and so does a hand edit of generated code.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.protos import generate

#: The checkout holding ``proto/`` and ``src/`` (the suite imports the installed package).
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tree(base: str) -> dict:
    """Every ``.py`` file under each namespace in ``base`` by relative path, with its bytes."""
    files = {}
    for directory, _dirs, names in generate.walk(base):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, base)] = f.read()
    return files


class GeneratedCodeTests(SynchronousTestCase):
    def setUp(self):
        self.fresh = os.path.abspath(self.mktemp())
        os.makedirs(self.fresh)
        generate.generate(self.fresh, CHECKOUT)
        self.checked_in = os.path.join(CHECKOUT, generate.PACKAGE_DIR)

    def test_generated_code_is_fresh(self):
        """Regenerating from proto/ reproduces the checked-in modules byte for byte."""
        fresh, checked_in = _tree(self.fresh), _tree(self.checked_in)
        self.assertEqual(sorted(fresh), sorted(checked_in),
                         "generated files differ: run python -m platformd.protos.generate")
        stale = [path for path in fresh if fresh[path] != checked_in[path]]
        self.assertEqual(stale, [], "stale generated code: run python -m platformd.protos.generate")
