"""``autotune bench tracer-tuned``: the ray tracer's auto-tuning experiment (Ganestam, Doggett,
"Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture Model"; figures 5 and
8), held out and with fair baselines.

Controlled time: the frame the user waits for, the tuner's work (probe, choice, bookkeeping) +
kernels + read-back, on the wall clock (``TunedFrame.measured``); the kernels' event time is
reported beside it (``kernel_ms``). Every controller pays only its own work: the model-free
baselines price nothing, so they probe nothing. The
scenes and the size (480x270) are not the calibration's (spheres, city, bunny at 320x180 /
640x360), so every view is held out: the validation scenes (dragon, sibenik) by default, the
test scenes (grass, terrain, aneurism) with ``--set test``, only to report
(``governed.mesh.scene_sets`` says the rule). Per scene: an orbit-and-dolly animation and an
abrupt 180° turn from an empty view to a view of the held-out path; the target is the frame
time of 8 AO rays + shadows + Phong on the orbit's first view without the tuner (so a tuner
whose work costs more than it buys falls short of that setting).

Controllers, each given a fair chance:
- feed-forward: the probe + model + slow feedback (the product), under the default probe
  policy (``on-change``), and as variants under ``always`` and ``never``
  (``governed.probe_policy``) and with the frame's single correction only;
- fixed: tuned by measurement on the first frame that shows the scene (the orbit's first, the
  turn's first after the turn): the best setting whose measured frame fits the target, bisected
  over the settings in cost order (AO rays with shadows and Phong on; without AO, shadows, then
  Phong off) and stopped at a setting within 1 % under the target (as Ganestam & Doggett tuned
  by hand);
- PI: walks the same quality-ranked candidate order as the tuner; gains tuned live on a
  calibration scene's orbit (bunny) in the same settings space and at the same size;
- governor: a dynamic-resolution governor with Unreal Engine 5's rules on the same order
  (``autotune.controllers.governor``), at the engine's defaults.

Also: the noise floor (the target's setting rendered 24 times on the orbit's first view: how
far a frame strays from its median when nothing changes), PSNR / SSIM of chosen frames against
the full-quality frame (64 AO rays + shadows + Phong) of the same view, its AO rays
independent of the frame's, and a lasting 2x cost step (from one frame on, every kernel runs
twice) under the feed-forward tuner: how many frames until it is back within 5 %; and a load
that changes (a CPU-bound process started and stopped mid-path) under per-phase and under frame
feedback: how many frames until back within 5 % after it starts and after it stops.
"""

from benchmarks.governed.tracer_tuned.command import main

__all__ = ["main"]
