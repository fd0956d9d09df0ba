"""Volume loading: every format round-trips, names parse, bad input gives one VolumeError."""

from __future__ import annotations

import gzip

import nibabel
import nrrd
import numpy as np
import pytest

from raytracer.volume import (
    Volume,
    VolumeError,
    load_volume,
    marschner_lobb_value,
    parse_raw_name,
    shipped_volumes,
)

RNG = np.random.default_rng(9)


def _array(dtype: str, shape=(5, 4, 3)) -> np.ndarray:
    """A small [z, y, x] array of ``dtype`` with a non-constant range."""
    if dtype == "float32":
        return RNG.normal(size=shape).astype(np.float32)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


@pytest.mark.parametrize("dtype,token", [("uint8", "uint8"), ("uint16", "uint16"),
                                         ("int16", "int16le"), ("float32", "float32")])
def test_raw_round_trip_by_name(tmp_path, dtype, token):
    data = _array(dtype)
    path = tmp_path / f"thing_3x4x5_{token}.raw"
    path.write_bytes(data.astype(np.dtype(dtype).newbyteorder("<")).tobytes())
    vol = load_volume(path)
    assert vol.dims == (3, 4, 5) and vol.name == "thing"
    np.testing.assert_array_equal(vol.data, data.astype(np.float32))
    assert vol.value_range == (float(data.min()), float(data.max()))


def test_raw_with_explicit_dims_dtype_spacing_and_gzip(tmp_path):
    data = _array("uint16")
    path = tmp_path / "plain.raw.gz"
    path.write_bytes(gzip.compress(data.tobytes()))
    vol = load_volume(path, dims=(3, 4, 5), dtype="uint16", spacing=(1, 2, 0.5))
    np.testing.assert_array_equal(vol.data, data)
    assert vol.spacing == (1.0, 2.0, 0.5)
    np.testing.assert_allclose(vol.extent, [2.0, 6.0, 2.0])
    np.testing.assert_allclose(vol.origin, [-1.0, -3.0, -1.0])


def test_nrrd_round_trip_with_spacing(tmp_path):
    data = _array("int16")
    path = tmp_path / "v.nrrd"
    nrrd.write(str(path), data, {"spacings": [0.5, 1.5, 2.0]}, index_order="C")
    vol = load_volume(path)
    np.testing.assert_array_equal(vol.data, data)
    assert vol.dims == (3, 4, 5) and vol.spacing == (0.5, 1.5, 2.0)
    assert load_volume(path, spacing=(1, 1, 1)).spacing == (1.0, 1.0, 1.0)


def test_nrrd_header_whose_data_file_is_missing_names_the_data_file(tmp_path):
    """A detached header that exists but points at no file says which file is missing
    (pynrrd reads one data file: a '%d' pattern of slice files is reported the same way)."""
    data = _array("int16")
    nrrd.write(str(tmp_path / "v.nhdr"), data, {"spacings": [1, 1, 1]}, index_order="C",
               detached_header=True)
    load_volume(tmp_path / "v.nhdr")  # the pair as written reads
    for f in tmp_path.glob("v.raw*"):
        f.unlink()
    with pytest.raises(VolumeError, match=r"v\.nhdr: its detached data file .*v\.raw.* was "
                                          r"not found"):
        load_volume(tmp_path / "v.nhdr")
    (tmp_path / "q.nhdr").write_text("NRRD0004\ndimension: 3\nsizes: 3 4 5\ntype: short\n"
                                     "endian: little\nencoding: raw\n"
                                     "data file: quarter.%d 1 5 1\n")
    with pytest.raises(VolumeError, match=r"q\.nhdr: its detached data file .*quarter"):
        load_volume(tmp_path / "q.nhdr")
    with pytest.raises(VolumeError, match=r"none\.nhdr: file not found"):
        load_volume(tmp_path / "none.nhdr")


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_nifti_round_trip_with_zooms(tmp_path, suffix):
    data = _array("float32")
    img = nibabel.Nifti1Image(np.ascontiguousarray(data.transpose(2, 1, 0)), np.eye(4))
    img.header.set_zooms((0.7, 0.8, 0.9))
    path = tmp_path / f"v{suffix}"
    nibabel.save(img, str(path))
    vol = load_volume(path)
    np.testing.assert_array_equal(vol.data, data)
    assert vol.dims == (3, 4, 5)
    np.testing.assert_allclose(vol.spacing, (0.7, 0.8, 0.9), rtol=1e-6)


