"""PTX analysis of the tracer kernels: per-loop instruction counts.

The counts of §4.3 and Table 5 of Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing
using an Analytical GPU Architecture Model".

A build-time tool: ``tools/count_ptx.py`` compiles ``raytracer.mesh.tracer.kernel_source()`` to PTX
with clang-14 (``-target nvptx64-nvidia-nvcl``, ``-cl-fast-relaxed-math`` as the tracer
builds it, libclc linked so the OpenCL builtins are real instructions rather than calls),
counts it with this module and writes ``governed/mesh/data/kernel_counts.json``, which
``governed.mesh.instruction_counts`` loads at run time.

Counting rules (static counts: every instruction of a region once, whatever path a thread
takes, so a loop body's count is an upper bound on one iteration's dynamic count):

- an instruction is a statement ending in ``;`` inside a kernel body, excluding labels,
  directives (``.reg``, ``.local``, ``.param`` ...), braces and comments;
- memory instructions are ``ld/st.global`` and ``ld/st.local`` (the traversal stack lives in
  local memory, which is off-chip like global memory); atomics on global memory too;
- barriers (``bar.*``, ``barrier.*``) are counted apart and in neither class;
- every other instruction (``ld.param``, ``ld.const``, branches, ``ret`` ...) is compute.

Loops come from the control-flow graph, not from text order (the back end lays latches
out before headers): basic blocks split at labels and branches, dominators, back edges
``u -> h`` with ``h`` dominating ``u``, natural loops merged by header, nesting by body
inclusion. Heuristic per kernel (``trace()`` is inlined into each kernel):

- the traversal loop is the innermost loop that reads global memory (the node fetch); its
  body holds the node fetch, the slab test, stack and loop control, the leaf test inlined
  once per child slot (``LEAF(s0) .. LEAF(s7)``, no loop of its own) and any loop inside it
  (the closest-hit pop that drops culled stack entries and the scan for the nearest pushed
  child: local memory only); every other
  loop must enclose it;
- the leaf test is split out by a second compile of the source with the leaf test's line
  (``LEAF_TEST``) replaced by a miss (``LEAF_STUB``), which drops the test and what a hit
  does: ``i_ct, i_mt`` are that variant's traversal body, ``i_ci, i_mi`` the difference
  from the real body divided by the ``LEAF_SLOTS`` copies (one leaf test, the unit the
  kernels' ``tests`` counter counts);
- a loop enclosing the traversal loop (the AO sample loop) yields a per-ray constant:
  its body minus the traversal loop, stored as its own entry ``"<kernel>_ray"`` with only
  ``i_cco, i_mco`` set (the §4.3 AO equation has no per-ray constant; models/raytrace_cost.py
  adds ``a_r * i_cco_ray`` on devices that issue instructions in order);
- ``i_cco, i_mco`` are everything outside the outermost loop;
- a kernel without loops (shade) is all constant (both Phong and flat branches counted);
- the shade kernel is also compiled with its Phong switch fixed on and off
  (``SHADE_VARIANTS``: the source line that reads the flag, replaced by a constant, so the
  compiler drops the other branch), giving ``shade_phong`` and ``shade_flat``: the model
  prices the Phong knob by their difference;
- a phase's packet form (``raytracer.mesh.tracer.PACKET_KERNELS``: the primary rays traced 4x2 at
  a time, chosen per device by timing) is not counted: the model prices a phase by its kernel
  that traces a ray per work-item whatever launch runs it, and a calibration, which records the
  launches its frames ran with, fits the phase's scale to the form that ran.

Regenerate after editing any kernel: ``python tools/count_ptx.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed.mesh.instruction_counts import (
    LOOP_FIELDS,
    KernelCountsError,
    source_sha256,
)
from models.raytrace_cost import LoopCounts
from raytracer.mesh.bvh import WIDTH
from raytracer.mesh.tracer import PACKET_KERNELS

CLANG = "clang-14"
CLANG_FLAGS = (
    "-cl-std=CL1.2",
    "-target",
    "nvptx64-nvidia-nvcl",
    "-O2",
    "-cl-fast-relaxed-math",
)
LIBCLC_CANDIDATES = (
    "/usr/lib/clc/nvptx64--nvidiacl.bc",
    "/usr/lib/llvm-14/lib/clc/nvptx64--nvidiacl.bc",
    "/usr/share/clc/nvptx64--nvidiacl.bc",
)
COMPILER = "clang-14 nvptx64-nvidia-nvcl -O2 -cl-fast-relaxed-math + libclc nvptx64--nvidiacl"


class CompilerError(RuntimeError):
    """clang-14 or libclc is missing, or the kernel source failed to compile to PTX."""


# --------------------------------------------------------------------------- PTX parsing

_MEMORY = re.compile(r"^(ld|st|ldu|atom|red)\.(global|local)\b|^(ld|st)\.(volatile|relaxed)\.")
_BARRIER = re.compile(r"^(bar|barrier)\.")
_LABEL = re.compile(r"^([$%\w.]+):$")
_BRANCH = re.compile(r"^(@!?%\w+\s+)?bra(\.uni)?\s+([$%\w.]+)$")
_ENTRY = re.compile(r"\.entry\s+([$\w.]+)\s*\(")
UNCOUNTED = frozenset(PACKET_KERNELS.values())  # packet forms (module docstring)


@dataclass(frozen=True)
class RegionCount:
    """Compute, memory and barrier instructions of one region of PTX."""

    compute: int = 0
    memory: int = 0
    barriers: int = 0

    def __add__(self, other: RegionCount) -> RegionCount:
        return RegionCount(
            self.compute + other.compute,
            self.memory + other.memory,
            self.barriers + other.barriers,
        )

    def __sub__(self, other: RegionCount) -> RegionCount:
        return RegionCount(
            self.compute - other.compute,
            self.memory - other.memory,
            self.barriers - other.barriers,
        )


@dataclass
class _Block:
    label: str | None
    instrs: list[str]
    succ: list[int]


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _entry_bodies(ptx: str) -> dict[str, str]:
    """Kernel name -> text between the braces of its ``.entry`` body (nested braces kept), for
    every kernel but the :data:`UNCOUNTED` ones."""
    text = _strip_comments(ptx)
    out: dict[str, str] = {}
    for m in _ENTRY.finditer(text):
        close = text.find(")", m.end())
        start = text.find("{", close)
        if close < 0 or start < 0:
            raise KernelCountsError(f"PTX: .entry {m.group(1)} has no body")
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        else:
            raise KernelCountsError(f"PTX: .entry {m.group(1)} body is not closed")
        if m.group(1) not in UNCOUNTED:
            out[m.group(1)] = text[start + 1 : i]
    return out


def _statements(body: str) -> list[str]:
    """Labels (``name:``) and instructions (without ``;``), directives and braces dropped."""
    out: list[str] = []
    pending = ""
    for raw in body.replace("{", "\n").replace("}", "\n").split("\n"):
        line = raw.strip()
        if not line:
            continue
        if not pending:
            label = re.match(r"^([$%\w.]+):\s*(.*)$", line)
            if label and not line.startswith("."):
                out.append(label.group(1) + ":")
                line = label.group(2).strip()
                if not line:
                    continue
        pending = f"{pending} {line}".strip()
        while ";" in pending:
            stmt, pending = pending.split(";", 1)
            stmt = " ".join(stmt.split())
            pending = pending.strip()
            if stmt and not stmt.startswith("."):
                out.append(stmt)
    if pending:
        raise KernelCountsError(f"PTX: unterminated statement {pending[:60]!r}")
    return out


def _blocks(stmts: list[str]) -> list[_Block]:
    """Split statements into basic blocks and link successors (fall-through and branches)."""
    blocks: list[_Block] = [_Block(None, [], [])]
    ends: list[tuple[str | None, bool]] = []  # per block: branch target, falls through
    for s in stmts:
        m = _LABEL.match(s)
        if m:
            if blocks[-1].instrs or blocks[-1].label is not None:
                ends.append((None, True))
                blocks.append(_Block(m.group(1), [], []))
            else:
                blocks[-1].label = m.group(1)
            continue
        blocks[-1].instrs.append(s)
        b = _BRANCH.match(s)
        terminal = s.split()[0] in ("ret", "exit", "trap")
        if b or terminal:
            ends.append((b.group(3) if b else None, bool(b and b.group(1))))
            blocks.append(_Block(None, [], []))
    ends.append((None, False))
    index = {blk.label: i for i, blk in enumerate(blocks) if blk.label is not None}
    for i, (target, falls) in enumerate(ends):
        if target is not None:
            if target not in index:
                raise KernelCountsError(f"PTX: branch to unknown label {target}")
            blocks[i].succ.append(index[target])
        if falls and i + 1 < len(blocks):
            blocks[i].succ.append(i + 1)
    return blocks


def _classify(instr: str) -> RegionCount:
    op = instr.split()[0]
    if op.startswith("@"):
        op = instr.split()[1]
    if _BARRIER.match(op):
        return RegionCount(barriers=1)
    if _MEMORY.match(op) and (".global" in op or ".local" in op):
        return RegionCount(memory=1)
    return RegionCount(compute=1)


def _count(blocks: list[_Block], ids: set[int] | range) -> RegionCount:
    total = RegionCount()
    for i in ids:
        for instr in blocks[i].instrs:
            total = total + _classify(instr)
    return total


def _dominators(blocks: list[_Block]) -> list[set[int]]:
    """Iterative dominator sets from block 0 (unreachable blocks dominate nothing)."""
    n = len(blocks)
    preds: list[list[int]] = [[] for _ in range(n)]
    for i, blk in enumerate(blocks):
        for s in blk.succ:
            preds[s].append(i)
    full = set(range(n))
    dom = [full.copy() for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for i in range(1, n):
            ps = [dom[p] for p in preds[i]]
            new = set.intersection(*ps) | {i} if ps else {i}
            if new != dom[i]:
                dom[i], changed = new, True
    return dom


def _natural_loops(blocks: list[_Block]) -> list[frozenset[int]]:
    """Natural loop bodies (block ids), back edges to one header merged, smallest first."""
    dom = _dominators(blocks)
    preds: list[list[int]] = [[] for _ in blocks]
    for i, blk in enumerate(blocks):
        for s in blk.succ:
            preds[s].append(i)
    by_header: dict[int, set[int]] = {}
    for u, blk in enumerate(blocks):
        for h in blk.succ:
            if h in dom[u]:
                body = by_header.setdefault(h, {h})
                stack = [u]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(preds[x])
    return sorted((frozenset(b) for b in by_header.values()), key=len)


def count_kernel(name: str, body: str) -> dict[str, LoopCounts]:
    """Counts of one kernel body: ``{name: LoopCounts}`` plus ``{name}_ray`` if it has one.
    ``i_ct, i_mt`` hold the whole traversal body, leaf tests included (``i_ci = i_mi = 0``):
    :func:`split_leaf_tests` separates them."""
    blocks = _blocks(_statements(body))
    total = _count(blocks, range(len(blocks)))
    loops = _natural_loops(blocks)
    if not loops:
        return {name: LoopCounts(i_cco=total.compute, i_mco=total.memory)}
    reading = [lp for lp in loops if any(
        ".global" in ins and _classify(ins).memory for i in lp for ins in blocks[i].instrs)]
    if not reading:
        raise KernelCountsError(f"PTX: kernel {name}: no loop reads global memory (no "
                                "traversal loop)")
    trav = reading[0]  # smallest first
    stray = [lp for lp in loops if not (lp <= trav or trav < lp)]
    if stray:
        raise KernelCountsError(
            f"PTX: kernel {name}: {len(stray)} loop(s) neither inside nor around the traversal "
            "loop"
        )
    step = _count(blocks, trav)
    outermost = max(loops, key=len)
    const = total - _count(blocks, outermost)
    out = {
        name: LoopCounts(
            i_ct=step.compute,
            i_cco=const.compute,
            i_mt=step.memory,
            i_mco=const.memory,
        )
    }
    if outermost != trav:
        ray = _count(blocks, outermost - trav)
        out[f"{name}_ray"] = LoopCounts(i_cco=ray.compute, i_mco=ray.memory)
    return out


def count_ptx(ptx: str) -> dict[str, LoopCounts]:
    """Per-loop counts of every ``.entry`` kernel in ``ptx`` (pure parsing; rules above)."""
    bodies = _entry_bodies(ptx)
    if not bodies:
        raise KernelCountsError("PTX: no .entry kernel found")
    out: dict[str, LoopCounts] = {}
    for name, body in bodies.items():
        out.update(count_kernel(name, body))
    return out


def count_barriers(ptx: str) -> dict[str, int]:
    """Barrier instructions per ``.entry`` kernel (not part of LoopCounts)."""
    return {
        name: _count(blk, range(len(blk))).barriers
        for name, body in _entry_bodies(ptx).items()
        for blk in [_blocks(_statements(body))]
    }


# --------------------------------------------------------------------------- compiling


def find_libclc() -> Path | None:
    """Path of libclc's nvptx64 bitcode (Debian package libclc-14), or None."""
    for candidate in LIBCLC_CANDIDATES:
        if Path(candidate).is_file():
            return Path(candidate)
    return None


