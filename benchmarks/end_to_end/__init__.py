"""End-to-end accumulation benchmark: what accumulation costs inside a real training step.

``cases`` (the models, their data, loss and PyTorch form), ``settings``, ``windows`` (what
each timed call runs), ``torch_twin``, ``trace`` (seconds in the accumulation kernels),
``memory`` (peak activation memory), ``figures``, ``measure``, ``targets``, ``report``, ``main``.
"""

from benchmarks.end_to_end.cases import CHARS, DIGITS, WIDE, ModelCase, ModelSpec, TransformerCase
from benchmarks.end_to_end.main import END_TO_END, main
from benchmarks.end_to_end.settings import Settings, full_settings, quick_settings

__all__ = ["CHARS", "DIGITS", "END_TO_END", "WIDE", "ModelCase", "ModelSpec", "Settings", "TransformerCase",
           "full_settings", "main", "quick_settings"]
