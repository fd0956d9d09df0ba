"""``autotune bench first-render``: the first ``autotune render`` after installing, as a new user
meets it (issue 49).

The command ``python -m autotune_app.cli render --scene bunny --json`` runs in a child process
whose caches are empty: ``HOME`` and ``XDG_CACHE_HOME`` point into a new temporary folder and
the ``AUTOTUNE_*`` folders, ``NUMBA_CACHE_DIR`` and ``POCL_CACHE_DIR`` are unset. So numba
compiles the BVH builder, each OpenCL device is checked and its kernel launches timed, and the
runtimes build the kernels, as on a fresh install (the shipped scene and calibrations are part
of the install and stay). Each line of its output is stamped as it arrives. Then the same
command again with the caches the first run left: what every later start costs.

Figures per run: seconds to the first line of output (the product saying what it does), seconds
to the end, the render's BVH build and frame (ms), its lines of output with their times.
Goals (issue 49): the first line within :data:`GOAL_FIRST_LINE_S` s; the first render done
within :data:`GOAL_TOTAL_S` s on 2 cores. ``--quick``: the command once with the caches this
user has (seconds); its goals are not judged, since they need empty caches.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune_app.report import emit
from benchmarks.harness.results import CHECKOUT, save_result
from benchmarks.harness.run_record import RunRecord, at_most, quick_run, stamp, variant_name
from common.cache_folder import cache_dir

COMMAND = ("render", "--scene", "bunny", "--json")
GOAL_FIRST_LINE_S, GOAL_TOTAL_S = 2.0, 60.0
TIMEOUT_S = 600
# where the product and its libraries keep what a first run fills; unset in the fresh child
CACHE_ENV = ("AUTOTUNE_CACHE_DIR", "AUTOTUNE_PROFILE_DIR", "AUTOTUNE_MESH_CACHE",
             "NUMBA_CACHE_DIR", "POCL_CACHE_DIR")
VENDORS_ENV = "OCL_ICD_VENDORS"


def fresh_environment(home: Path) -> dict[str, str]:
    """This process's environment with every cache in the empty ``home``. The ICD folder this
    process's own runtime set-up made (under the user's cache) is dropped too; a user's own
    ``OCL_ICD_VENDORS`` stays."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    vendors = env.get(VENDORS_ENV)
    if vendors and Path(vendors).resolve().is_relative_to(cache_dir().resolve()):
        del env[VENDORS_ENV]
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    return env


def timed_run(env: dict[str, str] | None) -> dict[str, Any]:
    """One ``autotune render`` in a child process: each output line with the seconds since the
    start, the seconds to the first line and to the end, and the render's own figures."""
    started = time.perf_counter()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen([sys.executable, "-u", "-m", "autotune_app.cli", *COMMAND],
                          cwd=CHECKOUT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append((time.perf_counter() - started, line.rstrip("\n")))
        code = child.wait(timeout=TIMEOUT_S)
    total = time.perf_counter() - started
    if code != 0:
        tail = "\n".join(text for _, text in lines[-20:])
        raise RuntimeError(f"autotune {' '.join(COMMAND)} exited {code}:\n{tail}")
    start = next(i for i, (_, text) in enumerate(lines) if text.startswith("{"))
    figures = json.loads("\n".join(text for _, text in lines[start:]))
    return {"first_line_s": lines[0][0], "total_s": total,
            "build_ms": figures["bvh"]["build_ms"], "frame_ms": figures["total_ms"],
            "said": [{"at_s": round(at, 2), "line": text} for at, text in lines[:start]]}


def goals(first: dict[str, Any], judged: bool) -> dict[str, dict]:
    """Progress within 2 s and the first render within 60 s, from a run with empty caches."""
    out = {
        "first_line_seconds": at_most(
            first["first_line_s"], GOAL_FIRST_LINE_S, "seconds from the start of a first "
            f"`autotune {' '.join(COMMAND)}` with empty caches to its first line of output"),
        "first_render_seconds": at_most(
            first["total_s"], GOAL_TOTAL_S, "seconds from its start to its end (numba's "
            "compile, the devices' checks and launch timing, kernel builds, the frame)"),
    }
    if not judged:
        for goal in out.values():
            goal["met"] = None
            goal["not_judged"] = ("a --quick run starts with this user's caches; the goals "
                                  "need empty ones (the full run)")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the first render with empty caches, then again with warm ones; print or save."""
    parser = argparse.ArgumentParser(prog="autotune bench first-render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="one run with this user's caches; goals not judged")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", action="store_true",
                        help="also write results/<machine>/first_render[_quick].json")
    args = parser.parse_args(argv)
    run = RunRecord()
    if args.quick:
        first = timed_run(None)
        result: dict[str, Any] = {"caches": "this user's", "first": first}
    else:
        with tempfile.TemporaryDirectory(prefix="autotune-first-render-") as home:
            env = fresh_environment(Path(home))
            first = timed_run(env)
            result = {"caches": "empty, in a temporary HOME", "first": first,
                      "second_with_its_caches": timed_run(env)}
    result = {"what": __doc__.split("\n\n")[0], "command": f"autotune {' '.join(COMMAND)}",
              **result, "goals": goals(first, judged=not args.quick)}
    emit(stamp(result, run, quick_run(args.quick)), args.json,
         title="The first render after installing")
    if args.save:
        save_result(variant_name("first_render", quick_run(args.quick)), result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
