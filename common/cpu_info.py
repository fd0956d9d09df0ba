"""This machine's CPU as ``/proc/cpuinfo`` describes it: what a device cache and a results
folder are keyed by."""

from __future__ import annotations


def cpuinfo() -> dict[str, str]:
    """The first processor's fields in ``/proc/cpuinfo`` (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields
