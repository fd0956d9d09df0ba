"""The frame rate of a pipeline: how often its frame module shows *new* content.

A greedy consumer iterates at its own rate and reuses the newest message, so its own T_it
overstates the rate of new frames. New content reaches a module no faster than the slowest
module upstream of it (over FIFO and greedy edges): the frame time is the largest T_it
(upper end of its range when oscillating) among the frame modules and their ancestors.
"""

from __future__ import annotations

from collections.abc import Sequence

from studies.pipeline_mapping.model.solve import Solution


def upstream_modules(solution: Solution, frame: Sequence[str]) -> set[str]:
    """The module instances of ``frame`` (module names) and every instance that feeds them."""
    inputs: dict[str, list[str]] = {m: [] for m in solution.modules}
    for e in solution.edges:
        if e.kind != "mpi":
            inputs[e.dst].append(e.src)
    todo = [m for m, p in solution.modules.items() if p.module in frame]
    seen = set(todo)
    while todo:
        for i in inputs[todo.pop()]:
            if i not in seen:
                seen.add(i)
                todo.append(i)
    return seen


def frame_time(solution: Solution, frame: Sequence[str]) -> tuple[float, list[str]]:
    """(frame time in ms, the modules that set it) for the frame modules (module names)."""
    seen = upstream_modules(solution, frame)
    slowest = max(sorted(seen), key=lambda m: solution.modules[m].t_it_range[1])
    return solution.modules[slowest].t_it_range[1], solution.bottlenecks[slowest]
