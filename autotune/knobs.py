"""Tunable knobs and the space they span: each knob is a finite ladder of values, worst look first.

A knob's values are ordered by quality (a higher level looks better and, the searches assume,
costs at least as much). ``FloatKnob`` is continuous in the renderer but discretized here into
``levels`` evenly spaced values (or at given values: :meth:`FloatKnob.at`): the whole space then
is a finite grid that one vectorized predictor call can score, and a bisection over a knob's
levels is a bisection over its range.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

Candidates = dict[str, np.ndarray]
QualityFn = Callable[[Candidates], np.ndarray]


def _check_name(name: Any) -> str:
    """Reject names that cannot serve as keyword arguments of a render call."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"knob name must be a non-empty string, got {name!r}")
    return name


def _check_weight(name: str, weight: Any) -> float:
    """A weight scales a knob's share of the default quality score: finite and >= 0."""
    if not isinstance(weight, Real) or not math.isfinite(weight) or weight < 0:
        raise ValueError(f"knob {name!r}: weight must be a finite number >= 0, got {weight!r}")
    return float(weight)


def _check_bounds(name: str, low: Any, high: Any) -> tuple[float, float]:
    """Bounds must be finite real numbers with low <= high."""
    for label, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ValueError(f"knob {name!r}: {label} must be a finite number, got {value!r}")
    if low > high:
        raise ValueError(f"knob {name!r}: empty range, low={low!r} > high={high!r}")
    return float(low), float(high)


class Knob:
    """One tunable parameter: a name, a quality weight and its values ordered worst look first."""

    name: str
    weight: float
    values: np.ndarray

    def __init__(self, name: str, values: np.ndarray, weight: float) -> None:
        self.name = _check_name(name)
        self.weight = _check_weight(self.name, weight)
        self.values = values
        self.values.flags.writeable = False
        self._numeric = values.astype(float)

    def __len__(self) -> int:
        return len(self.values)

    def native(self, value: Any) -> Any:
        """Convert one grid value to the plain Python type handed to the renderer."""
        raise NotImplementedError

    def index(self, value: Any) -> int:
        """Level index of ``value`` (the nearest level, so float round-off does not matter)."""
        return int(np.argmin(np.abs(self._numeric - float(value))))

    def normalized(self, values: np.ndarray) -> np.ndarray:
        """Map values to [0, 1]: 0 at the worst-looking level, 1 at the best."""
        span = self._numeric[-1] - self._numeric[0]
        if span == 0:
            return np.zeros(np.shape(values))
        return (np.asarray(values, dtype=float) - self._numeric[0]) / span

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, levels={len(self)}, weight={self.weight})"


class IntKnob(Knob):
    """Integer knob ``low, low+step, ..., <= high`` (e.g. AO ray count)."""

    def __init__(self, name: str, low: int, high: int, step: int = 1, weight: float = 1.0) -> None:
        name = _check_name(name)
        lo, hi = _check_bounds(name, low, high)
        if not (lo.is_integer() and hi.is_integer()):
            raise ValueError(f"knob {name!r}: integer bounds required, got {low!r}..{high!r}")
        if isinstance(step, bool) or not isinstance(step, Real) or not float(step).is_integer():
            raise ValueError(f"knob {name!r}: step must be a positive integer, got {step!r}")
        if step <= 0:
            raise ValueError(f"knob {name!r}: step must be a positive integer, got {step!r}")
        super().__init__(name, np.arange(int(lo), int(hi) + 1, int(step), dtype=np.int64), weight)

    def native(self, value: Any) -> int:
        return int(value)


class BoolKnob(Knob):
    """On/off knob (e.g. shadows); on looks better."""

    def __init__(self, name: str, weight: float = 1.0) -> None:
        super().__init__(name, np.array([False, True]), weight)

    def native(self, value: Any) -> bool:
        return bool(value)


class FloatKnob(Knob):
    """Continuous knob discretized into ``levels`` evenly spaced values from low to high, or at
    given values (:meth:`at`)."""

    def __init__(
        self, name: str, low: float, high: float, levels: int = 16, weight: float = 1.0
    ) -> None:
        name = _check_name(name)
        lo, hi = _check_bounds(name, low, high)
        if isinstance(levels, bool) or not isinstance(levels, Integral) or levels < 1:
            raise ValueError(f"knob {name!r}: levels must be an integer >= 1, got {levels!r}")
        if levels == 1 and lo != hi:
            raise ValueError(f"knob {name!r}: levels=1 cannot span {low!r}..{high!r}")
        super().__init__(name, np.linspace(lo, hi, int(levels)), weight)

    @classmethod
    def at(cls, name: str, values: Sequence[float], weight: float = 1.0) -> FloatKnob:
        """A continuous knob discretized at the given increasing ``values``: finer steps where
        a step moves the frame more (a quarter AO ray is a quarter of one ray's cost, but
        1 % of 25 rays')."""
        name = _check_name(name)
        array = np.asarray(values, dtype=float)
        if (array.ndim != 1 or array.size == 0 or not np.isfinite(array).all()
                or (np.diff(array) <= 0).any()):
            raise ValueError(f"knob {name!r}: values must be finite and strictly increasing, "
                             f"got {values!r}")
        knob = cls.__new__(cls)
        Knob.__init__(knob, name, array, weight)
        return knob

    def native(self, value: Any) -> float:
        return float(value)


