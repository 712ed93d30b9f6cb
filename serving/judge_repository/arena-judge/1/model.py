"""Triton Python-backend entry point of the demo's judge (../../arena_judge.py): right by its rule (the
answer with more words wins), no position bias, strict JSON; the `parameters` of its config.pbtxt."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils


def _load() -> types.ModuleType:
    path = Path(__file__).resolve().parents[2] / "arena_judge.py"
    module = types.ModuleType("arena_judge")
    module.__file__ = str(path)
    sys.modules["arena_judge"] = module
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


arena_judge = _load()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.name = args["model_name"]
        self.settings = arena_judge.Settings(
            accuracy=float(params.get("accuracy", "1.0")),
            position_bias=float(params.get("position_bias", "0.0")),
            malformed_rate=float(params.get("malformed_rate", "0.0")),
            special_tokens=params.get("special_tokens", "0") == "1",
        )

    def execute(self, requests: list[Any]) -> list[Any]:
        return [arena_judge.respond(pb_utils, self.name, self.settings, request) for request in requests]
