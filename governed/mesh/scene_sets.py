"""Which shipped scene is for what: calibration, validation or test, fixed in advance.

The rule: the model is fitted on the calibration scenes; model and controller changes are chosen
by their figures on the validation scenes; the test scenes are touched only to report, never to
choose a change (a change chosen by a test figure makes that scene a validation scene, and a new
test scene must then be shipped). ``dragon-small`` is the dragon at another resolution, the same
object, so it belongs to validation (the quick runs' stand-in). No shipped mesh scan exists
besides the bunny, the dragon and sibenik; the test scenes are two procedural ones of different
character, thin blades that hide each other (grass) and one self-shadowing surface (terrain),
and a scanned shape: the vessel tree of the shipped aneurism CT volume (aneurism).
"""

from __future__ import annotations

from governed.mesh.calibration_frames import CALIBRATION_SCENES

VALIDATION_SCENES: tuple[str, ...] = ("dragon", "sibenik")
TEST_SCENES: tuple[str, ...] = ("grass", "terrain", "aneurism")
QUICK_STAND_INS = {"validation": ("dragon-small",), "test": ("grass",)}  # for --quick runs
EVALUATION_SETS = ("validation", "test")


def scene_sets() -> dict[str, list[str]]:
    """Every set's scenes (quick stand-ins included where they belong), for a benchmark's JSON."""
    return {"calibration": list(CALIBRATION_SCENES),
            "validation": [*VALIDATION_SCENES, *QUICK_STAND_INS["validation"]],
            "test": list(TEST_SCENES)}


def set_of(scene: str) -> str | None:
    """The set a shipped scene belongs to; None for a scene of none (a user's mesh file)."""
    return next((name for name, scenes in scene_sets().items() if scene in scenes), None)


def evaluation_scenes(which: str, quick: bool) -> tuple[str, ...]:
    """The scenes a benchmark evaluates on by default: ``which`` set, its stand-in if quick."""
    if which not in EVALUATION_SETS:
        raise ValueError(f"unknown evaluation set {which!r}; use one of "
                         f"{', '.join(EVALUATION_SETS)}")
    if quick:
        return QUICK_STAND_INS[which]
    return VALIDATION_SCENES if which == "validation" else TEST_SCENES


def sets_record(evaluated: str, scenes: list[str]) -> dict:
    """The JSON's ``"sets"`` block: every set's scenes, which one was evaluated, and on what."""
    return {**scene_sets(), "evaluated": evaluated, "evaluated_scenes": list(scenes)}


def refusal(scenes: list[str], which: str) -> str | None:
    """Why these scenes cannot be evaluated as set ``which`` (None if they can): a calibration
    scene never, a scene of the other evaluation set not under this set's name."""
    for scene in scenes:
        belongs = set_of(scene)
        if belongs == "calibration":
            return f"{scene} is a calibration scene; evaluate on another"
        if belongs not in (None, which):
            return f"{scene} is a {belongs} scene; pass --set {belongs} to evaluate on it"
    return None
