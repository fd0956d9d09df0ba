"""Issue 19: the calibration / validation / test split, the test scenes, the changing load."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.governed import tracer_model as model_accuracy
from benchmarks.governed.tracer_tuned import command as paper
from benchmarks.governed.tracer_tuned import goals as tuned_goals
from benchmarks.harness.cpu_load import CpuLoad
from governed.mesh.scene_sets import (
    CALIBRATION_SCENES,
    TEST_SCENES,
    VALIDATION_SCENES,
    evaluation_scenes,
    refusal,
    scene_sets,
    set_of,
    sets_record,
)
from raytracer.mesh.cpu_render import render_cpu
from raytracer.mesh.scene import SCENES
from raytracer.mesh.tracer import RenderSettings, packed_normals

W, H = 64, 36
GENERATED_TEST_SCENES = ("grass", "terrain", "aneurism")  # built in code at every load


def test_sets_are_disjoint_and_every_shipped_scene_is_in_one():
    sets = scene_sets()
    listed = [s for scenes in sets.values() for s in scenes]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(SCENES)
    assert set(CALIBRATION_SCENES) == {"spheres", "city", "bunny"}
    assert not set(TEST_SCENES) & {*CALIBRATION_SCENES, *VALIDATION_SCENES, "dragon-small"}


@pytest.mark.parametrize("name", sorted(s for v in scene_sets().values() for s in v))
def test_every_listed_scene_loads(scenes, name):
    scene = scenes(name)
    assert scene.triangle_count > 0 and scene.diagonal > 0


def test_evaluation_defaults_and_refusals():
    assert evaluation_scenes("validation", quick=False) == VALIDATION_SCENES
    assert evaluation_scenes("test", quick=False) == TEST_SCENES
    assert set_of(evaluation_scenes("validation", quick=True)[0]) == "validation"
    assert set_of(evaluation_scenes("test", quick=True)[0]) == "test"
    with pytest.raises(ValueError, match="calibration"):
        evaluation_scenes("calibration", quick=False)
    assert "calibration scene" in refusal(["dragon", "bunny"], "validation")
    assert "--set test" in refusal(["grass"], "validation")
    assert "--set validation" in refusal(["sibenik"], "test")
    assert refusal(["terrain", "grass"], "test") is None
    assert refusal(["my_mesh.ply"], "test") is None  # a user's file belongs to no set
    record = sets_record("test", ["terrain"])
    assert record["evaluated"] == "test" and record["test"] == list(TEST_SCENES)


@pytest.mark.parametrize("bench", [paper, model_accuracy])
@pytest.mark.parametrize("argv", [["--scene", "bunny"], ["--scene", "city", "--set", "test"],
                                  ["--scene", "grass"]])
def test_benchmarks_refuse_a_scene_outside_the_evaluated_set(bench, argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert "scene" in capsys.readouterr().err


@pytest.mark.parametrize("name", GENERATED_TEST_SCENES)
def test_generated_test_scenes_are_deterministic(name):
    a, b = SCENES[name](), SCENES[name]()
    assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.faces, b.faces)
    assert a.camera == b.camera and np.array_equal(a.light, b.light)
    assert a.triangle_count > 10_000  # enough triangles for a deep BVH


@pytest.mark.parametrize("name", GENERATED_TEST_SCENES)
def test_generated_test_scenes_match_cpu_reference(tracers, name):
    tracer = tracers(name)
    s, b = tracer.scene, tracer.bvh
    # the CPU twin traces each pixel's own AO rays (the filter has its own check)
    settings = RenderSettings(ao_rays=2, ao_radius=0.1, shadows=True, phong=True,
                              ao_filter=False)
    frame = tracer.render(s.camera, W, H, settings, seed=3)
    ref, *_ = render_cpu(b.nodes, b.node_ints, b.shadow_nodes, b.shadow_node_ints, b.triangles,
                         packed_normals(s, b), s.camera.basis(W, H), W, H, s.light,
                         np.float32(s.diagonal), settings.ao_rays, settings.ao_radius * s.diagonal,
                         settings.shadows, settings.phong, 3)
    diff = np.abs(frame.image.astype(int) - ref.astype(int)).max(axis=2)
    assert (diff > 3).mean() < 0.005, f"{(diff > 3).mean():.4f} of pixels differ"
    assert frame.image[..., :3].std() > 5  # not a blank image


def test_aneurism_surface_is_closed_and_wound_outward(scenes):
    """The voxel surface encloses positive volume (outward winding, so its vertex normals point
    out of the vessels), less than the voxels' own (smoothing shrinks it), not far less."""
    scene = scenes("aneurism")
    tri = scene.triangles().astype(np.float64)
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    edges = np.sort(np.concatenate([scene.faces[:, [0, 1]], scene.faces[:, [1, 2]],
                                    scene.faces[:, [2, 0]]]), axis=1)
    _, uses = np.unique(edges, axis=0, return_counts=True)
    assert np.all(uses % 2 == 0)  # every edge shared by an even number of faces: closed
    voxels = 5066 * 4**3  # the occupied 4³-blocks of the CT volume
    assert 0.3 * voxels < volume < voxels


