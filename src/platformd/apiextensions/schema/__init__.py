"""CustomResourceDefinition schemas: structural checks, defaulting, pruning, validation, rules (``structural``)."""
