"""The real small LLMs (serving/llm_model_repository/), called over gRPC streaming as a client of
Triton's vLLM backend calls it: real text in several chunks, deterministic with a seed, the
contract's finish reasons and token counts, no stalled prompt while both models answer at once.

Opt-in models: see the `llm_triton_server` fixture for when a missing install fails or skips.
Timings are recorded as test properties (`--junitxml` shows them) and printed, never asserted."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from serving.triton.server import TritonServer
from tests.conftest import REAL_LLM_MODELS, endpoint_of, make_real_llm_tenant

pytestmark = [pytest.mark.triton, pytest.mark.real_llm]

PROMPTS = {
    "smollm2-135m-instruct": "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n",
    "gemma3-270m": "The three most important inventions in history are",
}


@dataclass
class Streamed:
    chunks: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # seconds since the request was sent
    error: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def _inputs(prompt: str, sampling: dict[str, Any], *, stream: bool, exclude_input: bool | None = True) -> list[Any]:
    def tensor(name: str, value: np.ndarray, dtype: str) -> Any:
        item = grpcclient.InferInput(name, list(value.shape), dtype)
        item.set_data_from_numpy(value)
        return item

    inputs = [
        tensor("text_input", np.array([prompt.encode()], dtype=np.object_), "BYTES"),
        tensor("stream", np.array([stream]), "BOOL"),
        tensor("sampling_parameters", np.array([json.dumps(sampling).encode()], dtype=np.object_), "BYTES"),
        tensor("return_finish_reason", np.array([True]), "BOOL"),
        tensor("return_num_output_tokens", np.array([True]), "BOOL"),
    ]
    if exclude_input is not None:
        inputs.append(tensor("exclude_input_in_output", np.array([exclude_input]), "BOOL"))
    return inputs


def call(
    server: TritonServer,
    model: str,
    prompt: str,
    sampling: dict[str, Any],
    *,
    stream: bool = True,
    exclude_input: bool | None = True,
    timeout_s: float = 60.0,
) -> Streamed:
    """One request over the gRPC stream, collected until Triton's final-response flag."""
    events: queue.Queue[tuple[Any, Any]] = queue.Queue()
    result = Streamed()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: events.put((result, error)))
        sent = time.monotonic()
        client.async_stream_infer(
            model,
            _inputs(prompt, sampling, stream=stream, exclude_input=exclude_input),
            enable_empty_final_response=True,
        )
        deadline = sent + timeout_s
        while True:
            res, err = events.get(timeout=max(0.1, deadline - time.monotonic()))
            if err is not None:
                result.error = str(err)
                return result
            arrived = time.monotonic() - sent
            final = res.get_response().parameters["triton_final_response"].bool_param
            text = res.as_numpy("text_output")
            if text is not None:
                result.chunks.append(text.reshape(-1)[0].decode())
                result.finish_reasons.append(res.as_numpy("finish_reason").reshape(-1)[0].decode())
                result.token_counts.append(int(res.as_numpy("num_output_tokens").reshape(-1)[0]))
                result.arrivals.append(arrived)
            if final:
                return result
    finally:
        client.stop_stream()
        client.close()


def _report(record_property: Any, model: str, streamed: Streamed) -> dict[str, float]:
    first = next(t for t, chunk in zip(streamed.arrivals, streamed.chunks, strict=True) if chunk)
    total = streamed.arrivals[-1]
    tokens = sum(streamed.token_counts)
    rate = (tokens - 1) / (total - first) if total > first else float("nan")
    stats = {"first_token_s": round(first, 3), "total_s": round(total, 3), "tokens": tokens, "tokens_per_s": rate}
    record_property(f"{model}-timings", json.dumps(stats))
    print(f"{model}: {stats}")
    return stats


