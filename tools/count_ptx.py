"""Regenerate governed/mesh/data/kernel_counts.json: per-loop PTX counts of the kernels.

Run after any edit of raytracer/mesh/kernels/*.cl (needs clang-14 and libclc-14 on Debian:
``apt-get install clang-14 libclc-14``)::

    python tools/count_ptx.py            # write the shipped file, print the table
    python tools/count_ptx.py --check    # exit 1 if the shipped file is stale
    python tools/count_ptx.py --ptx out.ptx   # also keep the PTX for inspection

Counting rules and the loop heuristic are documented in tools/ptx_analysis.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common.atomic_files import write_text  # noqa: E402
from governed.mesh.instruction_counts import (  # noqa: E402
    COUNTS_PATH,
    LOOP_FIELDS,
    KernelCountsError,
)
from raytracer.mesh.tracer import kernel_source  # noqa: E402
from tools.ptx_analysis import CompilerError, compile_ptx, counts_document  # noqa: E402


def _table(doc: dict) -> str:
    """Human table of the counts: one row per phase."""
    rows = [f"{'phase':<10}" + "".join(f"{f:>8}" for f in LOOP_FIELDS)]
    for phase, counts in doc["phases"].items():
        rows.append(f"{phase:<10}" + "".join(f"{counts[f]:>8g}" for f in LOOP_FIELDS))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Compile, count, and write (or check) the counts file; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=COUNTS_PATH, help="counts JSON to write")
    ap.add_argument("--ptx", type=Path, help="also write the PTX here")
    ap.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    ap.add_argument("--json", action="store_true", help="print the document as JSON")
    args = ap.parse_args(argv)
    source = kernel_source()
    try:
        ptx = compile_ptx(source)
        doc = counts_document(source, ptx)
    except (CompilerError, KernelCountsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(doc, indent=2) + "\n"
    if args.ptx:
        write_text(args.ptx, ptx)
    print(text if args.json else _table(doc))
    if args.check:
        try:
            current = json.loads(args.out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"{args.out}: unreadable ({exc})", file=sys.stderr)
            return 1
        if current != doc:
            print(f"{args.out}: stale; run python tools/count_ptx.py", file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    write_text(args.out, text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
