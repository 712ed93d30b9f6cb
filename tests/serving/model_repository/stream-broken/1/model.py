"""Test model: the vLLM backend's contract, answering with a defect the prompt picks:

- "dtype":  `text_output` as INT32 instead of BYTES
- "utf8":   `text_output` bytes that are not UTF-8
- "shape":  `text_output` with two elements
- "tokens": `num_output_tokens` with two elements
- "finish": an unknown `finish_reason` on the last response
- "error":  one chunk, then a Triton error
- "hang":   one chunk, then nothing until the request is cancelled (30 s at most)
- "silent": nothing at all until the request is cancelled (30 s at most)
- anything else: "fine" in two chunks, as the vLLM backend would send it
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _response(text: Any = b"fine", finish: bytes = b"None", tokens: Any = 1, text_dtype: Any = np.object_) -> Any:
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("text_output", np.array(text if isinstance(text, list) else [text], dtype=text_dtype)),
            pb_utils.Tensor("finish_reason", np.array([finish], dtype=np.object_)),
            pb_utils.Tensor("num_output_tokens", np.array(tokens if isinstance(tokens, list) else [tokens], np.uint32)),
        ]
    )


def _wait_for_cancel(sender: Any) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and not sender.is_cancelled():
        time.sleep(0.02)
    sender.send(flags=FINAL)


def _serve(prompt: bytes, sender: Any) -> None:
    if prompt == b"dtype":
        sender.send(_response(text=7, text_dtype=np.int32, finish=b"stop"), flags=FINAL)
    elif prompt == b"utf8":
        sender.send(_response(text=b"caf\xe9 \xff\xfe", finish=b"stop"), flags=FINAL)
    elif prompt == b"shape":
        sender.send(_response(text=[b"one", b"two"], finish=b"stop"), flags=FINAL)
    elif prompt == b"tokens":
        sender.send(_response(tokens=[1, 2], finish=b"stop"), flags=FINAL)
    elif prompt == b"finish":
        sender.send(_response())
        sender.send(_response(text=b" more", finish=b"exploded"), flags=FINAL)
    elif prompt == b"error":
        sender.send(_response())
        error = pb_utils.TritonError("stream-broken fails mid-stream on purpose")
        sender.send(pb_utils.InferenceResponse(output_tensors=[], error=error), flags=FINAL)
    elif prompt == b"hang":
        sender.send(_response())
        _wait_for_cancel(sender)
    elif prompt == b"silent":
        _wait_for_cancel(sender)
    else:
        sender.send(_response())
        sender.send(_response(text=b" print", finish=b"stop"), flags=FINAL)


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            threading.Thread(target=_serve, args=(prompt, request.get_response_sender()), daemon=True).start()
        return None