@pytest.mark.parametrize("model", list(REAL_LLM_MODELS))
def test_streams_real_text_in_many_chunks_and_stops_at_max_tokens(llm_triton_server, model, record_property):
    sampling = {"temperature": 0.8, "top_p": 0.95, "max_tokens": 40, "seed": 7}
    streamed = call(llm_triton_server, model, PROMPTS[model], sampling)
    assert streamed.error is None, streamed.error
    assert len([chunk for chunk in streamed.chunks if chunk]) >= 10  # one response per token, not one lump
    assert sum(ch.isalpha() for ch in streamed.text) >= 40  # words, not an empty or garbled answer
    assert streamed.finish_reasons[-1] == "length"
    assert set(streamed.finish_reasons[:-1]) == {"None"}  # vLLM sends str(None) until the end
    assert sum(streamed.token_counts) == 40
    assert PROMPTS[model] not in streamed.text  # deltas of the answer only
    _report(record_property, model, streamed)


@pytest.mark.parametrize("model", list(REAL_LLM_MODELS))
def test_same_seed_gives_the_same_text_and_another_seed_another(llm_triton_server, model):
    sampling = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 24}
    first = call(llm_triton_server, model, PROMPTS[model], {**sampling, "seed": 11})
    again = call(llm_triton_server, model, PROMPTS[model], {**sampling, "seed": 11})
    other = call(llm_triton_server, model, PROMPTS[model], {**sampling, "seed": 12})
    assert first.text and first.text == again.text
    assert first.chunks == again.chunks
    assert other.text != first.text


def test_not_streamed_one_final_response_with_the_prompt_unless_excluded(llm_triton_server):
    model, prompt = "gemma3-270m", PROMPTS["gemma3-270m"]
    # String values, as vLLM's own sample client sends them (the backend converts them).
    sampling = {"temperature": "0", "max_tokens": "12"}
    excluded = call(llm_triton_server, model, prompt, sampling, stream=False, exclude_input=True)
    default = call(llm_triton_server, model, prompt, sampling, stream=False, exclude_input=None)
    assert excluded.error is None and default.error is None
    assert len(excluded.chunks) == len(default.chunks) == 1
    assert excluded.finish_reasons == ["length"] and excluded.token_counts == [12]
    assert default.text == prompt + excluded.text  # vLLM's default repeats the prompt when not streaming


def test_a_stop_string_ends_the_answer_before_it(llm_triton_server):
    model = "smollm2-135m-instruct"
    sampling = {"temperature": 0, "max_tokens": 200, "stop": ["."]}
    streamed = call(llm_triton_server, model, PROMPTS[model], sampling)
    assert streamed.error is None, streamed.error
    assert streamed.finish_reasons[-1] == "stop"
    assert streamed.text and "." not in streamed.text
    assert sum(streamed.token_counts) < 200


def test_contract_errors_come_back_as_the_request_error(llm_triton_server):
    model = "smollm2-135m-instruct"
    streamed = call(llm_triton_server, model, "hello", {"max_tokens": 4}, stream=True, exclude_input=False)
    assert streamed.error is not None and "exclude_input_in_output" in streamed.error
    bad = call(llm_triton_server, model, "hello", {"max_tokens": "many"})
    assert bad.error is not None and "sampling_parameters" in bad.error
    # The model still answers afterwards.
    assert call(llm_triton_server, model, "hello", {"max_tokens": 3, "seed": 1}).token_counts


