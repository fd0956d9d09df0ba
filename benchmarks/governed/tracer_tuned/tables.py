"""``bench tracer-tuned``'s headline as the performance page shows it: per scene and path,
what each controller delivered (frame error, frames over budget, image quality, reversals, the
tuner's share of the frame) beside the oracle and the noise floor measured in the same run; and
the orbits beside the auto-tuning paper's printed figures (Ganestam & Doggett, "Auto-tuning
Interactive Ray Tracing using an Analytical GPU Architecture Model", Sec. 5)."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.page_cells import ms, percent

COLUMNS = ("path", "controller", "mean error", "p95 error", "frames over budget", "mean SSIM",
           "mean PSNR (dB)", "reversals", "tuner's share", "tuner's work (ms)", "of it probe (ms)",
           "probed frames")


def scene_table(result: dict[str, Any]) -> list[str]:
    """One scene's table: a row per path and controller, then the oracle's rows. Errors are
    |frame - target| / target, a frame under the target at the highest setting on target
    (where the file has that figure; older files count it off target); — where a file lacks
    a figure."""
    floor = (result.get("noise_floor") or {}).get("mean_off_median")
    lines = [f"{result['scene']}: target {result['target_ms']:.1f} ms, noise floor "
             f"{percent(floor)} (one view at fixed knobs, mean off its median).", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for controller, paths in result["controllers"].items():
        for path, f in paths.items():
            quality = f.get("image_quality") or {}
            ssim, psnr = quality.get("mean_ssim"), quality.get("mean_psnr_db")
            mean = f.get("mean_abs_error_top_on_target", f.get("mean_abs_error_vs_target"))
            p95 = f.get("p95_abs_error_top_on_target", f.get("p95_abs_error_vs_target"))
            lines.append(
                f"| {path} | {controller} | {percent(mean)} | {percent(p95)} "
                f"| {f.get('frames_over_budget', '—')} "
                f"| {'—' if ssim is None else f'{ssim:.4f}'} "
                f"| {'—' if psnr is None else f'{psnr:.1f}'} | {f.get('quality_reversals', '—')} "
                f"| {percent(f.get('tuner_share_of_frame'))} | {ms(f.get('mean_tuner_ms'))} "
                f"| {ms(f.get('mean_probe_ms'))} | {f.get('probed_frames', '—')} |")
    for path, o in (result.get("oracle") or {}).items():
        reversals = o.get("quality_reversals_per_60_frames")
        lines.append(f"| {path} | oracle | {percent(o['mean_abs_error_vs_target'])} "
                     f"| {percent(o['p95_abs_error_vs_target'])} | — | — | — "
                     f"| {'—' if reversals is None else f'{reversals:g}'} | — | — | — | — |")
    return [*lines, ""]


# The auto-tuning paper's printed mean errors over a 100-frame animation on three GPUs:
# model alone, model + the slow feedback, and the first frame's setting held (one GPU).
SEED_002 = {"fairy": {"model": (0.063, 0.048, 0.021), "model + feedback": (0.011, 0.007, 0.002),
                      "fixed": (0.105,)},
            "cabin": {"model": (0.111, 0.128, 0.199), "model + feedback": (0.017, 0.002, 0.013),
                      "fixed": (0.132,)}}


def seed_range(values: tuple[float, ...]) -> str:
    """A printed figure or the range of several, in percent."""
    low, high = min(values), max(values)
    return percent(low) if low == high else f"{100 * low:.1f}-{100 * high:.1f} %"


def seed_table(results: list[dict[str, Any]]) -> list[str]:
    """Each scene's orbit under feed-forward (model alone, model + feedback) and the fixed
    baseline, beside the paper's printed figures for its two scenes."""
    printed = {k: " / ".join(seed_range(SEED_002[s][k]) for s in SEED_002)
               for k in ("model", "model + feedback", "fixed")}
    lines = ["The orbits beside the auto-tuning paper (Ganestam & Doggett, Sec. 5: fairy / cabin "
             "scenes, three GPUs; fixed on one):", "",
             "| scene | model alone | model + feedback | fixed (frame off target) |",
             "|---|---|---|---|"]
    for result in results:
        ff = result["controllers"].get("feedforward", {}).get("orbit", {})
        fixed = result["controllers"].get("fixed", {}).get("orbit", {})
        lines.append(f"| {result['scene']} | {percent(ff.get('mean_model_error'))} "
                     f"| {percent(ff.get('mean_model_feedback_error'))} "
                     f"| {percent(fixed.get('mean_abs_error_vs_target'))} |")
    lines.append(f"| the paper | {printed['model']} | {printed['model + feedback']} "
                 f"| {printed['fixed']} |")
    return [*lines, ""]
