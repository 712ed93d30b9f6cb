"""Triton Python-backend entry point of the simulated judges (serving/judge_repository/arena_judge.py, the
demo's judge); what a judge is (accuracy, position bias, malformed-reply rate) comes from the `parameters` of
its config.pbtxt."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils


def _load() -> types.ModuleType:
    path = Path(__file__).resolve().parents[5] / "serving" / "judge_repository" / "arena_judge.py"
    module = types.ModuleType("judge_sim")
    module.__file__ = str(path)
    sys.modules["judge_sim"] = module
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


judge_sim = _load()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.name = args["model_name"]
        self.settings = judge_sim.Settings(
            accuracy=float(params.get("accuracy", "1.0")),
            position_bias=float(params.get("position_bias", "0.0")),
            malformed_rate=float(params.get("malformed_rate", "0.0")),
            special_tokens=params.get("special_tokens", "0") == "1",
        )

    def execute(self, requests: list[Any]) -> list[Any]:
        return [judge_sim.respond(pb_utils, self.name, self.settings, request) for request in requests]
