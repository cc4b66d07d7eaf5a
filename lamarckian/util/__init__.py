"""Compatibility paths of the original Lamarckian (its users import lamarckian.util.rpc)."""
