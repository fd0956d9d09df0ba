"""A benchmark run off its goals' protocol (an option set away from its default) is saved under
a name of its own and decides no goal, so it never replaces the protocol's result."""

from __future__ import annotations

import pytest

from benchmarks.harness.run_record import changed_options, variant_name
from benchmarks.renderers import compositing, throughput, volume_throughput
from benchmarks.tuner import embed


def _changed(module, *argv: str) -> dict[str, str]:
    options = module.parser()
    return changed_options(options, options.parse_args(list(argv)), module.PROTOCOL_OPTIONS)


def test_compositing_runs_off_the_protocol_save_apart():
    assert variant_name("compositing", _changed(compositing, "--save"), "cpu") == \
        compositing.RESULTS_NAME == "compositing_cpu.json"
    off = _changed(compositing, "--quick", "--runs", "2", "--save")
    assert variant_name("compositing", off, "cpu") == "compositing_quick_runs-2_cpu.json"


def test_embed_runs_off_the_protocol_save_apart():
    assert variant_name("embed", _changed(embed, "--save", "--json")) == "embed.json"
    off = _changed(embed, "--volume", "tooth", "--volume", "my scan.nrrd", "--no-tracer")
    assert variant_name("embed", off) == "embed_volume-tooth+my-scan.nrrd_no_tracer.json"


def test_volume_throughput_runs_off_the_protocol_save_apart():
    assert volume_throughput.parse(["--save", "--device", "pocl"]).changed == {}
    off = volume_throughput.parse(["--volume", "neghip", "--parts", "raycast"]).changed
    assert variant_name("volume", off, "intel-cpu") == \
        "volume_volume-neghip_parts-raycast_intel-cpu.json"


def test_throughput_marks_its_repeats_and_keeps_quick_runs_unsaved():
    assert throughput.parse_args(["--save"]).changed == {}
    assert variant_name("throughput", throughput.parse_args(["--repeats", "2"]).changed,
                        "intel-cpu") == "throughput_repeats-2_intel-cpu.json"
    with pytest.raises(SystemExit):
        throughput.parse_args(["--quick", "--save"])
