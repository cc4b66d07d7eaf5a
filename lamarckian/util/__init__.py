"""Compatibility paths of the seed project."""
