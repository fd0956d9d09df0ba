"""This machine's CPU as ``/proc/cpuinfo`` describes it: what a device cache, a results
folder and a shipped calibration are keyed by.

A machine is named from its CPU: ``amd-epyc-family25-model17-2cpus`` (model name, CPU family
and model, logical CPUs)."""

from __future__ import annotations

import os
import re


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


def machine_name(model_name: str, family: str | int, model: str | int, cpus: int) -> str:
    """A folder name for a CPU: ``AMD EPYC``, family 25, model 17, 2 CPUs ->
    ``amd-epyc-family25-model17-2cpus``."""
    name = re.sub(r"\((r|tm)\)|\bprocessor\b|\bcpu\b|@.*$", " ", model_name.lower())
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "cpu"
    return f"{slug}-family{family}-model{model}-{cpus}cpus"


def this_machine() -> str:
    """This machine's name (from ``/proc/cpuinfo`` and the logical CPUs)."""
    fields = cpuinfo()
    return machine_name(fields.get("model name", "cpu"), fields.get("cpu family", "0"),
                        fields.get("model", "0"), os.cpu_count() or 1)
