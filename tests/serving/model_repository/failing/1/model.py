"""Test model: every request fails. Prompt "raise" raises inside execute (the Python backend turns
that into an error for the whole batch); anything else returns a TritonError response."""

from __future__ import annotations

from typing import Any

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        prompts = [pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy().reshape(-1)[0] for r in requests]
        if b"raise" in prompts:
            raise RuntimeError("failing model raised on purpose")
        return [
            pb_utils.InferenceResponse(
                output_tensors=[], error=pb_utils.TritonError("failing model refuses on purpose")
            )
            for _ in requests
        ]