def test_npy_round_trip(tmp_path):
    data = _array("float32")
    np.save(tmp_path / "v.npy", data)
    vol = load_volume(tmp_path / "v.npy", spacing=(2, 2, 2))
    np.testing.assert_array_equal(vol.data, data)
    assert vol.spacing == (2.0, 2.0, 2.0)


@pytest.mark.parametrize("suffix", [".vti", ".vtk"])
def test_vtk_image_data_round_trip_with_spacing(tmp_path, suffix):
    """VTK's own writers make the files (XML image data, legacy structured points); x varies
    fastest in VTK, so the array comes back [z, y, x] like every other format."""
    pytest.importorskip("vtkmodules")
    from vtkmodules.util.numpy_support import numpy_to_vtk
    from vtkmodules.vtkCommonDataModel import vtkImageData
    from vtkmodules.vtkIOLegacy import vtkStructuredPointsWriter
    from vtkmodules.vtkIOXML import vtkXMLImageDataWriter

    data = _array("int16")  # (z, y, x) = (5, 4, 3)
    image = vtkImageData()
    image.SetDimensions(3, 4, 5)
    image.SetSpacing(0.5, 1.5, 2.0)
    image.GetPointData().SetScalars(numpy_to_vtk(data.ravel(), deep=True))
    path = tmp_path / f"v{suffix}"
    writer = vtkXMLImageDataWriter() if suffix == ".vti" else vtkStructuredPointsWriter()
    writer.SetFileName(str(path))
    writer.SetInputData(image)
    writer.Write()
    vol = load_volume(path)
    np.testing.assert_array_equal(vol.data, data)
    assert vol.dims == (3, 4, 5) and vol.spacing == (0.5, 1.5, 2.0)
    (tmp_path / "bad.vti").write_text("not VTK")
    with pytest.raises(VolumeError, match=r"bad.vti: not readable VTK image data"):
        load_volume(tmp_path / "bad.vti")


def test_raw_name_parser():
    assert parse_raw_name("bonsai_256x256x256_uint8.raw") == ("bonsai", (256, 256, 256), "uint8")
    assert parse_raw_name("/x/headsq_64x64x93_int16le.raw") == ("headsq", (64, 64, 93),
                                                                 "int16le")
    assert parse_raw_name("my_vol_name_10x20x30_float32.raw.xz") == ("my_vol_name",
                                                                     (10, 20, 30), "float32")
    assert parse_raw_name("bonsai.raw") is None
    assert parse_raw_name("a_1x2_uint8.raw") is None


def _error(*args, **kwargs) -> str:
    with pytest.raises(VolumeError) as info:
        load_volume(*args, **kwargs)
    return str(info.value)


def test_bad_inputs_give_one_error_naming_the_file_or_value(tmp_path):
    short = tmp_path / "short_4x4x4_uint8.raw"
    short.write_bytes(bytes(63))
    msg = _error(short)
    assert str(short) in msg and "63 bytes" in msg and "64" in msg

    nodims = tmp_path / "nodims.raw"
    nodims.write_bytes(bytes(8))
    assert "without dims" in _error(nodims) and str(nodims) in _error(nodims)
    assert "without a dtype" in _error(nodims, dims=(2, 2, 2))

    odd = tmp_path / "x_2x2x2_complex64.raw"
    odd.write_bytes(bytes(64))
    assert "unknown raw dtype 'complex64'" in _error(odd) and str(odd) in _error(odd)
    weird = tmp_path / "w.raw"
    weird.write_bytes(bytes(8))
    assert "'int3'" in _error(weird, dims=(2, 2, 2), dtype="int3")

    nan = np.ones((3, 3, 3), np.float32)
    nan[1, 2, 0] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    msg = _error(tmp_path / "nan.npy")
    assert "NaN/inf" in msg and "x=0, y=2, z=1" in msg and "nan.npy" in msg
    inf = np.ones((3, 3, 3), np.float32)
    inf[0, 0, 0] = np.inf
    inf[2, 2, 2] = 0
    np.save(tmp_path / "inf.npy", inf)
    assert "NaN/inf" in _error(tmp_path / "inf.npy")

    np.save(tmp_path / "const.npy", np.full((3, 3, 3), 7, np.uint8))
    assert "constant volume" in _error(tmp_path / "const.npy") and "7" in _error(
        tmp_path / "const.npy")
    np.save(tmp_path / "flat.npy", np.arange(9, dtype=np.float32).reshape(1, 3, 3))
    assert "empty volume" in _error(tmp_path / "flat.npy")
    empty = tmp_path / "empty_0x0x0_uint8.raw"
    empty.write_bytes(b"")
    assert "empty volume" in _error(empty)

    msg = _error("no-such-volume")
    assert "'no-such-volume'" in msg and "bonsai" in msg and "marschner-lobb" in msg
    assert "file not found" in _error(tmp_path / "missing.nrrd")
    for name in ("bad.nrrd", "bad.nii", "bad.nii.gz", "bad.npy"):
        (tmp_path / name).write_bytes(b"this is not a volume file")
        msg = _error(tmp_path / name)
        assert name in msg and ("not a readable" in msg or "cannot read" in msg)
    (tmp_path / "bad_2x2x2_uint8.raw.gz").write_bytes(b"not gzip")
    assert "cannot read" in _error(tmp_path / "bad_2x2x2_uint8.raw.gz")
    (tmp_path / "v.vtr").write_bytes(b"x")
    assert "unknown volume format '.vtr'" in _error(tmp_path / "v.vtr")
    assert "size 'big'" in _error("field:big")
    assert "spacing" in _error("marschner-lobb:8", spacing=(1, 0, 1))


