"""The apiextensions kind, named for callers (``apiextensions.CUSTOM_RESOURCE_DEFINITION``)."""

from platformd.registry.kinds import customresourcedefinition

CUSTOM_RESOURCE_DEFINITION = customresourcedefinition.KIND
