"""Patch kinds (spec 4.7.2): JSON patch, merge patch, strategic merge patch."""
