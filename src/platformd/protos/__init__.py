"""
Code generated from proto/ by ``python -m platformd.protos.generate``: do not edit.
"""