def test_cpu_load_ends_by_itself_and_when_stopped():
    by_itself = CpuLoad(limit_s=0.2)
    by_itself.start()
    for _ in range(600):  # its own limit ends it: no stop() here
        if by_itself.ended:
            break
        time.sleep(0.1)
    assert by_itself.ended
    with CpuLoad(processes=2, limit_s=30.0) as stopped:
        stopped.start()
        assert stopped.running
    assert stopped.ended
    with pytest.raises(ValueError):
        CpuLoad(processes=0)


def _load_figures(after_start, after_stop) -> dict:
    return {"frames_to_within_5pct_after_load_starts": after_start,
            "frames_to_within_5pct_after_load_stops": after_stop}


def test_paper_goals_judge_the_products_load_run_only():
    """The per-phase feedback run is the product's; the frame-feedback run is a diagnostic."""
    load = {"phase": _load_figures(3, None), "frame": _load_figures(1, 1)}
    out = tuned_goals.goals([], None, load)
    assert out["load_recovery_after_starts_frames"]["met"]
    assert out["load_recovery_after_starts_frames"]["value"] == 3
    assert not out["load_recovery_after_stops_frames"]["met"]  # never back
    assert not any("frame" in k.split("_recovery")[0] for k in out)
    assert tuned_goals.goals([], None) == {}


def _path(first: float, ssim: float, over: int, **more) -> dict:
    return {"frames": 60, "mean_frame_ms": 50.0, "tuner_share_of_frame": 0.02,
            "mean_abs_error_top_on_target": 0.02, "p95_abs_error_top_on_target": 0.05,
            "frames_at_top_under_target": 0, "mean_model_feedback_error": 0.01,
            "error_first_frame": first, "quality_reversals": 1, "frames_over_budget": over,
            "image_quality": {"mean_ssim": ssim}, **more}


def _scene(controllers: dict) -> dict:
    return {"scene": "grass", "noise_floor": {"mean_off_median": 0.02},
            "controllers": controllers}


def test_paper_goals_judge_first_frames_noise_and_the_tuners_share():
    ff = {"orbit": _path(0.12, 0.9, 2), "turn": _path(0.9, 0.9, 2,
                                                      error_first_frame_after_turn=0.08)}
    out = tuned_goals.goals([_scene({"feedforward": ff})], None)
    assert out["grass_first_frame_of_scene"]["value"] == 0.12
    assert out["grass_first_frame_of_scene"]["met"]
    assert not any("turn_first_frame_of_scene" in k for k in out)  # an empty view
    assert out["grass_turn_first_frame_after_turn"]["met"]
    assert out["grass_orbit_model_feedback_vs_noise"]["value"] == pytest.approx(0.5)
    assert out["grass_tuner_share"]["value"] == pytest.approx(0.02)
    assert out["grass_orbit_quality_reversals_per_60_frames"]["met"]
    ff["orbit"]["error_first_frame"] = 0.2
    ff["orbit"]["tuner_share_of_frame"] = 0.08
    out = tuned_goals.goals([_scene({"feedforward": ff})], None)
    assert not out["grass_first_frame_of_scene"]["met"] and not out["grass_tuner_share"]["met"]


