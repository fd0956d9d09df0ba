"""Runs the embedding example of governed/volume/__init__.py as written (MPI job)."""

import textwrap

import governed.volume as module

block = module.__doc__.split("::\n\n", 1)[1]
lines = []
for line in block.splitlines():
    if line and not line.startswith("    "):
        break
    lines.append(line)
exec(textwrap.dedent("\n".join(lines)), {})
