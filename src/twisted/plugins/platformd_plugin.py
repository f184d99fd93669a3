"""``twistd platformd``: the daemon as a twistd plugin."""

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from zope.interface import implementer


@implementer(IServiceMaker, IPlugin)
class PlatformdServiceMaker:
    tapname = "platformd"
    description = "A standards-faithful API server for a container platform's control plane."

    @property
    def options(self):
        # Imported lazily: twistd loads every plugin to list them.
        from platformd.options import CommandLineOptions
        return CommandLineOptions

    def makeService(self, options):
        from platformd.service import make_service
        return make_service(options)


serviceMaker = PlatformdServiceMaker()
