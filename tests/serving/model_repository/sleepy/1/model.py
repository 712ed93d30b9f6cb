"""Test model: sleeps `sleep_s` (config parameter) before answering, to exercise client timeouts.

It would stop early if Triton reported the request cancelled, but Triton 2.51 does not cancel
non-decoupled Python-backend requests when a client gives up, so a timed-out request keeps the
instance busy; the server's `--exit-timeout-secs` bounds how long shutdown waits for it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.sleep_s = float(config["parameters"]["sleep_s"]["string_value"])

    def execute(self, requests: list[Any]) -> list[Any]:
        deadline = time.monotonic() + self.sleep_s
        while time.monotonic() < deadline:
            if all(getattr(r, "is_cancelled", lambda: False)() for r in requests):
                break
            time.sleep(0.05)
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("text_output", np.array([b"finally awake"], dtype=np.object_)),
                    pb_utils.Tensor("output_tokens", np.array([2], dtype=np.int32)),
                    pb_utils.Tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
                ]
            )
            for _ in requests
        ]
