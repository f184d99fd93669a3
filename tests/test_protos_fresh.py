"""
The generated code under ``platformd/protos`` matches the ``.proto`` sources under
``proto/``: a change to a .proto without ``python -m platformd.protos.generate`` fails
here, and so does a hand edit of generated code.
"""

from __future__ import annotations

import configparser
import os

from twisted.trial.unittest import SynchronousTestCase

from platformd.protos import generate


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
        generate.generate(self.fresh)
        self.checked_in = os.path.join(generate.repository_root(), generate.PACKAGE_DIR)

    def test_generated_code_is_fresh(self):
        """Regenerating from proto/ reproduces the checked-in modules byte for byte."""
        fresh, checked_in = _tree(self.fresh), _tree(self.checked_in)
        self.assertEqual(sorted(fresh), sorted(checked_in),
                         "generated files differ: run python -m platformd.protos.generate")
        stale = [path for path in fresh if fresh[path] != checked_in[path]]
        self.assertEqual(stale, [], "stale generated code: run python -m platformd.protos.generate")

    def test_setup_cfg_lists_generated_packages(self):
        """Every generated package is installed: setup.cfg names each one."""
        config = configparser.ConfigParser()
        config.read(os.path.join(generate.repository_root(), "setup.cfg"))
        listed = set(config["options"]["packages"].split())
        missing = sorted(set(generate.packages(self.fresh)) - listed)
        self.assertEqual(missing, [], "add these to setup.cfg [options] packages")
