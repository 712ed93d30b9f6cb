"""Test model: answers with malformed output. The prompt picks the defect:

- "missing": no `text_output` at all
- "shape":   `text_output` with two elements instead of one
- "tokens":  `output_tokens` that is not a single integer
- "finish":  an unknown `finish_reason`
- "bare":    only `text_output` (legal: the client must fall back to counting words itself)
- anything else: `text_output` bytes that are not UTF-8
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _tensor(name: str, values: list[Any], dtype: Any) -> Any:
    return pb_utils.Tensor(name, np.array(values, dtype=dtype))


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            text = _tensor("text_output", [b"fine"], np.object_)
            tokens = _tensor("output_tokens", [1], np.int32)
            finish = _tensor("finish_reason", [b"stop"], np.object_)
            if prompt == b"missing":
                outputs = [tokens, finish]
            elif prompt == b"shape":
                outputs = [_tensor("text_output", [b"one", b"two"], np.object_), tokens, finish]
            elif prompt == b"tokens":
                outputs = [text, _tensor("output_tokens", [1, 2, 3], np.int32), finish]
            elif prompt == b"bare":
                outputs = [_tensor("text_output", [b"just four plain words"], np.object_)]
            elif prompt == b"finish":
                outputs = [text, tokens, _tensor("finish_reason", [b"exploded"], np.object_)]
            else:
                outputs = [_tensor("text_output", [b"caf\xe9 \xff\xfe"], np.object_), tokens, finish]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
