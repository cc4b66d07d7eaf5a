"""Settings that differ by the kind of device a run uses, written ``{cpu: 64, cuda: 4096}`` in a config file."""

from __future__ import annotations

from typing import Any, Mapping


def per_device(value: Any, device_type: str, key: str) -> Any:
    """``value`` itself, or its entry for ``device_type`` (``cpu``, ``cuda``) when it is a mapping; ValueError
    naming ``key`` when that entry is missing."""
    if not isinstance(value, Mapping):
        return value
    if device_type not in value:
        raise ValueError(f"{key}={dict(value)!r}: no entry for the device type {device_type!r}")
    return value[device_type]
