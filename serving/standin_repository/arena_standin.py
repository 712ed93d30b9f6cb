"""CPU stand-ins for the two GPU backends' contracts: Triton's vLLM backend and the TensorRT-LLM ensemble.

Why these exist: the client speaks each backend's wire contract (tensor names, dtypes, shapes, the
decoupled streaming protocol); a test against the real thing needs a GPU. These Python-backend models
implement exactly those names and semantics on the CPU, so the contract code is tested end to end
against a real Triton, and pointing an endpoint at a GPU Triton works the first time. What each
follows, and from where:

* `vllm`: triton-inference-server/vllm_backend, `src/model.py` (`auto_complete_config`: the inputs,
  outputs and dtypes; decoupled) and `src/utils/request.py` (`GenerateRequest`: `stream` defaults to
  false; `exclude_input_in_output` absent means the prompt is prepended to a non-streamed answer, and
  false with `stream` is an error; `sampling_parameters` is JSON of vLLM SamplingParams fields,
  values cast to the field's type, so "0.5" works as well as 0.5; `create_response`: streamed
  `text_output` is the delta since the previous response, `finish_reason` is `str(None)` until the
  sequence ends, `num_output_tokens` UINT32 counts this response's tokens). vLLM's own default for
  `max_tokens` is 16.
* `trtllm`: NVIDIA/TensorRT-LLM, `triton_backend/all_models/inflight_batcher_llm/ensemble/config.pbtxt`
  (inputs and outputs, `max_batch_size` > 0 so every tensor has a batch dimension; `max_tokens` is
  required). Streamed responses carry the new tokens only; streaming never includes the input.

The text is an n-gram contestant's answer (`arena_ngram.py` of the shipped repository, so no signature
phrase), sent one whitespace word at a time ("tokens", each with the whitespace before it, so the
deltas joined are the answer), with `first_token_delay_ms` before the first and `token_delay_ms`
before each further one (config parameters), and a stop as soon as Triton reports the request
cancelled (a client that timed out). Requests are served on threads, as decoupled models may: a
request does not wait for another one to finish.

Triton treats only folders as models; this file and `arena_ngram.py` are loaded by path.
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_NGRAM = Path(__file__).resolve().parents[1] / "model_repository" / "arena_ngram.py"
_PIECE = re.compile(r"\s*\S+|\s+$")


def _load_arena_ngram() -> types.ModuleType:
    # exec, not import: an import would write __pycache__/ into a model repository.
    module = types.ModuleType("arena_ngram")
    module.__file__ = str(_NGRAM)
    sys.modules["arena_ngram"] = module  # dataclasses look their module up while being defined
    exec(compile(_NGRAM.read_text(encoding="utf-8"), str(_NGRAM), "exec"), module.__dict__)
    return module


arena_ngram = _load_arena_ngram()


class RequestError(ValueError):
    """The request breaks the backend's contract; answered with a Triton error."""


@dataclass(frozen=True)
class Job:
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stream: bool
    prepend_input: bool
    flags: dict[str, bool]


def pieces(text: str) -> list[str]:
    """The answer as "tokens": each word with the whitespace before it; joined, they are the text."""
    return _PIECE.findall(text)


