"""Test-only variant of the shipped vLLM stand-in: the same model.py, other delays (its config.pbtxt)."""

from __future__ import annotations

import types
from pathlib import Path

_SHIPPED = Path(__file__).resolve().parents[5] / "serving" / "standin_repository" / "vllm-standin" / "1" / "model.py"
_module = types.ModuleType("vllm_standin_model")
_module.__file__ = str(_SHIPPED)  # it finds arena_standin.py next to its own repository
exec(compile(_SHIPPED.read_text(encoding="utf-8"), str(_SHIPPED), "exec"), _module.__dict__)

TritonPythonModel = _module.TritonPythonModel