def compile_ptx(source: str, clang: str = CLANG, libclc: str | Path | None = None) -> str:
    """PTX of OpenCL C ``source`` via clang-14 with libclc linked (builtins inlined, no calls)."""
    exe = shutil.which(clang)
    if exe is None:
        raise CompilerError(
            f"{clang} not found on PATH; install it (Debian: apt-get install clang-14 libclc-14)"
        )
    lib = Path(libclc) if libclc is not None else find_libclc()
    if lib is None or not lib.is_file():
        raise CompilerError(
            f"libclc nvptx64 bitcode not found ({lib or ', '.join(LIBCLC_CANDIDATES)}); "
            "install it (Debian: apt-get install libclc-14)"
        )
    cmd = [exe, *CLANG_FLAGS, "-Xclang", "-mlink-bitcode-file", "-Xclang", str(lib)]
    cmd += ["-Wno-linker-warnings", "-S", "-o", "-", "-x", "cl", "-"]
    proc = subprocess.run(cmd, input=source, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompilerError(f"{clang} failed to compile the kernels to PTX:\n{proc.stderr}")
    return proc.stdout


# The leaf test, inlined once per child slot of a node (traverse.cl's LEAF macro): this line
# of the source, replaced by a miss, gives the kernels without it (see the module docstring).
LEAF_TEST = "int k = intersect_leaf(tris, idx.C, cnt.C, o, d, best, &t, &u, &v);"
LEAF_STUB = "int k = -1;"
LEAF_SLOTS = WIDTH  # one LEAF copy per child slot


def split_leaf_tests(full: dict[str, LoopCounts],
                     stub: dict[str, LoopCounts]) -> dict[str, LoopCounts]:
    """``full``'s counts with one leaf test split out of each traversal step: ``i_ct, i_mt``
    from ``stub`` (the kernels compiled without the leaf test), ``i_ci, i_mi`` the traversal
    body's difference per leaf slot."""
    out = {}
    for key, lc in full.items():
        if lc.i_ct == 0:
            out[key] = lc
            continue
        bare = stub[key]
        out[key] = LoopCounts(
            i_ct=bare.i_ct,
            i_ci=(lc.i_ct - bare.i_ct) / LEAF_SLOTS,
            i_cco=lc.i_cco,
            i_mt=bare.i_mt,
            i_mi=(lc.i_mt - bare.i_mt) / LEAF_SLOTS,
            i_mco=lc.i_mco,
        )
    return out


def leaf_split_counts(source: str, ptx: str, compile: Any = None) -> dict[str, LoopCounts]:
    """Every kernel's counts with the leaf test split out (see :func:`split_leaf_tests`),
    ``ptx`` being ``source`` compiled; the leaf-less variant is compiled with ``compile``."""
    if source.count(LEAF_TEST) != 1:
        raise KernelCountsError(f"kernel source: expected the leaf test {LEAF_TEST!r} once "
                                "(update LEAF_TEST in tools/ptx_analysis.py)")
    compile = compile or compile_ptx
    return split_leaf_tests(count_ptx(ptx), count_ptx(compile(source.replace(LEAF_TEST,
                                                                             LEAF_STUB))))


# The shade kernel's Phong switch: this line of the source, replaced by each constant, gives
# the kernel of one branch (the compiler removes the other).
SHADE_SWITCH = "const int phong = flags & 1"
SHADE_VARIANTS = {"shade_phong": "const int phong = 1", "shade_flat": "const int phong = 0"}


def shade_variant_counts(source: str, compile: Any = None) -> dict[str, LoopCounts]:
    """``shade_phong`` and ``shade_flat`` counts: the shade kernel compiled with Phong fixed."""
    if source.count(SHADE_SWITCH) != 1:
        raise KernelCountsError(f"kernel source: expected the shade kernel's Phong switch "
                                f"{SHADE_SWITCH!r} once (update SHADE_SWITCH in "
                                f"tools/ptx_analysis.py)")
    compile = compile or compile_ptx
    out = {}
    for key, line in SHADE_VARIANTS.items():
        out[key] = count_ptx(compile(source.replace(SHADE_SWITCH, line)))["shade"]
    return out


def counts_document(source: str, ptx: str, compile: Any = None) -> dict[str, Any]:
    """The JSON document ``tools/count_ptx.py`` writes for this source and its PTX (the two
    shade variants are compiled here with ``compile``, default :func:`compile_ptx`)."""
    counts = leaf_split_counts(source, ptx, compile) | shade_variant_counts(source, compile)
    return {
        "source_sha256": source_sha256(source),
        "compiler": COMPILER,
        "phases": {
            key: {f: float(getattr(lc, f)) for f in LOOP_FIELDS}
            for key, lc in sorted(counts.items())
        },
        "barriers": dict(sorted(count_barriers(ptx).items())),
    }


