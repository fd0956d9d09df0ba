"""Where benchmark results are written: ``results/<machine>/`` in the checkout, one folder per
machine, so that a run on one machine never replaces another machine's figures.

A machine is named from its CPU (:func:`common.cpu_info.this_machine`), or from its GPU for the
GPU check (``nvidia-h200``). Outside a
checkout (an installed wheel), results go to ``./results/<machine>/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotune_app.report import plain
from common.atomic_files import write_json
from common.cpu_info import this_machine

CHECKOUT = Path(__file__).resolve().parents[2]


def results_root() -> Path:
    """The checkout's ``results/`` folder, or ``./results`` where there is no checkout."""
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "benchmarks").is_dir():
        return CHECKOUT / "results"
    return Path("results").resolve()


def machine_folder() -> Path:
    """``results/<this machine>/``: where ``--save`` writes this machine's figures."""
    return results_root() / this_machine()


def save_result(name: str, figures: Mapping[str, Any]) -> Path:
    """A benchmark's figures as ``results/<this machine>/<name>`` (what ``--save`` writes)."""
    folder = machine_folder()
    folder.mkdir(parents=True, exist_ok=True)
    return write_json(folder / name, plain(figures))
