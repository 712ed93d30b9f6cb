"""Triton Python-backend entry point for the shipped n-gram contestants.

Every shipped contestant uses this same file; what it is (corpus, n-gram order, answer style) comes
from the `parameters` of its `config.pbtxt`. The generator lives in `arena_ngram.py` at the top of
the model repository, loaded by path because the repository is not a Python package.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils


def _load_arena_ngram() -> types.ModuleType:
    # exec the source instead of importing it: an import would write __pycache__/ at the top of
    # the model repository, and Triton would take that folder for a model on its next start.
    path = Path(__file__).resolve().parents[2] / "arena_ngram.py"
    module = types.ModuleType("arena_ngram")
    module.__file__ = str(path)
    sys.modules["arena_ngram"] = module  # dataclasses look their module up while being defined
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


arena_ngram = _load_arena_ngram()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.contestant = arena_ngram.build_contestant(
            name=args["model_name"],
            corpus=params["corpus"],
            order=int(params["order"]),
            style=params["style"],
        )

    def execute(self, requests: list[Any]) -> list[Any]:
        return [arena_ngram.respond(pb_utils, self.contestant, request) for request in requests]
