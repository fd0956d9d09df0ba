"""Table cells of the performance page, written one way by every benchmark that lays out a
table there: a share as a percentage, a time in ms, "—" where a result file lacks the figure."""

from __future__ import annotations


def percent(value: float | None) -> str:
    """A share (0.05) as ``5.0 %``; ``—`` for None."""
    return "—" if value is None else f"{100 * value:.1f} %"


def ms(value: float | None) -> str:
    """Milliseconds to two decimals; ``—`` for None."""
    return "—" if value is None else f"{value:.2f}"
