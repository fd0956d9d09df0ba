"""The volume model on a GPU device (device-free, fake timings): a rank's work is the clock its
record names (kernel event seconds on a GPU, CPU seconds on a CPU device), the core-sharing
terms are off on a GPU, and CPU records give the numbers the model gave before the clock was
recorded (computed by that code on these fake frames and written down here)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from governed.volume.model_fit import (
    CalibrationSample,
    CoreSharing,
    fit_volume_model,
    render_cache_bytes,
    render_rows,
    shared_cores,
    streamed_shares,
    work_seconds,
)
from models.volume_cost import ClusterFrameModel, GatherModel, RenderModel, StageModel
from raytracer.volume.compositing import StageTiming
from raytracer.volume.distributed import (
    DistributedFrameRecord,
    DistributedRenderer,
    FrameSettings,
    RankTiming,
    _decode,
    _encode,
    load_everywhere,
    seed_orbit,
    work_clock,
)

THRESHOLDS = np.array([0.9, 0.95, 1.0])
RANKS = 2


def fake_samples(clock: str | None = None, cpu_scale: float = 1.0, frames: int = 14,
                 seed: int = 5) -> list[CalibrationSample]:
    """``frames`` calibration frames of 2 ranks, the work from a known linear form: the kernel
    seconds are the work, the wall 1.3x it, the CPU seconds 1.7x it times ``cpu_scale`` and
    noise, and one rank-frame took no CPU time. ``clock``: the work_clock each RankTiming is
    given ("cpu_rule": the one a CPU device records; None: none, a record from before it)."""
    rng = np.random.default_rng(seed)
    out = []
    for f in range(frames):
        settings = FrameSettings(float(rng.choice([0.5, 1.0, 2.0])),
                                 float(rng.choice([0.5, 1.0])), float(rng.choice(THRESHOLDS)))
        w, h = 128, 96
        rw, rh = settings.render_size(w, h)
        length = rng.uniform(20, 90, (3, RANKS))
        workload = SimpleNamespace(thresholds=THRESHOLDS, length=length,
                                   span=length * rng.uniform(1.2, 1.8, (3, RANKS)),
                                   rays=rng.uniform(0.3, 0.9, RANKS),
                                   slice_crossing=float(rng.uniform(0.05, 0.95)),
                                   plane_crossing=0.0,  # one plane: the old form
                                   jumps=np.zeros((3, RANKS)))  # none: the old form
        t = int(np.argmin(np.abs(THRESHOLDS - settings.ert_threshold)))
        ranks = []
        for r in range(RANKS):
            samples = int(length[t, r] / settings.step * rw * rh)
            skipped = int((workload.span[t, r] - length[t, r]) / settings.step * rw * rh)
            rays = int(workload.rays[r] * rw * rh)
            work = (3e-9 * samples + 4e-10 * skipped + 2e-8 * rays + 1e-9 * rw * rh + 2e-4) \
                * rng.normal(1.0, 0.02)
            cpu = 0.0 if (f, r) == (3, 1) else work * 1.7 * cpu_scale * rng.uniform(0.9, 1.1)
            stage = StageTiming("stage0", 1e-4, 5e-5, 4 * rw * rh, 4 * rw * rh, rw * rh // 2,
                                [1 - r])
            gather = StageTiming("gather", 2e-5, 0.0, 0 if r == 0 else 8 * rw * rh,
                                 8 * rw * rh if r == 0 else 0)
            kw = {} if clock is None else \
                {"work_clock": work_clock("CPU", cpu) if clock == "cpu_rule" else clock}
            ranks.append(RankTiming(r, r, work * 1.3, work, samples, skipped, rays, 1.2e-4,
                                    [stage], gather, cpu, int(samples * 1.4), **kw))
        finish = 3e-9 * w * h if settings.image_scale < 1 else 0.0
        render_max = max(x.render_seconds for x in ranks)
        rec = DistributedFrameRecord(f, (0.0, 0.0, 5.0), settings, "binary-swap", w, h, rw, rh,
                                     [0, 1], render_max + 1e-3 * rng.uniform(1, 2) + finish,
                                     finish, ranks)
        out.append(CalibrationSample(workload, settings, rec, np.array([0.2, 0.6])))
    return out


# What the code before the work clock gave on fake_samples() (CPU seconds, wall where none)
OLD_WORK = [
    ["0x1.4e464df528fe0p-9", "0x1.11a154214d4e1p-9"],
    ["0x1.28e88f8bb5648p-10", "0x1.35b262ea2b66dp-10"],
    ["0x1.2f99e311e437fp-9", "0x1.2c9829a80b101p-9"],
    ["0x1.a48b40e96c853p-11", "0x1.9478fec39dbf9p-11"],
    ["0x1.91388f135fc63p-8", "0x1.9e57a0921de10p-8"],
    ["0x1.78273fe89c65cp-7", "0x1.82b15fa2ec131p-8"],
    ["0x1.c4f58a6df0730p-10", "0x1.d60437480e0c2p-10"],
    ["0x1.df33405d392fbp-10", "0x1.0669936a9bc6fp-9"],
    ["0x1.f6392ae85852ap-9", "0x1.965165023da21p-9"],
    ["0x1.7efad80df1317p-9", "0x1.c3c8fddc14e9ep-10"],
    ["0x1.44a36a379e3cap-10", "0x1.a5c46f8f10a01p-11"],
    ["0x1.520ebd3f0fafcp-11", "0x1.466410476234fp-10"],
    ["0x1.92a65e5e67990p-9", "0x1.0632b5261c728p-9"],
    ["0x1.c902916a90b50p-9", "0x1.30790c0d83673p-9"],
]
# the fitted render models' first four rows per rank, as fitted on an AVX-512 CPU (Zen 4):
# least squares rounds differently with another CPU's vector width (6e-12 relative on a Zen 3),
# so they are compared to FIT_RTOL, far below any change of the fit's formula or data
FIT_RTOL = 1e-9
OLD_ROWS = [[0.0024537784342792686, 0.0010820249443532085, 0.0023079708704154918,
             0.0008048852167736387],
            [0.002115200376908292, 0.0010613586504516148, 0.0022348826369877105,
             0.0009790449375912083]]
# the compositing + gather seconds the fit gives a full-scale and a half-scale frame of these
# samples, and the upscale's seconds per pixel. The fit's five coefficients are not compared:
# these frames' compositing work takes two values only (a rank-2 design), so the coefficients
# are not determined and the solver lands on other ones on another CPU (40 % apart on a Zen
# 3); the fitted seconds are determined, the robust fit being run to convergence
OLD_COMPOSITING = (0.0014532520520631534, 0.001248819871593153)
OLD_FINISH = 3e-09
# sections_of(...)["render"] of WORK under each sharing
WORK = np.array([[1e-3, 5e-3, 2e-3], [4e-3, 1e-3, 2e-3]])
OLD_RENDER = {
    None: ["0x1.0624dd2f1a9fcp-8", "0x1.47ae147ae147bp-8", "0x1.0624dd2f1a9fcp-9"],
    (2.0, 2.0, ()): ["0x1.47ae147ae147bp-9", "0x1.89374bc6a7efap-9", "0x1.0624dd2f1a9fcp-9"],
    (1.0, 1.0, (0, 1)): ["0x1.0624dd2f1a9fcp-7", "0x1.47ae147ae147bp-7", "0x1.0624dd2f1a9fcp-8"],
}


def _hex(values) -> list[str]:
    return [float(v).hex() for v in values]


@pytest.mark.parametrize("clock", [None, "cpu_rule"])
def test_cpu_records_give_the_old_numbers(clock):
    """A CPU device's records (and records without a clock) fit exactly what they did."""
    samples = fake_samples(clock)
    assert [_hex(work_seconds(r) for r in s.record.ranks) for s in samples] == OLD_WORK
    if clock:
        assert samples[3].record.ranks[1].work_clock == "wall"  # no CPU time was taken
        assert samples[0].record.ranks[0].work_clock == "cpu"
    for key, want in OLD_RENDER.items():
        sharing = CoreSharing(*key) if key else None
        model, finish = fit_volume_model(samples, RANKS, 128, 96, THRESHOLDS, sharing)
        assert model.device_kind == "CPU"
        assert (model.cores, model.threads, model.core_groups) == \
            ((key[0], key[1], key[2]) if key else (math.inf, 1.0, ()))
        got = model.sections_of(WORK, {"composite": np.zeros(3), "gather": np.zeros(3)})
        assert _hex(got["render"]) == want
        for r in range(RANKS):
            es, ek, er, px, _, _ = render_rows(samples, r, THRESHOLDS)
            rows = model.render[r].predict(es, ek, er, px, samples[0].streamed[r],
                                           [s.workload.slice_crossing for s in samples])
            np.testing.assert_allclose(rows[:4], OLD_ROWS[r], rtol=FIT_RTOL)
        fitted = [model.stage.predict(1.0, 16 * px, px) + model.gather.predict(16 * px)
                  for px in (128 * 96 / 2, 64 * 48 / 2)]  # a rank's half, RGBA float32
        np.testing.assert_allclose(fitted, OLD_COMPOSITING, rtol=1e-6)
        assert finish == pytest.approx(OLD_FINISH, rel=FIT_RTOL)


