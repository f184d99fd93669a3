"""
What ``pip install .`` ships: every module of the checkout's ``src/`` and the ``twistd
platformd`` plugin, and (under tox, ``PLATFORMD_TEST_INSTALLED=1``) a ``platformd`` imported
from the installed wheel rather than the checkout, so a module missing from the wheel fails
the suite instead of passing unnoticed.
"""

from __future__ import annotations

import os
import sysconfig

from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins
from twisted.trial.unittest import SynchronousTestCase

import platformd

#: The checkout this suite lives in.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(CHECKOUT, "src", "platformd")
INSTALLED = os.path.dirname(os.path.abspath(platformd.__file__))


def _modules(root: str) -> set:
    """Every ``.py`` file under ``root``, relative to it."""
    found = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.update(os.path.relpath(os.path.join(directory, f), root)
                     for f in files if f.endswith(".py"))
    return found


class InstalledPackageTests(SynchronousTestCase):
    def test_every_module_installed(self):
        """Each module under src/platformd is in the imported package."""
        missing = sorted(_modules(SOURCE) - _modules(INSTALLED))
        self.assertEqual(missing, [], "modules missing from the installed package")

    def test_plugin_installed(self):
        """twistd finds ``platformd`` among its plugins."""
        import twisted.plugins
        names = [p.tapname for p in getPlugins(IServiceMaker, twisted.plugins)]
        self.assertIn("platformd", names)

    def test_imported_from_the_installed_wheel(self):
        """Under tox the suite tests the wheel: platformd is the venv's site-packages one."""
        if os.environ.get("PLATFORMD_TEST_INSTALLED") != "1":
            raise self.skipTest("PLATFORMD_TEST_INSTALLED=1 (tox) asks for the installed wheel")
        purelib = os.path.realpath(sysconfig.get_paths()["purelib"])
        self.assertEqual(os.path.dirname(os.path.realpath(INSTALLED)), purelib,
                         "platformd is not the installed package")
