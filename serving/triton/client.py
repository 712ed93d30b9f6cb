"""Call Triton text-generation models, one at a time, as a battle pair, or streamed side by side.

Why this shape: a battle is only fair if both models get the same request at the same moment and
neither answer is shown before the other exists. `generate_pair` therefore sends one identical
parameter set to both sides from two threads released together by a barrier, and returns only
when both have answered (the parity buffer); `stream_pair` does the same over two gRPC streams and
hands every chunk to the caller as it arrives, stamped on one clock for both sides. Failures are
data, not exceptions: a side that is down, slow, broken or refusing yields a `GenerationResult` with
a human-readable `error`, so the caller can void the battle with a clear message instead of handling
a zoo of client exceptions. Special tokens (`<start_of_image>`, `<|im_end|>`...) are stripped from every
answer, a streamed one chunk by chunk (`special_tokens.py`): they would name the model family.

An endpoint names its wire contract (`EndpointSpec.contract`):

- `arena`, the project's own: `text_input` BYTES [1] and optional `system_prompt`, `max_tokens`
  (INT32), `temperature`, `top_p` (FP32), `seed` (UINT64); outputs `text_output` BYTES [1] and, where
  the model provides them, `output_tokens` and `finish_reason`. A plain `infer` (gRPC or HTTP).
- `vllm`, Triton's vLLM backend (triton-inference-server/vllm_backend, `src/model.py` and
  `src/utils/request.py`, r24.12 or later; `docs/additional_outputs.md`): `text_input` BYTES [1],
  `stream` BOOL [1], `sampling_parameters` BYTES [1] holding JSON (`temperature`, `top_p`,
  `max_tokens`, `seed`), `exclude_input_in_output` BOOL [1] (sent true: without it a non-streamed
  answer starts with the prompt), `return_finish_reason` and `return_num_output_tokens` BOOL [1];
  outputs `text_output` BYTES, `finish_reason` BYTES ("None" until the last response) and
  `num_output_tokens` UINT32, both per response. The model is decoupled, so every call goes over the
  gRPC stream, with `stream` false for one final answer. Streamed `text_output` is the *delta* since
  the previous response (`output.text[prev_len:]`). Releases before r24.12 lack the `return_*`
  inputs, and earlier ones streamed the text so far instead of the delta: not supported.
- `trtllm`, the TensorRT-LLM `ensemble` (NVIDIA/TensorRT-LLM,
  `triton_backend/all_models/inflight_batcher_llm/ensemble/config.pbtxt`, the former
  triton-inference-server/tensorrtllm_backend): `text_input` BYTES, `max_tokens` INT32,
  `temperature` and `top_p` FP32, `seed` UINT64, `stream`, `exclude_input_in_output` and
  `return_num_output_tokens` BOOL, each [1] with the ensemble's batch dimension in front (shape
  [1, 1], as Triton's OpenAI frontend sends them: triton-inference-server/server,
  `python/openai/openai_frontend/engine/utils/triton.py`); outputs `text_output` BYTES and
  `num_output_tokens` INT32 (per response, as that frontend sums them). No finish reason: "length"
  when the token count reached `max_tokens`. Older ensembles (`random_seed`, UINT32 `max_tokens`) are
  not supported. Over the gRPC stream too, since a streaming deployment is decoupled. Streamed text is
  what the ensemble's postprocessing decodes per response (tensorrtllm_backend issue #332: word-initial
  spaces are lost with SentencePiece tokenizers); the client joins it as it comes.

Both GPU contracts take raw text: a system prompt or a multi-turn conversation is rendered with the
endpoint's `prompt_format` (`templates.py`). Every streamed call asks for an empty final response
(`enable_empty_final_response`), so the end of a stream is known from Triton's
`triton_final_response` flag whether or not the last response carries text.

Only pure `tritonclient` here, no Django: the platform's `ModelEndpoint` rows are turned into
`EndpointSpec`s by the caller.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .special_tokens import SpecialTokenFilter, strip_special_tokens
from .templates import Message, PromptFormat, TemplateError, conversation, render

__all__ = [
    "CONTRACTS",
    "Contract",
    "EndpointSpec",
    "GenerationResult",
    "Prompt",
    "SamplingParams",
    "StreamEvent",
    "generate",
    "generate_pair",
    "model_readiness",
    "models_readiness",
    "stream_pair",
]

Protocol = Literal["grpc", "http"]
Contract = Literal["arena", "vllm", "trtllm"]
CONTRACTS: tuple[Contract, ...] = ("arena", "vllm", "trtllm")
FINISH_REASONS = ("stop", "length")
# A prompt string, or a conversation (a list of {"role", "content"}) for multi-turn battles.
Prompt = str | Sequence[Message]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EndpointSpec:
    """Where a model is served: `url` is `host:port` (no scheme), as tritonclient expects."""

    url: str
    protocol: Protocol
    model_name: str
    model_version: str = ""
    timeout_s: float = 30.0
    # Called with `url` right before each connection; raises (with a message fit for managers) if the
    # address may not be called, else returns the approved `address:port` to connect to (None: connect to
    # `url` by name). The platform passes its outbound-address rule (core/outbound.py), so an address that
    # was allowed when entered but resolves elsewhere now is refused at call time, and the call goes to the
    # address that was checked, with `url`'s host kept as the HTTP Host / gRPC authority (`_client`).
    guard: Callable[[str], str | None] | None = field(default=None, compare=False, repr=False)
    # The wire contract (see the module docstring) and how a conversation becomes `text_input`.
    contract: Contract = "arena"
    prompt_format: PromptFormat = "raw"

    @property
    def where(self) -> str:
        return f"{self.model_name} at {self.protocol}://{self.url}"


@dataclass(frozen=True)
class SamplingParams:
    """The one parameter set both sides of a battle receive."""

    temperature: float
    top_p: float
    max_tokens: int
    system_prompt: str = ""
    seed: int = 0


@dataclass(frozen=True)
class GenerationResult:
    text: str
    output_tokens: int
    finish_reason: str  # "stop", "length", or "error"
    latency_s: float
    error: str = ""
    # A fixed, model-free class of the failure ("timeout", "unreachable", "not_served", "malformed",
    # "error"), for messages that may reach a rater: `error` names the model and its server.
    error_kind: str = ""
    # Seconds from the request leaving to the first chunk of text of a streamed answer; None where it was
    # not measured (an answer asked for in one piece, a failure): its latency is no time to first token.
    ttft_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.error == ""

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second over the whole call (first token included); 0.0 without a duration."""
        return self.output_tokens / self.latency_s if self.latency_s > 0 else 0.0


