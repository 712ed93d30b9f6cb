"""`generate` and `generate_pair` against the real server: failures become results, pairs run at once."""

from __future__ import annotations

import json
import socket
import time

import pytest

from serving.triton.client import (
    EndpointSpec,
    GenerationResult,
    SamplingParams,
    generate,
    generate_pair,
)
from serving.triton.server import TritonServer

pytestmark = pytest.mark.triton

PARAMS = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=48, system_prompt="Be brief.", seed=11)
PROTOCOLS = ["grpc", "http"]


def _endpoint(server: TritonServer, protocol: str, model: str, timeout_s: float = 30.0) -> EndpointSpec:
    url = server.grpc_url if protocol == "grpc" else server.http_url
    return EndpointSpec(url=url, protocol=protocol, model_name=model, timeout_s=timeout_s)  # type: ignore[arg-type]


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_error(result: GenerationResult, *fragments: str) -> None:
    assert not result.ok
    assert result.finish_reason == "error"
    assert (result.text, result.output_tokens) == ("", 0)
    for fragment in fragments:
        assert fragment in result.error, result.error


def _echo(result: GenerationResult) -> dict[str, object]:
    assert result.ok, result.error
    return json.loads(result.text)


# -- single calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_generate_sends_every_parameter(triton_server, protocol):
    received = _echo(generate(_endpoint(triton_server, protocol, "delay-fast"), "héllo 🙂", PARAMS))
    assert received["text_input"] == "héllo 🙂"
    assert received["system_prompt"] == "Be brief."
    assert received["max_tokens"] == 48
    assert received["seed"] == 11
    assert received["temperature"] == pytest.approx(0.7, abs=1e-6)
    assert received["top_p"] == pytest.approx(0.9, abs=1e-6)


def test_empty_system_prompt_is_not_sent(triton_server):
    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8)
    assert _echo(generate(_endpoint(triton_server, "grpc", "delay-fast"), "x", params))["system_prompt"] is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_latency_is_the_real_round_trip(triton_server, protocol):
    fast = generate(_endpoint(triton_server, protocol, "delay-fast"), "x", PARAMS)
    slow = generate(_endpoint(triton_server, protocol, "delay-slow"), "x", PARAMS)
    assert 0.1 <= fast.latency_s < 0.25
    assert 0.3 <= slow.latency_s < 0.45


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_timeout_becomes_an_error_result(triton_server, protocol):
    started = time.perf_counter()
    result = generate(_endpoint(triton_server, protocol, "sleepy", timeout_s=1.0), "x", PARAMS)
    elapsed = time.perf_counter() - started
    _assert_error(result, "sleepy", "timeout")
    assert 0.9 <= result.latency_s <= elapsed < 5.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_down_becomes_an_error_result(protocol):
    endpoint = EndpointSpec(f"127.0.0.1:{_unused_port()}", protocol, "zen-bigram", timeout_s=5.0)
    _assert_error(generate(endpoint, "x", PARAMS), "unreachable")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_model_becomes_an_error_result(triton_server, protocol):
    _assert_error(generate(_endpoint(triton_server, protocol, "no-such-model"), "x", PARAMS), "not served")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("defect", "message"),
    [
        ("bytes", "not valid UTF-8"),
        ("missing", "no 'text_output'"),
        ("shape", "'text_output' has shape [2]"),
        ("tokens", "'output_tokens' has shape [3]"),
        ("finish", "'finish_reason' is 'exploded'"),
    ],
)
def test_malformed_answer_becomes_an_error_result(triton_server, protocol, defect, message):
    result = generate(_endpoint(triton_server, protocol, "broken"), defect, PARAMS)
    _assert_error(result, "broken", "malformed answer", message)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_missing_token_count_and_finish_reason_fall_back_to_words(triton_server, protocol):
    endpoint = _endpoint(triton_server, protocol, "broken")
    roomy = generate(endpoint, "bare", SamplingParams(temperature=1.0, top_p=1.0, max_tokens=10))
    assert (roomy.text, roomy.output_tokens, roomy.finish_reason) == ("just four plain words", 4, "stop")
    tight = generate(endpoint, "bare", SamplingParams(temperature=1.0, top_p=1.0, max_tokens=4))
    assert (tight.output_tokens, tight.finish_reason, tight.error) == (4, "length", "")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("prompt", ["refuse", "raise"])
def test_failing_model_becomes_an_error_result(triton_server, protocol, prompt):
    expected = "raised on purpose" if prompt == "raise" else "refuses on purpose"
    _assert_error(generate(_endpoint(triton_server, protocol, "failing"), prompt, PARAMS), "failing", expected)


def test_bad_protocol_becomes_an_error_result(triton_server):
    endpoint = EndpointSpec(triton_server.grpc_url, "smoke-signals", "zen-bigram")  # type: ignore[arg-type]
    _assert_error(generate(endpoint, "x", PARAMS), "unknown protocol")


# -- pairs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pair_runs_both_sides_concurrently(triton_server, protocol):
    fast = _endpoint(triton_server, protocol, "delay-fast")
    slow = _endpoint(triton_server, protocol, "delay-slow")
    generate_pair(fast, slow, "warm-up", PARAMS)
    started = time.perf_counter()
    left, right = generate_pair(fast, slow, "same prompt", PARAMS)
    wall = time.perf_counter() - started
    assert left.ok and right.ok
    # Concurrent: the battle takes as long as its slower side, not the sum of both.
    assert wall >= right.latency_s >= 0.3
    assert wall < right.latency_s + 0.08
    assert wall < 0.8 * (left.latency_s + right.latency_s)
    # Both requests reached the server at the same moment.
    assert abs(_echo(left)["_received_at"] - _echo(right)["_received_at"]) < 0.05  # type: ignore[operator]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pair_sends_identical_parameters_to_both_sides(triton_server, protocol):
    left, right = generate_pair(
        _endpoint(triton_server, protocol, "delay-slow"),
        _endpoint(triton_server, protocol, "delay-fast"),
        "Wie heißt du? 🙂",
        PARAMS,
    )
    received_left, received_right = _echo(left), _echo(right)
    received_left.pop("_received_at")
    received_right.pop("_received_at")
    assert received_left == received_right
    assert received_left["text_input"] == "Wie heißt du? 🙂"
    assert received_left["seed"] == 11


def test_pair_keeps_left_and_right_in_order(triton_server):
    left, right = generate_pair(
        _endpoint(triton_server, "grpc", "zen-bigram"),
        _endpoint(triton_server, "grpc", "docs-markdown"),
        "x",
        PARAMS,
    )
    assert left.text == generate(_endpoint(triton_server, "grpc", "zen-bigram"), "x", PARAMS).text
    assert right.text == generate(_endpoint(triton_server, "grpc", "docs-markdown"), "x", PARAMS).text
    assert left.text != right.text


def test_pair_waits_for_the_slow_side_even_when_the_other_fails(triton_server):
    started = time.perf_counter()
    left, right = generate_pair(
        _endpoint(triton_server, "grpc", "failing"),
        _endpoint(triton_server, "grpc", "delay-slow"),
        "x",
        PARAMS,
    )
    wall = time.perf_counter() - started
    _assert_error(left, "failing")
    assert right.ok
    assert wall >= 0.3


def test_pair_with_one_side_down(triton_server):
    down = EndpointSpec(f"127.0.0.1:{_unused_port()}", "http", "zen-bigram", timeout_s=5.0)
    left, right = generate_pair(_endpoint(triton_server, "grpc", "zen-bigram"), down, "x", PARAMS)
    assert left.ok
    _assert_error(right, "unreachable")