def test_gpu_records_fit_kernel_seconds_and_ignore_cpu_seconds():
    gpu = fake_samples("kernel")
    for s in gpu:
        for r in s.record.ranks:
            assert work_seconds(r) == r.kernel_seconds != r.cpu_seconds
            assert r.to_dict()["work_clock"] == "kernel"
    # the CPU seconds doubled (or left as they are) change nothing in the fit
    a, fa = fit_volume_model(gpu, RANKS, 128, 96, THRESHOLDS, CoreSharing(device_kind="GPU"))
    b, fb = fit_volume_model(fake_samples("kernel", cpu_scale=2.0), RANKS, 128, 96, THRESHOLDS,
                             CoreSharing(device_kind="GPU"))
    assert a.render == b.render and (a.stage, a.gather, fa) == (b.stage, b.gather, fb)
    for r in range(RANKS):  # the rows it fits are the kernel seconds
        assert render_rows(gpu, r, THRESHOLDS)[-1] == \
            [s.record.ranks[r].kernel_seconds for s in gpu]
    cpu, _ = fit_volume_model(fake_samples(), RANKS, 128, 96, THRESHOLDS)
    assert cpu.render != a.render


def test_core_sharing_is_off_on_a_gpu():
    render = (RenderModel(1e-9, 0, 0, 0, 1e-3, fit_error=0.0),
              RenderModel(2e-9, 0, 0, 0, 1e-3, fit_error=0.0))
    gpu = ClusterFrameModel(render, StageModel(0, 0, 0, 0.0), GatherModel(0, 0, 0.0), cores=1.0,
                            threads=4.0, core_groups=(0, 1), device_kind="GPU")
    assert (gpu.cores, gpu.threads, gpu.core_groups) == (math.inf, 1.0, ())
    out = gpu.sections_of(WORK, {"composite": np.zeros(3), "gather": np.zeros(3)})
    np.testing.assert_array_equal(out["render_per_rank"], WORK)  # each rank's kernel seconds
    np.testing.assert_array_equal(out["render"], WORK.max(axis=0))
    rng = np.random.default_rng(0)  # the compiled pricing: no sharing either
    length = rng.uniform(5, 80, (3, 2))
    ratio = np.ones((3, 2, 1))
    threshold, scale_of = rng.integers(0, 3, 20), np.zeros(20, np.int64)
    pixels = rng.uniform(1e4, 3e5, 20)
    compiled = gpu.slowest_render_on_grid(length, length, np.zeros((3, 2)), np.ones(2), ratio,
                                          0.0, 0.0, threshold, scale_of, pixels, pixels)
    work = gpu.rank_work(length[threshold].T * pixels, np.zeros((2, 20)),
                         np.ones((2, 1)) * pixels, pixels)
    np.testing.assert_array_equal(compiled, work.max(axis=0))
    # the model's JSON names the device kind; a model from before it was a CPU one
    d = json.loads(json.dumps(gpu.to_dict()))
    assert d["device_kind"] == "GPU" and d["cores"] is None
    assert ClusterFrameModel.from_dict(d) == gpu
    del d["device_kind"]
    assert ClusterFrameModel.from_dict(d).device_kind == "CPU"
    fitted, _ = fit_volume_model(fake_samples("kernel"), RANKS, 128, 96, THRESHOLDS,
                                 CoreSharing(1.0, 4.0, (0, 1), "GPU"))
    assert (fitted.device_kind, fitted.cores, fitted.threads, fitted.core_groups) == \
        ("GPU", math.inf, 1.0, ())


