"""Lamarckian: distributed evolutionary reinforcement learning and self-play."""

__version__ = "0.1.0"