@dataclass(frozen=True)
class StreamEvent:
    """One step of a streamed pair, handed to `stream_pair`'s `on_event`."""

    side: int  # 0 = left, 1 = right
    delta: str  # newly generated text ("" allowed on the final event)
    t: float  # seconds since both requests left (one `time.perf_counter` clock for both sides)
    done: bool  # last event of this side
    result: GenerationResult | None = None  # on done: the full result (text, tokens, latency, ttft, error...)


class _MalformedOutput(Exception):
    pass


def _tensor(module: Any, name: str, value: np.ndarray, datatype: str) -> Any:
    infer_input = module.InferInput(name, list(value.shape), datatype)
    infer_input.set_data_from_numpy(value)
    return infer_input


def _text(value: str, batch: bool = False) -> np.ndarray:
    encoded = value.encode("utf-8", errors="surrogatepass")
    return np.array([[encoded]] if batch else [encoded], dtype=np.object_)


def _text_input(endpoint: EndpointSpec, prompt: Prompt, params: SamplingParams) -> tuple[str, str]:
    """(text_input, system prompt left to send in its own tensor). Raises TemplateError."""
    if endpoint.prompt_format == "raw":
        messages = conversation(prompt, params.system_prompt)
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if system and endpoint.contract != "arena":
            # The GPU contracts have no system prompt input: dropping it would give the two sides different
            # requests, so a battle that uses one fails on such an endpoint until it names a prompt format.
            raise TemplateError(f"the {endpoint.contract} contract has no system prompt input; set a prompt format")
        return messages[-1]["content"], system
    return render(prompt, endpoint.prompt_format, params.system_prompt), ""


