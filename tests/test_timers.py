"""The CPU busy timer reads the process's CPU time only once the runtime's workers are idle."""

from __future__ import annotations

import itertools

import pytest

from governed.mesh import timers


@pytest.fixture
def clock(monkeypatch):
    """A fake process CPU clock fed from ``readings`` and a wall clock that sleeping moves."""
    state = {"wall": 0.0, "readings": iter(())}
    monkeypatch.setattr(timers, "process_cpu_seconds", lambda: next(state["readings"]))
    monkeypatch.setattr(timers.time, "perf_counter", lambda: state["wall"])
    monkeypatch.setattr(timers.time, "sleep",
                        lambda s: state.__setitem__("wall", state["wall"] + s))
    return state


def test_waits_until_the_workers_stop_spinning(clock):
    step = timers.SETTLE_STEP
    # two workers spinning (two cores' worth per step) for three steps, then idle
    clock["readings"] = iter([0.0, 2 * step, 4 * step, 6 * step, 6 * step + 0.01 * step])
    assert timers.settled_cpu_seconds() == pytest.approx(6.01 * step)


def test_an_idle_process_is_read_after_one_step(clock):
    clock["readings"] = iter([1.0, 1.0])
    assert timers.settled_cpu_seconds() == 1.0
    assert clock["wall"] == pytest.approx(timers.SETTLE_STEP)


def test_a_process_that_never_goes_idle_is_read_at_the_limit(clock):
    step = timers.SETTLE_STEP
    clock["readings"] = (i * step for i in itertools.count())  # one core busy forever
    timers.settled_cpu_seconds()
    assert clock["wall"] == pytest.approx(timers.SETTLE_LIMIT, abs=step)


class _Tracer:
    """Counts renders; each returns the phase seconds of its call number."""

    def __init__(self, kind: str) -> None:
        from types import SimpleNamespace

        self.device_info = SimpleNamespace(kind=kind, compute_units=2)
        self.calls = 0

    def render(self, camera, width, height, settings, seed=0):
        from types import SimpleNamespace

        self.calls += 1
        return SimpleNamespace(phase_seconds={"primary": float(self.calls)})


def test_a_gpu_frame_is_timed_after_an_untimed_render_of_it():
    """A GPU idles at low clocks while the CPU probes the next view: the timed render follows
    an untimed one of the same frame (its figures are the second call's)."""
    gpu = _Tracer("GPU")
    timer = timers.default_timer(gpu)
    assert isinstance(timer, timers.KernelEvents) and timer.warm_up
    assert "untimed first" in timer.describe()
    frame = timer.render(gpu, None, 8, 8, None)
    assert gpu.calls == 2 and frame.phase_seconds == {"primary": 2.0}
    other = _Tracer("ACCELERATOR")
    assert not timers.default_timer(other).warm_up
    timers.default_timer(other).render(other, None, 8, 8, None)
    assert other.calls == 1
    assert isinstance(timers.default_timer(_Tracer("CPU")), timers.CpuBusy)