def _value(pb_utils: Any, request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    array = tensor.as_numpy().reshape(-1)
    if array.size != 1:
        raise RequestError(f"input '{name}' must hold one element, got {array.size}")
    return array[0]


def _str(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _finite(value: Any, default: float, name: str) -> float:
    number = default if value is None else float(value)
    if not math.isfinite(number):
        raise RequestError(f"{name} must be finite")
    return number


def parse_vllm(pb_utils: Any, request: Any) -> Job:
    """A request of the vLLM backend's contract (vllm_backend src/utils/request.py, _get_input_tensors)."""
    prompt = _str(_value(pb_utils, request, "text_input"))
    stream = bool(_value(pb_utils, request, "stream") or False)
    exclude = _value(pb_utils, request, "exclude_input_in_output")
    prepend = (not bool(exclude)) if exclude is not None else (not stream)
    if prepend and stream:
        raise RequestError("When streaming, `exclude_input_in_output` = False is not allowed.")
    raw = _value(pb_utils, request, "sampling_parameters")
    try:
        sampling = json.loads(_str(raw)) if raw is not None else {}
    except ValueError as exc:
        raise RequestError(f"sampling_parameters is not JSON: {exc}") from None
    if not isinstance(sampling, dict):
        raise RequestError("sampling_parameters must be a JSON object")
    sampling = {key: value for key, value in sampling.items() if value is not None}
    unknown = sorted(set(sampling) - {"temperature", "top_p", "max_tokens", "seed"})
    if unknown:
        raise RequestError(f"this stand-in does not implement sampling parameters {unknown}")
    flags = {
        name: bool(_value(pb_utils, request, name) or False)
        for name in ("return_finish_reason", "return_num_input_tokens", "return_num_output_tokens")
    }
    return Job(
        prompt=prompt,
        max_tokens=int(sampling.get("max_tokens", 16)),
        temperature=_finite(sampling.get("temperature"), 1.0, "temperature"),
        top_p=_finite(sampling.get("top_p"), 1.0, "top_p"),
        seed=int(sampling.get("seed", 0)),
        stream=stream,
        prepend_input=prepend,
        flags=flags,
    )


def parse_trtllm(pb_utils: Any, request: Any) -> Job:
    """A request of the TensorRT-LLM ensemble's contract ([1, 1] tensors: batch of one)."""
    stream = bool(_value(pb_utils, request, "stream") or False)
    exclude = _value(pb_utils, request, "exclude_input_in_output")
    seed = _value(pb_utils, request, "seed")
    return Job(
        prompt=_str(_value(pb_utils, request, "text_input")),
        max_tokens=int(_value(pb_utils, request, "max_tokens")),
        temperature=_finite(_value(pb_utils, request, "temperature"), 1.0, "temperature"),
        top_p=_finite(_value(pb_utils, request, "top_p"), 1.0, "top_p"),
        seed=0 if seed is None else int(seed),
        stream=stream,
        prepend_input=not stream and not bool(exclude),
        flags={
            name: bool(_value(pb_utils, request, name) or False)
            for name in ("return_num_input_tokens", "return_num_output_tokens")
        },
    )


class StandinModel:
    """The Python-backend model (`TritonPythonModel` of each stand-in's model.py): `contract` is
    "vllm" or "trtllm"; the contestant and the delays come from the config's parameters."""

    contract = "vllm"

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        self.pb_utils = pb_utils
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.contract = params.get("contract", self.contract)
        self.contestant = arena_ngram.build_contestant(
            name=args["model_name"], corpus=params["corpus"], order=int(params["order"]), style=params["style"]
        )
        self.token_delay_s = float(params.get("token_delay_ms", "0")) / 1000.0
        self.first_token_delay_s = float(params.get("first_token_delay_ms", params.get("token_delay_ms", "0"))) / 1000.0
        self.threads: list[threading.Thread] = []

    def execute(self, requests: list[Any]) -> None:
        pb_utils = self.pb_utils
        for request in requests:
            sender = request.get_response_sender()
            try:  # inputs are read here, while the request is alive; the answer is sent from a thread
                job = (parse_vllm if self.contract == "vllm" else parse_trtllm)(pb_utils, request)
            except (RequestError, TypeError, ValueError) as exc:
                error = pb_utils.InferenceResponse(error=pb_utils.TritonError(f"Error generating stream: {exc}"))
                sender.send(error, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            thread = threading.Thread(target=self._serve, args=(job, sender), daemon=True)
            thread.start()
            self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        return None

    def finalize(self) -> None:
        for thread in self.threads:
            thread.join(timeout=5.0)

    # -- answering ----------------------------------------------------------------------------------

    def _tensor(self, name: str, value: Any, dtype: Any) -> Any:
        array = np.array([value], dtype=dtype)
        if self.contract == "trtllm":
            array = array.reshape(1, 1)  # the batch dimension
        return self.pb_utils.Tensor(name, array)

    def _response(self, job: Job, text: str, tokens: int, finish: str | None) -> Any:
        token_dtype = np.uint32 if self.contract == "vllm" else np.int32
        outputs = [self._tensor("text_output", text.encode("utf-8"), np.object_)]
        if job.flags.get("return_finish_reason"):
            outputs.append(self._tensor("finish_reason", str(finish).encode(), np.object_))
        if job.flags.get("return_num_input_tokens"):
            outputs.append(self._tensor("num_input_tokens", len(job.prompt.split()), token_dtype))
        if job.flags.get("return_num_output_tokens"):
            outputs.append(self._tensor("num_output_tokens", tokens, token_dtype))
        return self.pb_utils.InferenceResponse(output_tensors=outputs)

    def _cancelled(self, sender: Any) -> bool:
        check = getattr(sender, "is_cancelled", None)
        return bool(check()) if callable(check) else False

    def _serve(self, job: Job, sender: Any) -> None:
        pb_utils = self.pb_utils
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            answer = self.contestant.answer(
                arena_ngram.Request(
                    prompt=job.prompt,
                    max_tokens=job.max_tokens,
                    temperature=job.temperature,
                    top_p=job.top_p,
                    seed=job.seed,
                )
            )
        except ValueError as exc:
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))), flags=final)
            return
        words = pieces(answer.text) or [""]
        if not job.stream:
            if not self._sleep(sender, self.first_token_delay_s + self.token_delay_s * (len(words) - 1)):
                sender.send(flags=final)
                return
            text = (job.prompt if job.prepend_input else "") + answer.text
            sender.send(self._response(job, text, answer.output_tokens, answer.finish_reason), flags=final)
            return
        for index, word in enumerate(words):
            if not self._sleep(sender, self.first_token_delay_s if index == 0 else self.token_delay_s):
                sender.send(flags=final)  # cancelled: end the stream, as the backends do
                return
            last = index == len(words) - 1
            response = self._response(job, word, 1 if word.strip() else 0, answer.finish_reason if last else None)
            if self.contract == "vllm":
                # vLLM's last response is flagged final itself.
                sender.send(response, flags=final if last else 0)
            else:
                sender.send(response)
        if self.contract == "trtllm":
            sender.send(flags=final)  # the ensemble ends its stream with an empty final response

    def _sleep(self, sender: Any, seconds: float) -> bool:
        """Wait `seconds`, in short steps; False as soon as the request is cancelled."""
        deadline = time.monotonic() + seconds
        while True:
            if self._cancelled(sender):
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.02))