def _arena_inputs(module: Any, text: str, system: str, params: SamplingParams) -> list[Any]:
    inputs = [
        _tensor(module, "text_input", _text(text), "BYTES"),
        _tensor(module, "max_tokens", np.array([params.max_tokens], dtype=np.int32), "INT32"),
        _tensor(module, "temperature", np.array([params.temperature], dtype=np.float32), "FP32"),
        _tensor(module, "top_p", np.array([params.top_p], dtype=np.float32), "FP32"),
        _tensor(module, "seed", np.array([params.seed], dtype=np.uint64), "UINT64"),
    ]
    # Sent only when set, so a model without a system_prompt input still serves battles that do
    # not use one; a battle that does use one fails loudly on such a model instead of silently
    # dropping it from one side.
    if system:
        inputs.append(_tensor(module, "system_prompt", _text(system), "BYTES"))
    return inputs


def _vllm_inputs(module: Any, text: str, params: SamplingParams, stream: bool) -> list[Any]:
    # vllm_backend src/utils/request.py: every input is read as `as_numpy()[0]` of a [1] tensor; the
    # JSON keys are vLLM SamplingParams fields (TritonSamplingParams.from_dict casts them).
    sampling = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "seed": params.seed,
    }

    def flag(value: bool) -> np.ndarray:
        return np.array([value], dtype=bool)

    return [
        _tensor(module, "text_input", _text(text), "BYTES"),
        _tensor(module, "stream", flag(stream), "BOOL"),
        _tensor(module, "sampling_parameters", _text(json.dumps(sampling, sort_keys=True)), "BYTES"),
        _tensor(module, "exclude_input_in_output", flag(True), "BOOL"),
        _tensor(module, "return_finish_reason", flag(True), "BOOL"),
        _tensor(module, "return_num_output_tokens", flag(True), "BOOL"),
    ]


def _trtllm_inputs(module: Any, text: str, params: SamplingParams, stream: bool) -> list[Any]:
    # The ensemble has max_batch_size > 0, so each [1] input carries a batch dimension: shape [1, 1].
    def flag(value: bool) -> np.ndarray:
        return np.array([[value]], dtype=bool)

    return [
        _tensor(module, "text_input", _text(text, batch=True), "BYTES"),
        _tensor(module, "max_tokens", np.array([[params.max_tokens]], dtype=np.int32), "INT32"),
        _tensor(module, "temperature", np.array([[params.temperature]], dtype=np.float32), "FP32"),
        _tensor(module, "top_p", np.array([[params.top_p]], dtype=np.float32), "FP32"),
        _tensor(module, "seed", np.array([[params.seed]], dtype=np.uint64), "UINT64"),
        _tensor(module, "stream", flag(stream), "BOOL"),
        _tensor(module, "exclude_input_in_output", flag(True), "BOOL"),
        _tensor(module, "return_num_output_tokens", flag(True), "BOOL"),
    ]


def _single(result: Any, name: str, required: bool) -> Any:
    array = result.as_numpy(name)
    if array is None:
        if required:
            raise _MalformedOutput(f"model returned no '{name}' output")
        return None
    if array.size != 1:
        raise _MalformedOutput(f"'{name}' has shape {list(array.shape)}, expected a single element")
    return array.reshape(-1)[0]


