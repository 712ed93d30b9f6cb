"""Test model: waits `delay_ms` (config parameter), then answers with the parameters it received.

The answer is JSON of every input the request carried, so a test can check that both sides of a
battle got the identical parameter set, plus `_received_at` (the server's wall clock when execute
began), so a test can check that both sides were called at the same moment, and `_runtime` (the
interpreter's prefix and numpy version), so a test can check which environment runs the models.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

INPUTS = ("text_input", "system_prompt", "max_tokens", "temperature", "top_p", "seed")


def _value(request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    value = tensor.as_numpy().reshape(-1)[0]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value.item()


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.delay_s = float(config["parameters"]["delay_ms"]["string_value"]) / 1000.0

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            started = time.perf_counter()
            received: dict[str, Any] = {name: _value(request, name) for name in INPUTS}
            received["_received_at"] = time.time()
            received["_runtime"] = {"prefix": sys.prefix, "numpy": np.__version__}
            text = json.dumps(received, sort_keys=True, ensure_ascii=False)
            time.sleep(max(0.0, self.delay_s - (time.perf_counter() - started)))
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
                        pb_utils.Tensor("output_tokens", np.array([len(text.split())], dtype=np.int32)),
                        pb_utils.Tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
                    ]
                )
            )
        return responses
