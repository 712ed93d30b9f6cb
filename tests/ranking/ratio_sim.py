"""The simulated ratio judge of the test model repository (ratio-sim), usable without Triton.

``judge(prompt)`` is the very function the Triton model runs, loaded from its file, so the fast tests
(a patched ``generate``) and the end-to-end tests (real Triton) judge alike. ``entity_text`` writes
an entity carrying its hidden true log-strength; ``attribute_with`` the judge's settings."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serving.triton.client import EndpointSpec, GenerationResult, Prompt, SamplingParams

MODEL_FILE = Path(__file__).parent.parent / "serving" / "model_repository" / "ratio-sim" / "1" / "model.py"
_spec = importlib.util.spec_from_file_location("ratio_sim_model", MODEL_FILE)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
judge: Callable[[str], str] = _module.judge


def entity_text(truth: float, body: str = "") -> str:
    return f"{body or 'An item'} [[true={truth:.6f}]]"


def attribute_with(attribute: str, **settings: float) -> str:
    if not settings:
        return attribute
    return f"{attribute} [[sim {' '.join(f'{k}={v:g}' for k, v in settings.items())}]]"


def fake_generate(calls: list[str] | None = None, *, fail: str = "") -> Callable[..., GenerationResult]:
    """A stand-in for ``serving.triton.client.generate`` that answers with the simulated judge (or fails
    every call with the error kind ``fail``); records the prompts in ``calls``."""

    def generate(endpoint: EndpointSpec, prompt: Prompt, params: SamplingParams, *_: Any) -> GenerationResult:
        assert isinstance(prompt, str)
        assert params.temperature == 0.0
        if calls is not None:
            calls.append(prompt)
        if fail:
            return GenerationResult("", 0, "error", 0.01, f"{endpoint.model_name}: {fail}", fail)
        text = judge(prompt)
        return GenerationResult(text, len(text.split()), "stop", 0.002)

    return generate
