"""The GPU backends' wire contracts (vLLM backend, TensorRT-LLM ensemble) end to end against their CPU
stand-ins on the real Triton, `stream_pair` over two gRPC streams, and failures as results."""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from serving.triton.client import (
    EndpointSpec,
    GenerationResult,
    SamplingParams,
    StreamEvent,
    generate,
    generate_pair,
    stream_pair,
)
from serving.triton.server import TritonServer
from serving.triton.special_tokens import strip_special_tokens
from serving.triton.templates import render

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]
PARAMS = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=14, seed=5)
PROMPT = "What is a heap, and why does it matter?"
# As in the stand-ins' config.pbtxt (serving/standin_repository/*/config.pbtxt).
STANDINS = {
    "vllm-standin": ("vllm", "zen+stdlib", 2, "paragraphs"),
    "trtllm-standin": ("trtllm", "zen", 2, "plain"),
}


@pytest.fixture(scope="module")
def arena_ngram() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "arena_ngram", ROOT / "serving" / "model_repository" / "arena_ngram.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["arena_ngram"] = module
    spec.loader.exec_module(module)
    return module


def _expected(arena_ngram: ModuleType, model: str, prompt: str, params: SamplingParams):  # type: ignore[no-untyped-def]
    """What the stand-in answers when it received exactly these parameters."""
    _, corpus, order, style = STANDINS[model]
    contestant = arena_ngram.build_contestant(model, corpus, order, style)
    request = arena_ngram.Request(
        prompt=prompt,
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        seed=params.seed,
    )
    return contestant.answer(request)


def _endpoint(server: TritonServer, model: str, timeout_s: float = 20.0, **kwargs: object) -> EndpointSpec:
    contract = STANDINS[model][0] if model in STANDINS else kwargs.pop("contract", "arena")
    return EndpointSpec(server.grpc_url, "grpc", model, timeout_s=timeout_s, contract=contract, **kwargs)  # type: ignore[arg-type]


