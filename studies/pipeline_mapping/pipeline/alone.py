"""Real modules measured alone, as Jubertie & Melin measure theirs before predicting a mapping.

Each runs by itself on one core in this runtime for a while; its T_exec is the wall time of
one iteration and its LD the CPU time it used (its process's, every thread) over that wall
time. The model then predicts pipelines of these modules from these two figures only (the
method of Jubertie, Melin: "Performance Prediction for Mappings of Distributed Applications
on PC Clusters").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from studies.pipeline_mapping.model import Mapping, Module, Node, Placement
from studies.pipeline_mapping.pipeline import run_pipeline
from studies.pipeline_mapping.pipeline.work import Work

AloneFigures = tuple[float, float]  # T_exec ms, LD


def alone_mapping(name: str) -> Mapping:
    """One module on one 1-CPU node, nothing connected (its T_exec and LD are placeholders:
    real work ignores them)."""
    return Mapping((), (Node("alone", 1),), (Module(name, 1.0, 1.0, (Placement("alone"),)),), ())


def alone_figures(measured: dict[str, Any]) -> AloneFigures:
    """(T_exec ms, LD) from what the runtime measured of a module alone: compute wall time per
    iteration, and its CPU time over that (at most 1: the module has one core)."""
    wall, cpu = measured["t_cexec_ms"], measured["cpu_ms"]
    if not wall or cpu is None:
        raise ValueError(f"module {measured['name']!r} ran no timed iteration alone")
    return wall, min(1.0, cpu / wall)


def measure_alone(work: Work, seconds: float) -> AloneFigures:
    """Run ``work`` alone on this machine's first core for ``seconds``; its (T_exec, LD)."""
    got = run_pipeline(alone_mapping(work.kind), seconds, work={work.kind: work})
    return alone_figures(got[work.kind])


def with_measured(mapping: Mapping, alone: dict[str, AloneFigures]) -> Mapping:
    """``mapping`` with the named modules' T_exec and LD replaced by their alone figures."""
    unknown = sorted(set(alone) - {m.name for m in mapping.modules})
    if unknown:
        raise ValueError(f"alone figures for unknown module(s): {', '.join(unknown)}")
    modules = tuple(dataclasses.replace(m, t_exec=alone[m.name][0], load=alone[m.name][1])
                    if m.name in alone else m for m in mapping.modules)
    return dataclasses.replace(mapping, modules=modules)
