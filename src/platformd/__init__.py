"""platformd: a standards-faithful API server for a container platform's control plane."""

__version__ = "0.1.0"