class Recorder:
    """A thread-safe on_event: the events of each side, in arrival order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[StreamEvent] = []
        self.threads: set[str] = set()

    def __call__(self, event: StreamEvent) -> None:
        with self.lock:
            self.events.append(event)
            self.threads.add(threading.current_thread().name)

    def side(self, index: int) -> list[StreamEvent]:
        return [e for e in self.events if e.side == index]


def _assert_error(result: GenerationResult, kind: str, *fragments: str) -> None:
    assert not result.ok and result.error_kind == kind, result
    assert (result.text, result.output_tokens, result.finish_reason) == ("", 0, "error")
    for fragment in fragments:
        assert fragment in result.error, result.error


# -- one call per contract -------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(STANDINS))
def test_generate_sends_every_parameter_the_contract_way(triton_server, arena_ngram, model):
    result = generate(_endpoint(triton_server, model), PROMPT, PARAMS)
    expected = _expected(arena_ngram, model, PROMPT, PARAMS)
    assert result.ok, result.error
    # Prompt, max_tokens, temperature, top_p and seed all arrived: the answer is the one they determine,
    # without the prompt in front (exclude_input_in_output), with the model's own token count.
    assert (result.text, result.output_tokens, result.finish_reason) == (
        expected.text,
        expected.output_tokens,
        expected.finish_reason,
    )
    other_seed = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=14, seed=6)
    assert generate(_endpoint(triton_server, model), PROMPT, other_seed).text == (
        _expected(arena_ngram, model, PROMPT, other_seed).text
    )
    roomy = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=400, seed=0)
    assert generate(_endpoint(triton_server, model), PROMPT, roomy).finish_reason == "stop"
    # One final answer, asked for in one piece: no first token was timed, so none is reported (its
    # latency is not a time to first token).
    assert result.ttft_s is None and result.latency_s > 0
    assert result.tokens_per_s == pytest.approx(result.output_tokens / result.latency_s)


@pytest.mark.parametrize("fmt", ["chatml", "gemma", "llama3"])
def test_prompt_format_renders_the_system_prompt_and_turns_into_text_input(triton_server, arena_ngram, fmt):
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=14, seed=5, system_prompt="Be brief.")
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": PROMPT},
    ]
    result = generate(_endpoint(triton_server, "vllm-standin", prompt_format=fmt), conversation, params)
    rendered = render(conversation, fmt, system_prompt="Be brief.")
    # The stand-in's answer repeats words of its input, the template's tokens among them: the client strips
    # those (serving/triton/special_tokens.py), so what it returns is the model's text without them.
    assert result.text == strip_special_tokens(_expected(arena_ngram, "vllm-standin", rendered, params).text)


def test_a_system_prompt_is_never_dropped_by_a_contract_without_one(triton_server):
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=14, system_prompt="Be brief.")
    _assert_error(generate(_endpoint(triton_server, "vllm-standin"), PROMPT, params), "error", "no system prompt input")


def test_the_gpu_contracts_need_grpc(triton_server):
    endpoint = EndpointSpec(triton_server.http_url, "http", "vllm-standin", contract="vllm")
    _assert_error(generate(endpoint, PROMPT, PARAMS), "error", "needs the gRPC protocol")


def test_the_vllm_standin_keeps_the_backends_defaults(triton_server):
    """The stand-in is only worth testing against if it behaves as the vLLM backend does where the client
    could get it wrong: without exclude_input_in_output a non-streamed answer starts with the prompt, and
    streaming with it false is refused (vllm_backend src/utils/request.py)."""
    import tritonclient.grpc as grpcclient

    def inputs(stream: bool, exclude: bool | None) -> list[grpcclient.InferInput]:
        tensors = [("text_input", np.array([PROMPT.encode()], dtype=np.object_), "BYTES")]
        tensors.append(("stream", np.array([stream]), "BOOL"))
        if exclude is not None:
            tensors.append(("exclude_input_in_output", np.array([exclude]), "BOOL"))
        tensors.append(
            ("sampling_parameters", np.array([json.dumps({"max_tokens": "5"}).encode()], np.object_), "BYTES")
        )
        built = []
        for name, value, datatype in tensors:
            tensor = grpcclient.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value)
            built.append(tensor)
        return built

    def call(stream: bool, exclude: bool | None) -> tuple[str, str]:
        answers: list[tuple[str, str]] = []
        done = threading.Event()

        def callback(result, error):  # type: ignore[no-untyped-def]
            if error is not None:
                answers.append(("", str(error)))
            else:
                answers.append((result.as_numpy("text_output").reshape(-1)[0].decode(), ""))
            done.set()

        client = grpcclient.InferenceServerClient(triton_server.grpc_url)
        try:
            client.start_stream(callback=callback)
            client.async_stream_infer("vllm-standin", inputs(stream, exclude))
            assert done.wait(10)
        finally:
            client.stop_stream(cancel_requests=True)
            client.close()
        return answers[0]

    text, error = call(stream=False, exclude=None)
    # vLLM prepends the prompt as it is (`request_output.prompt + output.text`); max_tokens came as a string.
    assert error == "" and text.startswith(PROMPT) and len(text[len(PROMPT) :].split()) == 5
    assert "exclude_input_in_output` = False is not allowed" in call(stream=True, exclude=False)[1]


# -- streamed pairs --------------------------------------------------------------------------------


def test_stream_pair_streams_both_contracts_and_the_deltas_reassemble_the_answers(triton_server, arena_ngram):
    left, right = _endpoint(triton_server, "vllm-standin"), _endpoint(triton_server, "trtllm-standin")
    recorder = Recorder()
    results = stream_pair(left, right, PROMPT, PROMPT, PARAMS, recorder)
    assert recorder.threads == {"arena-stream-left", "arena-stream-right"}
    for index, (endpoint, result) in enumerate(zip((left, right), results, strict=True)):
        events = recorder.side(index)
        assert result.ok, result.error
        assert len(events) >= PARAMS.max_tokens - 2  # word by word, not in one piece
        assert [e.done for e in events] == [False] * (len(events) - 1) + [True]
        assert events[-1].result == result and all(e.result is None for e in events[:-1])
        assert [e.t for e in events] == sorted(e.t for e in events)
        assert "".join(e.delta for e in events) == result.text
        # The same answer as a non-streamed call (the parameters arrived the same way).
        assert result.text == _expected(arena_ngram, endpoint.model_name, PROMPT, PARAMS).text
        assert result.text == generate(endpoint, PROMPT, PARAMS).text
        assert result.output_tokens == PARAMS.max_tokens and result.finish_reason == "length"
        assert result.ttft_s is not None and 0 < result.ttft_s < result.latency_s  # streamed: timed
        # Both requests left at the common origin: each side's first chunk is stamped at its own ttft.
        assert events[0].t == pytest.approx(result.ttft_s, abs=0.05)
    # The stand-ins' first tokens come after 150 ms (vLLM) and 100 ms (TRT-LLM), then 30 / 20 ms a token.
    vllm, trtllm = results
    assert vllm.ttft_s is not None and trtllm.ttft_s is not None
    assert 0.14 <= vllm.ttft_s < 0.4 and 0.09 <= trtllm.ttft_s < 0.35
    assert vllm.latency_s >= 0.15 + 0.03 * (PARAMS.max_tokens - 1) - 0.02


def test_each_side_logs_its_timings(triton_server, caplog):
    caplog.set_level(logging.INFO, logger="serving.triton.client")
    vllm, trtllm = stream_pair(
        _endpoint(triton_server, "vllm-standin"),
        _endpoint(triton_server, "trtllm-standin"),
        PROMPT,
        PROMPT,
        PARAMS,
        Recorder(),
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "serving.triton.client"]
    for name, result in (("vllm-standin", vllm), ("trtllm-standin", trtllm)):
        (line,) = [line for line in lines if line.startswith(f"{name} at grpc://")]
        assert f"ttft {result.ttft_s:.3f} s, latency {result.latency_s:.3f} s" in line
        assert f"{result.output_tokens} output tokens, {result.tokens_per_s:.1f} tokens/s, finish length" in line


def test_a_slow_first_token_shows_as_time_to_first_token(triton_server):
    recorder = Recorder()
    slow, fast = stream_pair(
        _endpoint(triton_server, "vllm-standin-slow", contract="vllm"),
        _endpoint(triton_server, "trtllm-standin"),
        PROMPT,
        PROMPT,
        PARAMS,
        recorder,
    )
    assert slow.ok and fast.ok and slow.ttft_s is not None and fast.ttft_s is not None
    assert slow.ttft_s >= 0.4 > fast.ttft_s
    assert recorder.side(0)[0].t >= 0.4 > recorder.side(1)[0].t
    # After its first token the slow starter is quicker per token (10 ms against 20 ms).
    assert slow.latency_s - slow.ttft_s < fast.latency_s - fast.ttft_s


def test_an_arena_model_streams_as_one_chunk(triton_server):
    recorder = Recorder()
    arena, vllm = stream_pair(
        _endpoint(triton_server, "zen-bigram"),
        _endpoint(triton_server, "vllm-standin"),
        PROMPT,
        PROMPT,
        PARAMS,
        recorder,
    )
    assert arena.ok and vllm.ok
    (only,) = recorder.side(0)
    assert only.done and only.delta == arena.text and only.result == arena
    assert arena.ttft_s is None and arena.latency_s > 0  # answered in one piece: no first token timed
    assert arena.text == generate(_endpoint(triton_server, "zen-bigram"), PROMPT, PARAMS).text


def test_each_side_gets_its_own_conversation(triton_server, arena_ngram):
    history = [{"role": "user", "content": "Hi"}]
    left_input = [*history, {"role": "assistant", "content": "Left said this."}, {"role": "user", "content": PROMPT}]
    right_input = [*history, {"role": "assistant", "content": "Right said that."}, {"role": "user", "content": PROMPT}]
    left, right = stream_pair(
        _endpoint(triton_server, "vllm-standin", prompt_format="chatml"),
        _endpoint(triton_server, "trtllm-standin", prompt_format="llama3"),
        left_input,
        right_input,
        PARAMS,
        Recorder(),
    )
    expected_left = _expected(arena_ngram, "vllm-standin", render(left_input, "chatml"), PARAMS).text
    expected_right = _expected(arena_ngram, "trtllm-standin", render(right_input, "llama3"), PARAMS).text
    assert left.text == strip_special_tokens(expected_left)  # (the template's tokens stripped, as above)
    assert right.text == strip_special_tokens(expected_right)


def test_a_hung_stream_ends_as_a_timeout_and_the_other_side_is_untouched(triton_server):
    recorder = Recorder()
    started = time.perf_counter()
    hung, fine = stream_pair(
        _endpoint(triton_server, "stream-broken", timeout_s=1.0, contract="vllm"),
        _endpoint(triton_server, "trtllm-standin"),
        "hang",
        PROMPT,
        PARAMS,
        recorder,
    )
    wall = time.perf_counter() - started
    _assert_error(hung, "timeout", "stream-broken", "no answer within 1 s")
    assert 1.0 <= hung.latency_s < 1.3 and wall < 3.0
    assert fine.ok and fine.output_tokens == PARAMS.max_tokens
    # The hung side streamed one chunk, then ended with its failure.
    events = recorder.side(0)
    assert [e.done for e in events] == [False, True] and events[-1].result == hung and events[-1].delta == ""


def test_a_silent_model_times_out_in_generate_too(triton_server):
    started = time.perf_counter()
    result = generate(_endpoint(triton_server, "stream-broken", timeout_s=1.0, contract="vllm"), "silent", PARAMS)
    _assert_error(result, "timeout")
    assert time.perf_counter() - started < 3.0


def test_on_event_raising_does_not_stop_the_sides(triton_server):
    seen: list[StreamEvent] = []

    def clumsy(event: StreamEvent) -> None:
        seen.append(event)
        raise RuntimeError("the caller's bug")

    left, right = stream_pair(
        _endpoint(triton_server, "vllm-standin"),
        _endpoint(triton_server, "trtllm-standin"),
        PROMPT,
        PROMPT,
        PARAMS,
        clumsy,
    )
    assert left.ok and right.ok and sum(e.done for e in seen) == 2


# -- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("defect", "message"),
    [
        ("dtype", "'text_output' is int32, expected bytes"),
        ("utf8", "not valid UTF-8"),
        ("shape", "'text_output' has shape [2]"),
        ("tokens", "'num_output_tokens' has shape [2]"),
        ("finish", "'finish_reason' is 'exploded'"),
    ],
)
def test_malformed_stream_becomes_an_error_result(triton_server, defect, message):
    endpoint = _endpoint(triton_server, "stream-broken", timeout_s=5.0, contract="vllm")
    _assert_error(generate(endpoint, defect, PARAMS), "malformed", "stream-broken", "malformed answer", message)
    recorder = Recorder()
    result, _ = stream_pair(endpoint, _endpoint(triton_server, "zen-bigram"), defect, PROMPT, PARAMS, recorder)
    _assert_error(result, "malformed", message)
    assert recorder.side(0)[-1].result == result


def test_a_triton_error_mid_stream_is_an_error_result(triton_server):
    endpoint = _endpoint(triton_server, "stream-broken", contract="vllm")
    _assert_error(generate(endpoint, "error", PARAMS), "error", "fails mid-stream on purpose")


def test_a_well_formed_stream_of_the_broken_model_is_fine(triton_server):
    endpoint = _endpoint(triton_server, "stream-broken", contract="vllm")
    result = generate(endpoint, "ok", PARAMS)
    assert (result.text, result.output_tokens, result.finish_reason) == ("fine print", 2, "stop")


@pytest.mark.parametrize("contract", ["vllm", "trtllm"])
def test_server_down_is_unreachable(contract):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = EndpointSpec(f"127.0.0.1:{port}", "grpc", "vllm-standin", timeout_s=5.0, contract=contract)  # type: ignore[arg-type]
    _assert_error(generate(endpoint, PROMPT, PARAMS), "unreachable", "server unreachable")
    recorder = Recorder()
    down, _ = stream_pair(endpoint, endpoint, PROMPT, PROMPT, PARAMS, recorder)
    _assert_error(down, "unreachable")
    assert sum(e.done for e in recorder.events) == 2


def test_unknown_gpu_model_is_not_served(triton_server):
    endpoint = _endpoint(triton_server, "no-such-model", contract="trtllm")
    _assert_error(generate(endpoint, PROMPT, PARAMS), "not_served")


def test_generate_pair_speaks_each_sides_contract(triton_server, arena_ngram):
    left, right = generate_pair(
        _endpoint(triton_server, "trtllm-standin"), _endpoint(triton_server, "zen-bigram"), PROMPT, PARAMS
    )
    assert left.text == _expected(arena_ngram, "trtllm-standin", PROMPT, PARAMS).text
    assert right.ok and right.text != left.text


def test_the_address_rule_runs_before_a_stream_is_opened(triton_server):
    def refuse(url: str) -> None:
        raise PermissionError("not on the list")

    recorder = Recorder()
    refused, fine = stream_pair(
        _endpoint(triton_server, "vllm-standin", guard=refuse),
        _endpoint(triton_server, "zen-bigram"),
        PROMPT,
        PROMPT,
        PARAMS,
        recorder,
    )
    _assert_error(refused, "refused", "address refused: not on the list")
    assert fine.ok and [e.done for e in recorder.side(0)] == [True]