class KnobSpace:
    """The cartesian product of knobs, with a quality score that the searches maximize."""

    def __init__(self, knobs: Iterable[Knob], quality: QualityFn | None = None) -> None:
        self.knobs: tuple[Knob, ...] = tuple(knobs)
        if not self.knobs:
            raise ValueError("KnobSpace needs at least one knob")
        seen: set[str] = set()
        for knob in self.knobs:
            if not isinstance(knob, Knob):
                raise ValueError(f"KnobSpace takes Knob objects, got {knob!r}")
            if knob.name in seen:
                raise ValueError(f"duplicate knob name {knob.name!r}")
            seen.add(knob.name)
        if quality is not None and not callable(quality):
            raise ValueError(f"quality must be callable, got {quality!r}")
        self._quality = quality
        self._grid: Candidates | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Knob names in declaration order."""
        return tuple(k.name for k in self.knobs)

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of levels of each knob."""
        return tuple(len(k) for k in self.knobs)

    @property
    def size(self) -> int:
        """Number of candidate settings in the full grid."""
        return math.prod(self.shape)

    def grid(self) -> Candidates:
        """Every candidate setting as one array per knob (cached; first knob varies slowest)."""
        if self._grid is None:
            mesh = np.meshgrid(*(k.values for k in self.knobs), indexing="ij")
            self._grid = {k.name: m.ravel() for k, m in zip(self.knobs, mesh, strict=True)}
            for column in self._grid.values():
                column.flags.writeable = False
        return self._grid

    def quality(self, candidates: Candidates) -> np.ndarray:
        """Quality of each candidate: the user's function, or sum of weight * normalized level."""
        if self._quality is not None:
            return np.asarray(self._quality(candidates), dtype=float)
        return sum(k.weight * k.normalized(candidates[k.name]) for k in self.knobs)

    def quality_chain(self) -> list[int]:
        """Positions in :meth:`grid` from the lowest setting to the highest, each one knob one
        level above the last, the step that adds the most quality first (ties: the knob
        declared first): the ladder a model-free controller walks. Every knob rises along it,
        so its cost rises wherever each knob's does; the quality order itself zig-zags in cost
        (the tracer's 57 AO rays without shadows or Phong rank below 1 ray with Phong)."""
        quality = self.quality(self.grid())
        shape = self.shape
        levels = [0] * len(shape)
        chain = [int(np.ravel_multi_index(levels, shape))]
        while any(level < size - 1 for level, size in zip(levels, shape, strict=True)):
            here, best = quality[chain[-1]], None
            for j, size in enumerate(shape):
                if levels[j] < size - 1:
                    levels[j] += 1
                    up = int(np.ravel_multi_index(levels, shape))
                    levels[j] -= 1
                    if best is None or quality[up] - here > best[0]:
                        best = (quality[up] - here, j, up)
            levels[best[1]] += 1
            chain.append(best[2])
        return chain

    def levels_of(self, knobs: Mapping[str, Any]) -> list[int]:
        """Level index of each knob in a settings dict."""
        return [k.index(knobs[k.name]) for k in self.knobs]

    def index_of(self, knobs: Mapping[str, Any]) -> int:
        """Position of a settings dict in :meth:`grid`."""
        return int(np.ravel_multi_index(self.levels_of(knobs), self.shape))

    def at_levels(self, levels: Sequence[int]) -> dict[str, Any]:
        """Settings dict (plain Python values) for one level index per knob."""
        return {k.name: k.native(k.values[i]) for k, i in zip(self.knobs, levels, strict=True)}

    def at_index(self, index: int) -> dict[str, Any]:
        """Settings dict for position ``index`` of :meth:`grid`."""
        return self.at_levels(np.unravel_index(index, self.shape))

    def lowest(self) -> dict[str, Any]:
        """Every knob at its worst-looking (assumed cheapest) level."""
        return self.at_levels([0] * len(self.knobs))

    def __repr__(self) -> str:
        return f"KnobSpace({list(self.knobs)!r}, size={self.size})"
