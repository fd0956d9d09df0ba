"""VTK's volume property from a transfer function given on shares of the scalar range: built the
same way by every benchmark that times one of VTK's volume casters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def volume_property(colors: Iterable[tuple[float, float, float, float]],
                    opacities: Iterable[tuple[float, float]], lo: float, hi: float,
                    shade: bool) -> Any:
    """A ``vtkVolumeProperty`` with linear interpolation: ``colors`` (share, r, g, b) and
    ``opacities`` (share, alpha), each share placed at ``lo + share * (hi - lo)``."""
    import vtk  # lazy: vtk (the bench extra)

    ctf, otf = vtk.vtkColorTransferFunction(), vtk.vtkPiecewiseFunction()
    for x, r, g, b in colors:
        ctf.AddRGBPoint(lo + x * (hi - lo), r, g, b)
    for x, a in opacities:
        otf.AddPoint(lo + x * (hi - lo), a)
    prop = vtk.vtkVolumeProperty()
    prop.SetColor(ctf)
    prop.SetScalarOpacity(otf)
    prop.SetInterpolationTypeToLinear()
    prop.SetShade(int(shade))
    return prop
