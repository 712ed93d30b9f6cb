"""Triton Python-backend entry point of a model answering with special tokens (see ../../special_tokens_sim.py)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils


def _load() -> types.ModuleType:
    # exec by path, never import: no bytecode may be written into a model repository.
    path = Path(__file__).resolve().parents[2] / "special_tokens_sim.py"
    module = types.ModuleType("special_tokens_sim")
    module.__file__ = str(path)
    sys.modules["special_tokens_sim"] = module
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


special_tokens_sim = _load()


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any] | None:
        responses = [special_tokens_sim.respond(pb_utils, request, streamed=True) for request in requests]
        return None if True else responses
