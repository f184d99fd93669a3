"""
CustomResourceDefinitions (``apiextensions.platform.io/v1``): their schemas (``schema``:
the structural-schema library), what a definition must be (``validation``), which of its
names are accepted (``naming``, upstream's naming controller's rules), JSONPath for
printer columns and scale (``jsonpath``), and the one seam to the schema library
(``schemas``).  Pure functions over dicts: the kind is
``registry/kinds/customresourcedefinition.py``, the served kinds
``registry/customresources.py``, the controller ``controllers/customresources.py``
(docs/customresources.md).
"""