def test_paper_goals_a_baseline_that_looks_better_within_budget_dominates():
    ff = {"orbit": _path(0.1, 0.90, 2), "turn": _path(0.1, 0.90, 2)}
    overshoots = {"orbit": _path(0.1, 0.95, 30), "turn": _path(0.1, 0.95, 30)}
    out = tuned_goals.goals([_scene({"feedforward": ff, "pi": overshoots})], None)
    assert out["grass_orbit_not_dominated"]["met"]  # its looks were bought by overshooting
    assert out["frames_over_budget_vs_baselines_as_good"]["met"]  # 4 <= half of 60
    within = {"orbit": _path(0.1, 0.95, 2), "turn": _path(0.1, 0.95, 5)}
    out = tuned_goals.goals([_scene({"feedforward": ff, "governor": within})], None)
    assert not out["grass_orbit_not_dominated"]["met"]
    assert out["grass_orbit_not_dominated"]["dominated_by"] == ["governor"]
    assert out["grass_turn_not_dominated"]["met"]
    assert not out["frames_over_budget_vs_baselines_as_good"]["met"]  # 4 > half of 7


def test_frames_to_within():
    assert paper.frames_to_within(np.array([0.3, 0.2, 0.04, 0.5])) == 2
    assert paper.frames_to_within(np.array([0.3, 0.06])) is None
    assert paper.frames_to_within(np.array([])) is None




def test_paper_error_goals_follow_the_oracle_only_where_it_is_above_the_absolute_goal():
    ff = {"orbit": _path(0.1, 0.9, 2, mean_abs_error_top_on_target=0.05,
                         p95_abs_error_top_on_target=0.09),
          "turn": _path(0.1, 0.9, 2, mean_abs_error_top_on_target=0.05,
                        p95_abs_error_top_on_target=0.09)}
    scene = _scene({"feedforward": ff})
    out = tuned_goals.goals([scene], None)
    assert not out["grass_orbit_mean_error"]["met"]  # no oracle: judged against 3 %
    assert "judged absolutely" in out["grass_orbit_mean_error"]["what"]
    scene["oracle"] = {"orbit": {"mean_abs_error_vs_target": 0.045,
                                 "p95_abs_error_vs_target": 0.07},
                       "turn": {"mean_abs_error_vs_target": 0.02,
                                "p95_abs_error_vs_target": 0.10}}
    out = tuned_goals.goals([scene], None)
    assert out["grass_orbit_mean_error"]["met"]  # 5 % <= 1.2 x the oracle's 4.5 %
    assert out["grass_orbit_mean_error"]["goal"] == "<= 0.054"
    assert not out["grass_orbit_p95_error"]["met"]  # the oracle's 7 % is within 8 %: 8 % holds
    assert not out["grass_turn_mean_error"]["met"]  # the oracle's 2 %: 3 % holds
    assert out["grass_turn_p95_error"]["met"]  # 9 % <= 1.2 x 10 %


def test_image_quality_is_measured_on_about_thirty_frames_of_each_path_and_the_turn():
    orbit = paper.quality_frames_of(60, None, paper.QUALITY_FRAMES)
    assert len(orbit) == 30 and orbit[:3] == [0, 2, 4]
    turn = paper.quality_frames_of(30, 17, paper.QUALITY_FRAMES)
    assert 17 in turn and len(turn) == 30
    assert paper.quality_frames_of(24, 5, 30) == sorted({*range(24), 5})  # quick: every frame
