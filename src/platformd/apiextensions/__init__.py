"""CustomResourceDefinitions: their kind, their schemas (``schema``), the serving of custom objects."""