class FakeLocal:
    """A local renderer on a device of ``kind``: fixed kernel seconds, a blank image."""

    def __init__(self, kind: str | None, kernel_seconds: float = 0.25) -> None:
        if kind is not None:
            self.device_info = SimpleNamespace(kind=kind)
            self.cache_bytes = 6 << 20
        self.kernel_seconds = kernel_seconds

    def render(self, camera, width, height, step, ert_threshold):
        sum(range(20000))  # some CPU time
        return SimpleNamespace(rgba=np.zeros((height, width, 4), np.float32),
                               kernel_seconds=self.kernel_seconds, samples=10, skipped=2,
                               rays=5)

    def prepare_steps(self, steps) -> None:
        pass


@pytest.fixture(scope="module")
def small_volume():
    return load_everywhere("marschner-lobb:24")


@pytest.mark.parametrize("kind, clock", [("GPU", "kernel"), ("CPU", "cpu"), (None, "cpu")])
def test_a_frame_records_the_clock_of_its_device(small_volume, kind, clock):
    """One rank in process: the record names the clock its device's work is measured in, the
    model fits that clock, and the gathered vector carries it."""
    vol, tf = small_volume
    renderer = DistributedRenderer(vol, tf, local=FakeLocal(kind))
    rec = renderer.render_frame(seed_orbit(vol.radius, 1)[0], 16, 12, FrameSettings()).record
    rank = rec.ranks[0]
    assert rank.work_clock == clock
    assert json.loads(json.dumps(rec.to_dict()))["ranks"][0]["work_clock"] == clock
    assert work_seconds(rank) == (0.25 if kind == "GPU" else rank.cpu_seconds)
    sharing = shared_cores(renderer)
    assert sharing.device_kind == (kind or "CPU")
    if kind == "GPU":
        assert render_cache_bytes(renderer) == 6 << 20  # the device's, not a core's
    again = _decode(0, _encode(rank), [s.name for s in rank.stages],
                    [s.partners for s in rank.stages])
    assert again == rank


def test_a_device_without_a_cache_size_leaves_the_streamed_share_off():
    assert streamed_shares(np.array([1e6, 0.0]), 0).tolist() == [0.0, 0.0]
    assert streamed_shares(np.array([1 << 20, 0.0]), 1 << 20).tolist() == [0.5, 0.0]