def test_both_models_at_once_neither_prompt_stalls(llm_triton_server, record_property):
    """A battle asks both models together: with one thread each (prompt evaluation included), both
    stream from the start. Timings are reported, not asserted."""
    results: dict[str, Streamed] = {}
    barrier = threading.Barrier(len(REAL_LLM_MODELS))
    sampling = {"temperature": 0.8, "top_p": 0.95, "max_tokens": 64, "seed": 3}

    def side(model: str) -> None:
        barrier.wait()
        results[model] = call(llm_triton_server, model, PROMPTS[model], sampling)

    threads = [threading.Thread(target=side, args=(model,)) for model in REAL_LLM_MODELS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    for model in REAL_LLM_MODELS:
        streamed = results[model]
        assert streamed.error is None, streamed.error
        assert sum(streamed.token_counts) == 64
        _report(record_property, f"{model}-concurrent", streamed)


@pytest.mark.django_db
def test_real_llm_tenant_pits_the_two_models_against_each_other(llm_triton_server, alice, bob):
    """The helper the battle-path tests build on."""
    tenant = make_real_llm_tenant(owner=alice, rater=bob, server=llm_triton_server, name="Initech")
    endpoints = [endpoint_of(tenant.left), endpoint_of(tenant.right)]
    assert [e.model_name for e in endpoints] == list(REAL_LLM_MODELS)
    assert {e.url for e in endpoints} == {llm_triton_server.grpc_url}
    for endpoint in endpoints:
        endpoint.refresh_from_db()
        if hasattr(endpoint, "contract"):  # the endpoint fields of the `contracts` work
            assert endpoint.contract == "vllm"
            assert endpoint.prompt_format == REAL_LLM_MODELS[endpoint.model_name]  # type: ignore[attr-defined]


def test_the_real_models_answers_carry_no_special_token_and_no_signature(llm_triton_server, record_property):
    """The signature test of the shipped contestants (test_ngram_signatures.py), on the real models'
    answers as a battle gets them through the client: no special token (Gemma 3 270M writes
    `<start_of_image>` into some answers: prompt 56 at seed 4 is one, checked raw below), no opening or
    closing three words in more than a fifth of a model's answers. The first-ten-words classifier's
    accuracy is reported, not asserted: a base and an instruct model differ in style, not by a mark."""
    from serving.triton.client import EndpointSpec, SamplingParams, generate_pair
    from serving.triton.special_tokens import SPECIAL_TOKEN, strip_special_tokens
    from serving.triton.templates import render
    from tests.serving.test_ngram_signatures import PROMPTS as SUBJECT_PROMPTS
    from tests.serving.test_ngram_signatures import _naive_bayes_accuracy, _words

    smol, gemma = (
        EndpointSpec(
            url=llm_triton_server.grpc_url,
            protocol="grpc",
            model_name=model,
            contract="vllm",
            prompt_format=REAL_LLM_MODELS[model],  # type: ignore[arg-type]
            timeout_s=120.0,
        )
        for model in ("smollm2-135m-instruct", "gemma3-270m")
    )
    prompts = SUBJECT_PROMPTS[::14][:12]
    answers: dict[str, list[str]] = {"smollm2-135m-instruct": [], "gemma3-270m": []}
    for seed, prompt in enumerate(prompts):
        params = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=64, seed=seed)
        left, right = generate_pair(smol, gemma, prompt, params)
        assert left.ok and right.ok, (left.error, right.error)
        answers["smollm2-135m-instruct"].append(left.text)
        answers["gemma3-270m"].append(right.text)
    # The known case: the raw answer has the tokens, the one a battle shows has not, and is otherwise the same.
    sampling = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 64, "seed": 4}
    raw = call(llm_triton_server, "gemma3-270m", render(prompts[4], "raw", ""), sampling, stream=False)
    assert raw.error is None and SPECIAL_TOKEN.search(raw.text), raw.text
    assert answers["gemma3-270m"][4] == strip_special_tokens(raw.text)
    for name, texts in answers.items():
        assert not any(SPECIAL_TOKEN.search(text) for text in texts), name
        ((top_open, n_open),) = Counter(tuple(_words(t)[:3]) for t in texts).most_common(1)
        ((top_close, n_close),) = Counter(tuple(_words(t)[-3:]) for t in texts).most_common(1)
        assert n_open <= 0.2 * len(texts), (name, top_open, n_open)
        assert n_close <= 0.2 * len(texts), (name, top_close, n_close)
    accuracy = _naive_bayes_accuracy([(_words(t)[:10], name) for name, texts in answers.items() for t in texts])
    record_property("first-ten-words-classifier-accuracy", accuracy)
    print(f"real models: first-ten-words classifier accuracy {accuracy:.3f} (chance 0.500)")
