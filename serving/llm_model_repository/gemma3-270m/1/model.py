"""Triton Python-backend entry point for the real small LLMs (llama.cpp, vLLM-backend contract).

Every model of this repository uses this same file; which weights it loads, its context window and
its threads come from the `parameters` of its `config.pbtxt`. The engine lives in `arena_llm.py` at
the top of the model repository, loaded by path because the repository is not a Python package.
"""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils


def _load_arena_llm() -> types.ModuleType:
    # exec the source instead of importing it: an import would write __pycache__/ at the top of
    # the model repository, and Triton would take that folder for a model on its next start.
    path = Path(__file__).resolve().parents[2] / "arena_llm.py"
    module = types.ModuleType("arena_llm")
    module.__file__ = str(path)
    sys.modules["arena_llm"] = module  # dataclasses look their module up while being defined
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


arena_llm = _load_arena_llm()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("this model streams: its config must set decoupled: true")
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.logger = pb_utils.Logger
        started = time.monotonic()
        try:
            self.llm = arena_llm.load_model(
                params["weights"], n_ctx=int(params["n_ctx"]), n_threads=int(params["n_threads"])
            )
        except arena_llm.WeightsMissing as exc:
            raise pb_utils.TritonModelException(str(exc)) from exc
        self.logger.log_info(f"{args['model_name']}: loaded in {time.monotonic() - started:.2f} s")

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            stats = arena_llm.serve(pb_utils, self.llm, request, self.logger)
            self.logger.log_verbose(f"generation: {stats}")
        return None

    def finalize(self) -> None:
        self.llm = None