def _as_text(value: Any, name: str) -> str:
    if isinstance(value, np.bytes_ | bytes):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _MalformedOutput(f"'{name}' is not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    if isinstance(value, str):
        return value
    raise _MalformedOutput(f"'{name}' is {type(value).__name__}, expected bytes")


def _parse(result: Any, params: SamplingParams, latency_s: float) -> GenerationResult:
    # Special tokens name a model family: never part of an answer (special_tokens.py).
    text = strip_special_tokens(_as_text(_single(result, "text_output", required=True), "text_output"))
    raw_tokens = _single(result, "output_tokens", required=False)
    if raw_tokens is None:
        # Models without a token count: count whitespace words, as the shipped models do.
        output_tokens = len(text.split())
    elif isinstance(raw_tokens, np.integer | int) and raw_tokens >= 0:
        output_tokens = int(raw_tokens)
    else:
        raise _MalformedOutput(f"'output_tokens' is {raw_tokens!r}, expected a non-negative integer")
    raw_finish = _single(result, "finish_reason", required=False)
    if raw_finish is None:
        finish_reason = "length" if output_tokens >= params.max_tokens else "stop"
    else:
        finish_reason = _as_text(raw_finish, "finish_reason")
        if finish_reason not in FINISH_REASONS:
            raise _MalformedOutput(f"'finish_reason' is {finish_reason[:40]!r}, expected one of {FINISH_REASONS}")
    return GenerationResult(text, output_tokens, finish_reason, latency_s)


# Longest part of a Triton error message that reaches a manager.
_TRITON_MESSAGE_MAX = 200


def _triton_message(exc: BaseException) -> str | None:
    """The error text a Triton server sent in its protocol's error field, or None where the answer was not
    a Triton error. Never the raw response: tritonclient appends the body of an answer it cannot decode
    to its message (and to debug details), which would turn an endpoint into a partial-read request
    forger against whatever answers at that address."""
    message_of = getattr(exc, "message", None)
    if not callable(message_of) or type(exc).__name__ != "InferenceServerException":
        return None
    message = " ".join(str(message_of() or "").split())
    if not message or "exception occurred in the client while decoding the response" in message:
        return None
    return message[:_TRITON_MESSAGE_MAX]


def _failure(exc: BaseException, endpoint: EndpointSpec, latency_s: float) -> GenerationResult:
    """A failed call as a result: a one-line reason for managers and its kind. The reason is built from
    fixed phrases, the status and Triton's own error message only: whatever else answered at the address
    (its banner, body or first bytes) never appears in it."""
    where = f"{endpoint.model_name} at {endpoint.protocol}://{endpoint.url}"
    lowered = " ".join(str(exc).split()).lower()
    triton = _triton_message(exc)
    status = getattr(exc, "status", None)
    status_text = str(status() or "") if callable(status) else ""
    if isinstance(exc, TimeoutError) or "deadline" in lowered or "timed out" in lowered or "timeout" in lowered:
        kind, error = "timeout", f"{where}: no answer within {endpoint.timeout_s:g} s (timeout)"
    elif (
        isinstance(exc, ConnectionError)
        or "connection refused" in lowered
        or "failed to connect" in lowered
        or "unavailable" in status_text.lower()
    ):
        kind, error = "unreachable", f"{where}: server unreachable"
    elif triton is not None and (
        "unknown model" in triton.lower() or ("not found" in triton.lower() and "model" in triton.lower())
    ):
        kind, error = "not_served", f"{where}: model not served ({triton})"
    elif triton is not None:
        kind, error = "error", f"{where}: Triton error{f' {status_text}' if status_text else ''}: {triton}"
    elif status_text:
        kind, error = "error", f"{where}: not a Triton answer (status {status_text})"
    else:
        kind, error = "error", f"{where}: not a Triton server, or a protocol error ({type(exc).__name__})"
    return GenerationResult("", 0, "error", latency_s, error, kind)


@dataclass(frozen=True)
class _Chunk:
    delta: str
    tokens: int | None  # this response's output tokens, where the model counts them
    finish: str | None  # the model's finish reason, on its last response
    final: bool


def _is_final(result: Any) -> bool:
    parameters = result.get_response().parameters
    return "triton_final_response" in parameters and bool(parameters["triton_final_response"].bool_param)


def _chunk(result: Any, contract: Contract) -> _Chunk:
    """One streamed response of the vllm or trtllm contract."""
    final = _is_final(result)
    if final and not result.get_response().outputs:
        return _Chunk("", None, None, True)  # the empty final response
    delta = _as_text(_single(result, "text_output", required=True), "text_output")
    raw_tokens = _single(result, "num_output_tokens", required=False)
    tokens: int | None = None
    if raw_tokens is not None:
        if not isinstance(raw_tokens, np.integer) or raw_tokens < 0:
            raise _MalformedOutput(f"'num_output_tokens' is {str(raw_tokens)[:20]!r}, expected a non-negative integer")
        tokens = int(raw_tokens)
    finish: str | None = None
    if contract == "vllm":
        raw_finish = _single(result, "finish_reason", required=False)
        if raw_finish is not None:
            value = _as_text(raw_finish, "finish_reason")
            # str(None) while the sequence is unfinished (vllm_backend src/utils/request.py).
            if value != "None":
                if value not in FINISH_REASONS:
                    raise _MalformedOutput(f"'finish_reason' is {value[:40]!r}, expected one of {FINISH_REASONS}")
                finish = value
    return _Chunk(delta, tokens, finish, final)


def _client(module: Any, endpoint: EndpointSpec, target: str | None, timeout_s: float) -> Any:
    """A tritonclient client of `module` (the endpoint's protocol) that connects to `target`, the address
    the guard approved (None: `endpoint.url` by name), never resolving the name again. gRPC keeps the
    endpoint's host:port as the channel's authority; HTTP requests carry it as Host (`_headers`)."""
    if endpoint.protocol == "http":
        return module.InferenceServerClient(
            target or endpoint.url, connection_timeout=timeout_s, network_timeout=timeout_s
        )
    if target is None:
        return module.InferenceServerClient(endpoint.url)
    keep = module.KeepAliveOptions()  # tritonclient's own defaults, which channel_args replaces
    options = [
        ("grpc.max_send_message_length", module.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", module.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.keepalive_time_ms", keep.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keep.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", keep.keepalive_permit_without_calls),
        ("grpc.http2.max_pings_without_data", keep.http2_max_pings_without_data),
        ("grpc.default_authority", endpoint.url),
    ]
    return module.InferenceServerClient(target, channel_args=options)


def _headers(endpoint: EndpointSpec, target: str | None) -> dict[str, Any]:
    """The keyword arguments an HTTP call to a pinned address adds: the endpoint's own Host."""
    return {"headers": {"Host": endpoint.url}} if endpoint.protocol == "http" and target is not None else {}


# How long closing a stream may take before the side gives up on it (the server is not answering).
_CLOSE_TIMEOUT_S = 5.0
Emit = Callable[[str, float], None]


class _Call:
    """One generation: prepared (address checked, client and inputs built) before the timed part starts,
    so that both sides of a pair leave at the same instant."""

    def __init__(self, endpoint: EndpointSpec, prompt: Prompt, params: SamplingParams, stream: bool = False) -> None:
        self.endpoint = endpoint
        self.params = params
        self.stream = stream
        self.client: Any = None
        self.result: GenerationResult | None = None
        # The GPU backends are decoupled models: every call goes over the gRPC stream.
        self.streamed = endpoint.contract != "arena"
        self.final_delta = ""  # the text of a streamed answer's final response
        where = endpoint.where
        self.target: str | None = None  # the approved address:port the client connects to
        if endpoint.guard is not None:
            try:
                self.target = endpoint.guard(endpoint.url)
            except Exception as exc:
                self.result = GenerationResult("", 0, "error", 0.0, f"{where}: address refused: {exc}", "refused")
                return
        if endpoint.contract not in CONTRACTS:
            self.result = GenerationResult("", 0, "error", 0.0, f"{where}: unknown contract", "error")
            return
        # Triton answers a plain HTTP infer on a decoupled model with 501.
        if self.streamed and endpoint.protocol != "grpc":
            self.result = GenerationResult(
                "", 0, "error", 0.0, f"{where}: the {endpoint.contract} contract needs the gRPC protocol", "error"
            )
            return
        try:
            text, system = _text_input(endpoint, prompt, params)
        except TemplateError as exc:
            self.result = GenerationResult("", 0, "error", 0.0, f"{where}: invalid conversation: {exc}", "error")
            return
        try:
            if endpoint.protocol == "grpc":
                import tritonclient.grpc as module
            elif endpoint.protocol == "http":
                import tritonclient.http as module
            else:
                self.result = GenerationResult("", 0, "error", 0.0, f"{where}: unknown protocol", "error")
                return
            if endpoint.contract == "vllm":
                self.inputs = _vllm_inputs(module, text, params, stream)
            elif endpoint.contract == "trtllm":
                self.inputs = _trtllm_inputs(module, text, params, stream)
            else:
                self.inputs = _arena_inputs(module, text, system, params)
            self.client = _client(module, endpoint, self.target, endpoint.timeout_s)
        except Exception as exc:  # a bad URL or protocol is a failed side, not a crash
            self.result = _failure(exc, endpoint, 0.0)

    def run(self, emit: Emit | None = None) -> GenerationResult:
        """The generation. `emit(delta, perf_counter_at_arrival)` is called for every non-empty chunk of a
        streamed answer before its final one; the final chunk's text is in the result only."""
        if self.result is None:
            self.result = self._stream(emit) if self.streamed else self._infer()
        _log(self.endpoint, self.result)
        return self.result

    def _malformed(self, exc: Exception, latency_s: float) -> GenerationResult:
        # Our own reasons name fields and shapes; a decoding failure's text could carry the answer's bytes.
        reason = str(exc) if isinstance(exc, _MalformedOutput) else f"undecodable output ({type(exc).__name__})"
        return GenerationResult(
            "", 0, "error", latency_s, f"{self.endpoint.where}: malformed answer: {reason}", "malformed"
        )

    def _infer(self) -> GenerationResult:
        endpoint = self.endpoint
        kwargs: dict[str, Any] = {"model_version": endpoint.model_version, **_headers(endpoint, self.target)}
        if endpoint.protocol == "grpc":
            kwargs["client_timeout"] = endpoint.timeout_s
        started = time.perf_counter()
        try:
            response = self.client.infer(endpoint.model_name, self.inputs, **kwargs)
            latency_s = time.perf_counter() - started
        except Exception as exc:
            return _failure(exc, endpoint, time.perf_counter() - started)
        try:
            return _parse(response, self.params, latency_s)
        except Exception as exc:  # _MalformedOutput, or tritonclient failing to decode a tensor
            return self._malformed(exc, latency_s)

    def _stream(self, emit: Emit | None) -> GenerationResult:
        endpoint = self.endpoint
        arrivals: queue.Queue[tuple[Any, Any, float]] = queue.Queue()

        def callback(result: Any, error: Any) -> None:  # on tritonclient's stream thread
            arrivals.put((result, error, time.perf_counter()))

        started = time.perf_counter()
        deadline = started + endpoint.timeout_s
        try:
            self.client.start_stream(callback=callback, stream_timeout=endpoint.timeout_s)
            self.client.async_stream_infer(
                endpoint.model_name,
                self.inputs,
                model_version=endpoint.model_version,
                request_id=uuid.uuid4().hex,
                enable_empty_final_response=True,
            )
        except Exception as exc:
            # A stream that failed at once (nothing listening) reports why through the callback; the send
            # then only says the stream is no longer valid.
            try:
                _, reported, _ = arrivals.get(timeout=min(1.0, max(0.0, deadline - time.perf_counter())))
            except queue.Empty:
                reported = None
            return _failure(reported or exc, endpoint, time.perf_counter() - started)
        parts: list[str] = []
        tokens: list[int | None] = []
        finish: str | None = None
        first_at: float | None = None
        # A token split across chunks is held back until it is whole (and removed) or shown not to be one.
        special = SpecialTokenFilter()
        while True:
            try:
                # Our own deadline as well as the stream's: a server that accepts the stream and then says
                # nothing must end as a timeout, never hang the battle.
                result, error, arrived = arrivals.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                return _failure(TimeoutError(), endpoint, time.perf_counter() - started)
            if error is not None:
                return _failure(error, endpoint, arrived - started)
            try:
                chunk = _chunk(result, endpoint.contract)
            except Exception as exc:
                return self._malformed(exc, arrived - started)
            tokens.append(chunk.tokens)
            finish = chunk.finish or finish
            if chunk.delta and first_at is None:
                first_at = arrived  # the model's first text, shown or not
            shown = special.feed(chunk.delta) + (special.flush() if chunk.final else "")
            if shown:
                parts.append(shown)
                if emit is not None and not chunk.final:
                    emit(shown, arrived)
            if chunk.final:
                self.final_delta = shown
                break
        latency_s = arrived - started
        text = "".join(parts)
        if special.removed:
            logger.info("%s: %d special tokens removed from the answer", endpoint.where, special.removed)
        counted = [n for n in tokens if n is not None]
        output_tokens = sum(counted) if counted else len(text.split())
        if finish is None:
            finish = "length" if output_tokens >= self.params.max_tokens else "stop"
        # Only a streamed answer has a first token to time: one asked for in one piece arrives whole.
        ttft_s = (first_at - started) if self.stream and first_at is not None else None
        return GenerationResult(text, output_tokens, finish, latency_s, ttft_s=ttft_s)

    def close(self) -> None:
        if self.client is None:
            return
        client, self.client = self.client, None

        def shut() -> None:
            try:
                if self.streamed:
                    client.stop_stream(cancel_requests=True)  # a timed-out request is cancelled, not awaited
                client.close()
            except Exception:  # closing a broken connection must not turn a result into a crash
                pass

        # Closing waits for tritonclient's stream thread; a server that stopped answering must not hold
        # the battle, so the side waits a bounded time and leaves the rest to a daemon thread.
        closer = threading.Thread(target=shut, name="arena-close", daemon=True)
        closer.start()
        closer.join(timeout=_CLOSE_TIMEOUT_S)


def _log(endpoint: EndpointSpec, result: GenerationResult) -> None:
    if result.ok:
        logger.info(
            "%s: ttft %s, latency %.3f s, %d output tokens, %.1f tokens/s, finish %s",
            endpoint.where,
            "n/a" if result.ttft_s is None else f"{result.ttft_s:.3f} s",
            result.latency_s,
            result.output_tokens,
            result.tokens_per_s,
            result.finish_reason,
        )
    else:
        logger.warning("%s: failed after %.3f s (%s)", endpoint.where, result.latency_s, result.error_kind)


def generate(endpoint: EndpointSpec, prompt: Prompt, params: SamplingParams) -> GenerationResult:
    """One non-streaming generation (a decoupled GPU backend is asked for one final response over the gRPC
    stream). Never raises for server-side problems; see `GenerationResult.error`."""
    call = _Call(endpoint, prompt, params)
    try:
        return call.run()
    finally:
        call.close()


def _settle(
    results: list[GenerationResult | None], left: EndpointSpec, right: EndpointSpec
) -> tuple[GenerationResult, GenerationResult]:
    def settled(result: GenerationResult | None, endpoint: EndpointSpec) -> GenerationResult:
        if result is not None:
            return result
        # The side's thread died on something unexpected.
        message = f"{endpoint.model_name}: generation thread failed unexpectedly"
        return GenerationResult("", 0, "error", 0.0, message, "error")

    return settled(results[0], left), settled(results[1], right)


def generate_pair(
    left: EndpointSpec, right: EndpointSpec, prompt: Prompt, params: SamplingParams
) -> tuple[GenerationResult, GenerationResult]:
    """Both sides at once, with the identical parameter set; returns when both have answered."""
    results: list[GenerationResult | None] = [None, None]
    # Clients are built before the barrier so that both requests leave at the same instant.
    barrier = threading.Barrier(2)

    def side(index: int, endpoint: EndpointSpec) -> None:
        call = _Call(endpoint, prompt, params)
        try:
            barrier.wait(timeout=max(endpoint.timeout_s, 1.0))
        except threading.BrokenBarrierError:
            pass  # the other side never got ready; go anyway rather than hang
        try:
            results[index] = call.run()
        finally:
            call.close()

    threads = [
        threading.Thread(target=side, args=(0, left), name="arena-generate-left", daemon=True),
        threading.Thread(target=side, args=(1, right), name="arena-generate-right", daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _settle(results, left, right)


def stream_pair(
    left: EndpointSpec,
    right: EndpointSpec,
    left_input: Prompt,
    right_input: Prompt,
    params: SamplingParams,
    on_event: Callable[[StreamEvent], None],
) -> tuple[GenerationResult, GenerationResult]:
    """Both sides at once, each over its own gRPC stream, with the identical parameter set; every chunk
    is handed to `on_event` as it arrives, and the call returns when both sides are done.

    Each input is a prompt or a conversation, rendered with its endpoint's `prompt_format` (a multi-turn
    battle gives each side its own history). A model of the `arena` contract answers in one piece: its
    side gets a single event. Each side ends with exactly one event with `done` true carrying its
    `GenerationResult`; the deltas of a side's events joined are its `result.text` (on a failure the
    result's text is empty, whatever was streamed before: the side failed). `t` is seconds since both
    requests left, on one clock, so the caller can pace the two panes without favouring the faster model.

    Thread-safety: `on_event` is called from the two side threads, concurrently; it must be thread-safe
    (put the event on a queue, take a lock) and quick, since a slow callback delays its side's reading.
    An exception it raises is logged and does not stop the side.
    """
    results: list[GenerationResult | None] = [None, None]
    origin: list[float] = []
    barrier = threading.Barrier(2, action=lambda: origin.append(time.perf_counter()))

    def side(index: int, endpoint: EndpointSpec, prompt: Prompt) -> None:
        def deliver(event: StreamEvent) -> None:
            try:
                on_event(event)
            except Exception:
                logger.exception("stream_pair: on_event failed for side %d", index)

        def since(at: float) -> float:
            return at - (origin[0] if origin else at)

        call: _Call | None = None
        result: GenerationResult | None = None
        try:
            call = _Call(endpoint, prompt, params, stream=True)
            try:
                barrier.wait(timeout=max(endpoint.timeout_s, 1.0))
            except threading.BrokenBarrierError:
                pass  # the other side never got ready; go anyway rather than hang
            if not origin:
                origin.append(time.perf_counter())
            result = call.run(lambda delta, at: deliver(StreamEvent(index, delta, since(at), False, None)))
        except Exception:  # a bug here must still end the side with its done event
            logger.exception("stream_pair: side %d failed unexpectedly", index)
        results[index] = result
        settled = _settle(results, left, right)[index]
        # Delivered before the stream is closed: closing may wait on the server, the rater should not.
        final = (call.final_delta if call.streamed else settled.text) if call is not None and settled.ok else ""
        deliver(StreamEvent(index, final, since(time.perf_counter()), True, settled))
        if call is not None:
            call.close()

    threads = [
        threading.Thread(target=side, args=(0, left, left_input), name="arena-stream-left", daemon=True),
        threading.Thread(target=side, args=(1, right, right_input), name="arena-stream-right", daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _settle(results, left, right)


# A readiness check runs inside a manager's request: it must answer quickly even when the endpoint's
# own (generation) timeout is a minute.
READINESS_TIMEOUT_S = 5.0
_READINESS_PHRASES = {
    "timeout": "no answer within {timeout:g} s",
    "unreachable": "server unreachable",
    "not_served": "model not served",
    "error": "no readiness answer (is this a Triton server?)",
}


def model_readiness(endpoint: EndpointSpec) -> str:
    """Ask the endpoint's server whether its model (at its version) is ready to serve: "" when it is,
    else one line saying why not (unreachable, not loaded). Never raises.

    The line is built from the failure's kind only, never from what the server sent back: the address
    is typed by a manager, and echoing another service's answer would make this a probe of the network."""
    timeout = min(endpoint.timeout_s, READINESS_TIMEOUT_S)
    where = f"{endpoint.model_name} at {endpoint.protocol}://{endpoint.url}"
    target: str | None = None
    if endpoint.guard is not None:
        try:
            target = endpoint.guard(endpoint.url)
        except Exception as exc:  # the outbound-address rule: never even connect
            return f"{where}: address refused: {exc}"
    client: Any = None
    try:
        if endpoint.protocol == "grpc":
            import tritonclient.grpc as grpc_module

            client = _client(grpc_module, endpoint, target, timeout)
            ready = client.is_model_ready(endpoint.model_name, endpoint.model_version, client_timeout=timeout)
        elif endpoint.protocol == "http":
            import tritonclient.http as http_module

            client = _client(http_module, endpoint, target, timeout)
            ready = client.is_model_ready(endpoint.model_name, endpoint.model_version, **_headers(endpoint, target))
        else:
            return f"{where}: unknown protocol {endpoint.protocol!r}"
    except Exception as exc:  # unreachable server, bad address: a warning for the manager, not a crash
        kind = _failure(exc, endpoint, 0.0).error_kind
        return f"{where}: {_READINESS_PHRASES.get(kind, _READINESS_PHRASES['error']).format(timeout=timeout)}"
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:
                pass
    return "" if ready else f"{where}: the server is up but the model is not ready (not loaded?)"


def models_readiness(endpoints: Sequence[EndpointSpec], *, timeout_s: float, max_workers: int = 16) -> list[str]:
    """`model_readiness` of every endpoint at once (one thread each, up to `max_workers`), each bounded by
    `timeout_s` (or its own timeout, if shorter), so that a dead host costs the others nothing. Answers in
    the order given. An endpoint whose check has not returned by the deadline (a name that takes long to
    resolve, say) is reported as not answering; its thread is left to finish on its own."""
    if not endpoints:
        return []
    specs = [dataclasses.replace(e, timeout_s=min(e.timeout_s, timeout_s)) for e in endpoints]
    executor = ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(specs))), thread_name_prefix="arena-ready")
    try:
        futures = [executor.submit(model_readiness, spec) for spec in specs]
        # Queued checks wait for a free thread: the deadline covers every round of the pool.
        rounds = -(-len(specs) // max(1, min(max_workers, len(specs))))
        futures_wait(futures, timeout=rounds * timeout_s + 2.0)
        answers = []
        for spec, future in zip(specs, futures, strict=True):
            if future.done() and not future.cancelled() and future.exception() is None:
                answers.append(future.result())
            else:
                answers.append(f"{spec.model_name} at {spec.protocol}://{spec.url}: no answer within {timeout_s:g} s")
        return answers
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
