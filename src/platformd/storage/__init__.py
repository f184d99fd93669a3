"""Durable storage backends behind one narrow interface (see interface.py)."""
