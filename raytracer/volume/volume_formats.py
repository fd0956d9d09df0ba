"""Readers for volume files (raw, NRRD, NIfTI, .npy): each returns a [z, y, x] array + spacing.

Kept apart from :mod:`volume_data` so the Volume type does not depend on file formats; every
reader raises :class:`VolumeError` naming the file.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import zlib
from pathlib import Path

import numpy as np

from raytracer.volume.errors import VolumeError

Spacing = tuple[float, float, float]

#: Raw dtypes by Open SciVis name; an ``le``/``be`` suffix picks the byte order (default little).
RAW_DTYPES = {"uint8": "u1", "int8": "i1", "uint16": "u2", "int16": "i2", "float32": "f4"}
COMPRESSED = {".gz": gzip.decompress, ".xz": lzma.decompress, ".bz2": bz2.decompress}
_RAW_NAME = re.compile(r"^(?P<name>.+?)_(?P<x>\d+)x(?P<y>\d+)x(?P<z>\d+)_(?P<dtype>[a-z0-9]+)"
                       r"\.raw(?:\.(?:gz|xz|bz2))?$", re.IGNORECASE)


def raw_dtype(name: str, source: str = "") -> np.dtype:
    """numpy dtype for an Open SciVis type name (``uint8``, ``int16le``, ``float32be`` ...)."""
    key = name.lower()
    order = "<"
    if key.endswith(("le", "be")) and key[:-2] in RAW_DTYPES:
        order = "<" if key.endswith("le") else ">"
        key = key[:-2]
    if key not in RAW_DTYPES:
        where = f"{source}: " if source else ""
        raise VolumeError(f"{where}unknown raw dtype {name!r}; known: "
                          f"{', '.join(RAW_DTYPES)} (optionally with an le/be suffix)")
    return np.dtype(order + RAW_DTYPES[key])


def parse_raw_name(path: str | Path) -> tuple[str, tuple[int, int, int], str] | None:
    """``bonsai_256x256x256_uint8.raw`` -> ("bonsai", (256, 256, 256), "uint8"); None if the
    name does not follow the Open SciVis pattern."""
    m = _RAW_NAME.match(Path(path).name)
    if not m:
        return None
    return m["name"], (int(m["x"]), int(m["y"]), int(m["z"])), m["dtype"].lower()


def _read_bytes(path: Path) -> bytes:
    decompress = COMPRESSED.get(path.suffix.lower())
    try:
        data = path.read_bytes()
        return decompress(data) if decompress else data
    except FileNotFoundError:
        raise VolumeError(f"{path}: file not found") from None
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise VolumeError(f"{path}: cannot read ({exc})") from None


def read_raw(path: Path, dims: tuple[int, int, int] | None,
             dtype: str | None) -> np.ndarray:
    """Headerless voxels, x fastest; dims and dtype from the arguments or the file name."""
    parsed = parse_raw_name(path)
    if dims is None and parsed:
        dims = parsed[1]
    if dtype is None and parsed:
        dtype = parsed[2]
    if dims is None:
        raise VolumeError(f"{path}: raw file without dims; give dims (x, y, z) or name it like "
                          f"name_XxYxZ_uint8.raw")
    if dtype is None:
        raise VolumeError(f"{path}: raw file without a dtype; give one of {', '.join(RAW_DTYPES)}")
    dt = raw_dtype(str(dtype), str(path))
    nx, ny, nz = (int(d) for d in dims)
    data = _read_bytes(path)
    expected = nx * ny * nz * dt.itemsize
    if len(data) != expected:
        raise VolumeError(f"{path}: {len(data)} bytes, but dims {nx}x{ny}x{nz} of {dtype} need "
                          f"{expected} bytes")
    return np.frombuffer(data, dt).reshape(nz, ny, nx)


def read_nrrd(path: Path) -> tuple[np.ndarray, Spacing | None]:
    """NRRD via pynrrd; spacing from ``spacings`` or the lengths of ``space directions``."""
    import nrrd  # lazy: only NRRD files need pynrrd

    try:
        data, header = nrrd.read(str(path), index_order="C")
    except FileNotFoundError as exc:
        missing = exc.filename
        if missing is None or Path(missing) == path or not path.is_file():
            raise VolumeError(f"{path}: file not found") from None
        raise VolumeError(f"{path}: its detached data file {missing} was not found (one data "
                          f"file per header is read: not a list or a %d pattern of "
                          f"files)") from None
    except Exception as exc:  # pynrrd raises its own NRRDError, OSError, ValueError
        raise VolumeError(f"{path}: not a readable NRRD file ({exc})") from None
    if data.ndim != 3:
        raise VolumeError(f"{path}: NRRD has {data.ndim} dimensions, a volume needs 3")
    spacing = None
    if "spacings" in header:
        spacing = tuple(float(s) for s in header["spacings"])
    elif header.get("space directions") is not None:
        dirs = np.asarray(header["space directions"], np.float64)
        if dirs.shape == (3, 3) and np.all(np.isfinite(dirs)):
            spacing = tuple(float(v) for v in np.linalg.norm(dirs, axis=1))
    return data, spacing


def read_nifti(path: Path) -> tuple[np.ndarray, Spacing]:
    """NIfTI-1/2 (.nii, .nii.gz) via nibabel, scaled by scl_slope/inter; spacing from zooms."""
    import nibabel  # lazy: only NIfTI files need nibabel

    try:
        img = nibabel.load(str(path))
        data = np.asarray(img.dataobj)
        zooms = img.header.get_zooms()
    except FileNotFoundError:
        raise VolumeError(f"{path}: file not found") from None
    except Exception as exc:  # nibabel raises ImageFileError, OSError, EOFError ...
        raise VolumeError(f"{path}: not a readable NIfTI file ({exc})") from None
    while data.ndim > 3 and data.shape[-1] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise VolumeError(f"{path}: NIfTI image has shape {data.shape}, a volume needs 3-D")
    return np.ascontiguousarray(data.transpose(2, 1, 0)), tuple(float(z) for z in zooms[:3])


def read_vtk_image(path: Path) -> tuple[np.ndarray, Spacing]:
    """VTK image data: XML ``.vti`` or legacy ``.vtk`` structured points, via VTK itself (an
    optional dependency, ``pip install vtk``: its readers handle every encoding and
    compression those formats allow); the first point-data scalar array."""
    try:
        from vtkmodules.util.numpy_support import vtk_to_numpy  # lazy: optional, VTK files only
        from vtkmodules.vtkCommonCore import vtkObject  # lazy: optional, VTK files only
        from vtkmodules.vtkIOLegacy import vtkDataSetReader  # lazy: optional, VTK files only
        from vtkmodules.vtkIOXML import vtkXMLImageDataReader  # lazy: optional, VTK files only
    except ImportError:
        raise VolumeError(f"{path}: reading VTK image data needs VTK (pip install vtk)") from None
    if not path.is_file():
        raise VolumeError(f"{path}: file not found")
    reader = vtkXMLImageDataReader() if path.suffix.lower() == ".vti" else vtkDataSetReader()
    reader.SetFileName(str(path))
    shown = vtkObject.GetGlobalWarningDisplay()
    vtkObject.GlobalWarningDisplayOff()  # a bad file is reported once, below
    try:
        reader.Update()
    finally:
        vtkObject.SetGlobalWarningDisplay(shown)
    image = reader.GetOutput()
    if image is None or not hasattr(image, "GetDimensions") or image.GetNumberOfPoints() == 0:
        raise VolumeError(f"{path}: not readable VTK image data (structured points)")
    points = image.GetPointData()
    array = points.GetScalars() or (points.GetArray(0) if points.GetNumberOfArrays() else None)
    if array is None:
        raise VolumeError(f"{path}: VTK image data without a point-data array")
    if array.GetNumberOfComponents() != 1:
        raise VolumeError(f"{path}: point array {array.GetName()!r} has "
                          f"{array.GetNumberOfComponents()} components, a volume needs 1")
    nx, ny, nz = image.GetDimensions()
    data = vtk_to_numpy(array).reshape(nz, ny, nx)  # VTK orders points x fastest
    return np.array(data), tuple(float(s) for s in image.GetSpacing())


def read_npy(path: Path) -> np.ndarray:
    """A 3-D ``.npy`` array, indexed [z, y, x] (numpy C order: x fastest)."""
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise VolumeError(f"{path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise VolumeError(f"{path}: not a readable .npy file ({exc})") from None
    if data.ndim != 3:
        raise VolumeError(f"{path}: array has shape {data.shape}, a volume needs 3-D")
    return data
