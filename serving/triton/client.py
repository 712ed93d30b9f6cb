"""Call Triton text-generation models, one at a time or as a battle pair.

Why this shape: a battle is only fair if both models get the same request at the same moment and
neither answer is shown before the other exists. `generate_pair` therefore sends one identical
parameter set to both sides from two threads released together by a barrier, and returns only
when both have answered (the parity buffer). Failures are data, not exceptions: a side that is
down, slow, broken or refusing yields a `GenerationResult` with a human-readable `error`, so the
caller can void the battle with a clear message instead of handling a zoo of client exceptions.

The wire contract is the one GPU LLM backends use: `text_input` BYTES [1] and optional
`system_prompt`, `max_tokens`, `temperature`, `top_p`, `seed`; outputs `text_output` BYTES [1] and,
where the model provides them, `output_tokens` and `finish_reason`. Only pure `tritonclient` here,
no Django: the platform's `ModelEndpoint` rows are turned into `EndpointSpec`s by the caller.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "EndpointSpec",
    "GenerationResult",
    "SamplingParams",
    "StreamEvent",
    "generate",
    "generate_pair",
    "model_readiness",
    "models_readiness",
    "stream_pair",
]

Protocol = Literal["grpc", "http"]
FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True)
class EndpointSpec:
    """Where a model is served: `url` is `host:port` (no scheme), as tritonclient expects."""

    url: str
    protocol: Protocol
    model_name: str
    model_version: str = ""
    timeout_s: float = 30.0
    # Called with `url` right before each connection; raises (with a message fit for managers) if the
    # address may not be called. The platform passes its outbound-address rule (arena/outbound.py), so
    # an address that was allowed when entered but resolves elsewhere now is refused at call time.
    guard: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


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
    # Seconds from the request to the first token (streaming); TEMPORARY (branch stream): the real
    # streaming client (branch contracts) defines it; here it is the latency of the one chunk.
    ttft_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error == ""


class _MalformedOutput(Exception):
    pass


def _inputs(module: Any, prompt: str, params: SamplingParams) -> list[Any]:
    def tensor(name: str, value: np.ndarray, datatype: str) -> Any:
        infer_input = module.InferInput(name, list(value.shape), datatype)
        infer_input.set_data_from_numpy(value)
        return infer_input

    def text(value: str) -> np.ndarray:
        return np.array([value.encode("utf-8", errors="surrogatepass")], dtype=np.object_)

    inputs = [
        tensor("text_input", text(prompt), "BYTES"),
        tensor("max_tokens", np.array([params.max_tokens], dtype=np.int32), "INT32"),
        tensor("temperature", np.array([params.temperature], dtype=np.float32), "FP32"),
        tensor("top_p", np.array([params.top_p], dtype=np.float32), "FP32"),
        tensor("seed", np.array([params.seed], dtype=np.uint64), "UINT64"),
    ]
    # Sent only when set, so a model without a system_prompt input still serves battles that do
    # not use one; a battle that does use one fails loudly on such a model instead of silently
    # dropping it from one side.
    if params.system_prompt:
        inputs.append(tensor("system_prompt", text(params.system_prompt), "BYTES"))
    return inputs


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
    text = _as_text(_single(result, "text_output", required=True), "text_output")
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


class _Call:
    """One inference: prepared (client and inputs built) before the timed part starts."""

    def __init__(self, endpoint: EndpointSpec, prompt: str, params: SamplingParams) -> None:
        self.endpoint = endpoint
        self.params = params
        self.client: Any = None
        self.result: GenerationResult | None = None
        if endpoint.guard is not None:
            try:
                endpoint.guard(endpoint.url)
            except Exception as exc:
                where = f"{endpoint.model_name} at {endpoint.protocol}://{endpoint.url}"
                self.result = GenerationResult("", 0, "error", 0.0, f"{where}: address refused: {exc}", "refused")
                return
        try:
            if endpoint.protocol == "grpc":
                import tritonclient.grpc as module
            elif endpoint.protocol == "http":
                import tritonclient.http as module
            else:
                where = f"{endpoint.model_name} at {endpoint.protocol}://{endpoint.url}"
                self.result = GenerationResult("", 0, "error", 0.0, f"{where}: unknown protocol", "error")
                return
            self.inputs = _inputs(module, prompt, params)
            if endpoint.protocol == "grpc":
                self.client = module.InferenceServerClient(endpoint.url)
            else:
                self.client = module.InferenceServerClient(
                    endpoint.url,
                    connection_timeout=endpoint.timeout_s,
                    network_timeout=endpoint.timeout_s,
                )
        except Exception as exc:  # a bad URL or protocol is a failed side, not a crash
            self.result = _failure(exc, endpoint, 0.0)

    def run(self) -> GenerationResult:
        if self.result is not None:
            return self.result
        endpoint = self.endpoint
        kwargs: dict[str, Any] = {"model_version": endpoint.model_version}
        if endpoint.protocol == "grpc":
            kwargs["client_timeout"] = endpoint.timeout_s
        started = time.perf_counter()
        try:
            response = self.client.infer(endpoint.model_name, self.inputs, **kwargs)
            latency_s = time.perf_counter() - started
        except Exception as exc:
            latency_s = time.perf_counter() - started
            self.result = _failure(exc, endpoint, latency_s)
            return self.result
        try:
            self.result = _parse(response, self.params, latency_s)
        except Exception as exc:  # _MalformedOutput, or tritonclient failing to decode a tensor
            where = f"{endpoint.model_name} at {endpoint.protocol}://{endpoint.url}"
            # Our own reasons name fields and shapes; a decoding failure's text could carry the answer's bytes.
            reason = str(exc) if isinstance(exc, _MalformedOutput) else f"undecodable output ({type(exc).__name__})"
            self.result = GenerationResult(
                "", 0, "error", latency_s, f"{where}: malformed answer: {reason}", "malformed"
            )
        return self.result

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # closing a broken connection must not turn a result into a crash
                pass
            self.client = None


def generate(endpoint: EndpointSpec, prompt: str, params: SamplingParams) -> GenerationResult:
    """One non-streaming generation. Never raises for server-side problems; see `GenerationResult.error`."""
    call = _Call(endpoint, prompt, params)
    try:
        return call.run()
    finally:
        call.close()


def generate_pair(
    left: EndpointSpec, right: EndpointSpec, prompt: str, params: SamplingParams
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
    for index, endpoint in enumerate((left, right)):
        if results[index] is None:  # the thread died on something unexpected
            results[index] = GenerationResult(
                "", 0, "error", 0.0, f"{endpoint.model_name}: generation thread failed unexpectedly", "error"
            )
    left_result, right_result = results
    assert left_result is not None and right_result is not None
    return left_result, right_result


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
    if endpoint.guard is not None:
        try:
            endpoint.guard(endpoint.url)
        except Exception as exc:  # the outbound-address rule: never even connect
            return f"{where}: address refused: {exc}"
    client: Any = None
    try:
        if endpoint.protocol == "grpc":
            import tritonclient.grpc as grpc_module

            client = grpc_module.InferenceServerClient(endpoint.url)
            ready = client.is_model_ready(endpoint.model_name, endpoint.model_version, client_timeout=timeout)
        elif endpoint.protocol == "http":
            import tritonclient.http as http_module

            client = http_module.InferenceServerClient(
                endpoint.url, connection_timeout=timeout, network_timeout=timeout
            )
            ready = client.is_model_ready(endpoint.model_name, endpoint.model_version)
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


# --- TEMPORARY (branch `stream`): a stand-in for the streaming client of branch `contracts` -----------
# Same interface as the real one (StreamEvent, stream_pair); replace this whole section with it at the
# merge. It calls today's non-streaming `generate()` from two threads and emits each side's answer as
# one chunk (with done=True) when it arrives, so the live path runs end to end before the decoupled
# gRPC stream exists.


@dataclass(frozen=True)
class StreamEvent:
    side: int  # 0 = left, 1 = right
    delta: str  # newly generated text ("" allowed on the final event)
    t: float  # seconds since both requests left (common clock)
    done: bool  # last event of this side
    result: GenerationResult | None = None  # on done


def stream_pair(
    left: EndpointSpec,
    right: EndpointSpec,
    left_input: str | list[dict[str, str]],
    right_input: str | list[dict[str, str]],
    params: SamplingParams,
    on_event: Callable[[StreamEvent], None],
) -> tuple[GenerationResult, GenerationResult]:
    """TEMPORARY: both sides at once, each answer as a single chunk; see the section comment."""
    results: list[GenerationResult | None] = [None, None]
    barrier = threading.Barrier(2)
    origin: list[float] = []
    lock = threading.Lock()

    def side(index: int, endpoint: EndpointSpec, prompt: str | list[dict[str, str]]) -> None:
        text = prompt if isinstance(prompt, str) else "\n\n".join(m.get("content", "") for m in prompt)
        call = _Call(endpoint, text, params)
        try:
            barrier.wait(timeout=max(endpoint.timeout_s, 1.0))
        except threading.BrokenBarrierError:
            pass
        with lock:
            if not origin:
                origin.append(time.perf_counter())
        try:
            result = call.run()
        except Exception as exc:  # never leave the caller without a done event
            result = GenerationResult("", 0, "error", 0.0, f"{endpoint.model_name}: {type(exc).__name__}", "error")
        finally:
            call.close()
        result = GenerationResult(
            result.text,
            result.output_tokens,
            result.finish_reason,
            result.latency_s,
            result.error,
            result.error_kind,
            ttft_s=result.latency_s,
        )
        results[index] = result
        on_event(StreamEvent(index, result.text, time.perf_counter() - origin[0], True, result))

    threads = [
        threading.Thread(target=side, args=(0, left, left_input), name="arena-stream-left", daemon=True),
        threading.Thread(target=side, args=(1, right, right_input), name="arena-stream-right", daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left_result, right_result = results
    failed = GenerationResult("", 0, "error", 0.0, "generation thread failed unexpectedly", "error")
    return left_result or failed, right_result or failed
