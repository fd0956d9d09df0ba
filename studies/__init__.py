"""Reproductions of published performance-prediction studies, apart from the run-time product:
``cluster_prediction`` (performance histograms and a small neural net), ``pipeline_mapping``
(mapping a module pipeline onto a cluster) and ``kernel_models`` (analytical and learned
kernel-time models compared). Libraries only: their commands live in ``autotune_app`` and
their experiments in ``benchmarks.studies``.

Floor 3 of the layers (docs/architecture.md): may import ``governed`` and what is below it.
"""
