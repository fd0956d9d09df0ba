"""Pack the shared test volumes into the small xz-compressed raw files the product ships.

Run once by a developer (``python tools/pack_volumes.py ../shared/assets``); the product only
reads ``assets/volumes/`` (the files and ``volumes.json``), never the source folder.
"""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path

import nrrd
import numpy as np

# name -> (source file, spacing (x, y, z) or None for the header's/1, where it came from)
SOURCES = {
    "bonsai": ("bonsai_256x256x256_uint8.raw", None,
               "Open SciVis 'Bonsai' CT, via Kitware/vtk-js-datasets data/vti/bonsai.vti"),
    "aneurism": ("aneurism_256x256x256_uint8.raw", None,
                 "Open SciVis 'Aneurism' rotational X-ray, via Kitware/vtk-js-datasets"),
    "tooth": ("tooth_103x94x161_uint8.nrrd", None,
              "Open SciVis 'Tooth', via Kitware/vtk-js-datasets data/nrrd/tooth.nrrd"),
    "neghip": ("neghip_66x66x66_uint8.raw", None,
               "VolVis 'neghip' (VTK's 66^3 variant), via pyvista/vtk-data Data/neghip.slc"),
    "ironprot": ("ironProt_68x68x68_uint8.raw", None,
                 "VTK 'ironProt' iron protein, via pyvista/vtk-data Data/ironProt.vtk"),
    "headsq": ("headsq_64x64x93_int16le.raw", (3.2, 3.2, 1.5),
               "VTK quarter-resolution CT head, via pyvista/vtk-data Data/headsq/quarter.*"),
}


def main(source_root: str) -> None:
    src = Path(source_root) / "volumes"
    out_dir = Path(__file__).resolve().parents[1] / "assets" / "volumes"
    out_dir.mkdir(parents=True, exist_ok=True)
    index = {}
    for name, (fname, spacing, origin) in SOURCES.items():
        path = src / fname
        if path.suffix == ".nrrd":
            data, header = nrrd.read(str(path), index_order="C")
            dirs = header.get("space directions")
            if spacing is None and dirs is not None:
                spacing = tuple(float(v) for v in np.linalg.norm(np.asarray(dirs, float), axis=1))
            nz, ny, nx = data.shape
            dtype = str(data.dtype)
            raw = np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<")).tobytes()
        else:
            stem = fname.split("_")
            nx, ny, nz = (int(v) for v in stem[-2].split("x"))
            dtype = stem[-1].removesuffix(".raw")
            raw = path.read_bytes()
        out_name = f"{name}_{nx}x{ny}x{nz}_{dtype}.raw.xz"
        (out_dir / out_name).write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        index[name] = {"file": out_name, "dims": [nx, ny, nz], "dtype": dtype,
                       "spacing": list(spacing or (1.0, 1.0, 1.0)), "source": origin}
        print(f"{name}: {nx}x{ny}x{nz} {dtype} -> {out_name} "
              f"({(out_dir / out_name).stat().st_size} bytes)")
    (out_dir / "volumes.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/assets")