def test_shipped_volumes_load_by_name_with_their_dims():
    expected = {"bonsai": (256, 256, 256), "aneurism": (256, 256, 256),
                "tooth": (103, 94, 161), "neghip": (66, 66, 66), "ironprot": (68, 68, 68),
                "headsq": (64, 64, 93)}
    assert shipped_volumes() == expected
    for name, dims in expected.items():
        vol = load_volume(name)
        assert vol.dims == dims and vol.name == name and vol.data.dtype == np.float32
        assert vol.value_range[1] > vol.value_range[0]
    assert load_volume("headsq").spacing == (3.2, 3.2, 1.5)
    assert load_volume("HeadSq").value_range == (0.0, 3926.0)
    bonsai = load_volume("bonsai")
    assert abs(float(bonsai.data.mean()) - 13.71) < 0.01  # SOURCES.md: mean 13.71


def test_marschner_lobb_values_and_names():
    assert marschner_lobb_value(0, 0, 0) == pytest.approx(0.6)  # (1 - 0 + 0.25 * 2) / 2.5
    assert marschner_lobb_value(0, 0, 1) == pytest.approx(0.2)
    assert marschner_lobb_value(0, 0, -1) == pytest.approx(1.0)
    # r = 1: rho_r = cos(2 pi 6 cos(pi / 2)) = 1; z = 0.5: sin(pi / 4)
    assert marschner_lobb_value(1, 0, 0.5) == pytest.approx((1 - np.sqrt(0.5) + 0.5) / 2.5)
    vol = load_volume("marschner-lobb:41")
    assert vol.dims == (41, 41, 41) and vol.name == "marschner-lobb:41"
    assert vol.data[20, 20, 20] == pytest.approx(0.6)  # grid point 20 of 41 is the centre
    assert vol.data[40, 20, 20] == pytest.approx(0.2)  # z index 40 is z = +1
    assert vol.data[0, 0, 0] == pytest.approx(marschner_lobb_value(-1, -1, -1))
    assert load_volume("marschner-lobb").dims == (41, 41, 41)


def test_generated_field_is_deterministic_and_sparse():
    a = load_volume("field:40")
    b = load_volume("field:40")
    assert a.dims == (40, 40, 40) and a.name == "field:40"
    np.testing.assert_array_equal(a.data, b.data)
    empty_share = float((a.normalized < 0.02).mean())
    assert 0.2 < empty_share < 0.95


@pytest.mark.parametrize(("values", "is_bytes"), [
    (np.arange(256), True),           # 8-bit scan
    (np.arange(256) + 1000.0, True),  # any 256 whole levels above the minimum
    (np.arange(256) - 0.5, True),     # whole steps from a fractional minimum
    (np.arange(257), False),          # 257 levels
    (np.arange(256) * 0.5, False),    # half steps
])
def test_byte_levels_times_value_scale_is_normalized_bit_for_bit(values, is_bytes):
    data = np.resize(np.asarray(values, np.float32), (4, 8, 9))
    data.flat[:len(values)] = values  # every level present: the range is the values'
    vol = Volume(data)
    levels = vol.byte_levels
    assert (levels is not None) == is_bytes
    if is_bytes:
        assert levels.dtype == np.uint8
        np.testing.assert_array_equal(levels.astype(np.float32) * vol.value_scale,
                                      vol.normalized)
