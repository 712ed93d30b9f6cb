"""The shipped n-gram contestants, called through the real Triton server."""

from __future__ import annotations

import re

import pytest

from serving.triton.client import EndpointSpec, GenerationResult, SamplingParams, generate
from serving.triton.server import TritonServer

pytestmark = pytest.mark.triton

CONTESTANTS = ("zen-bigram", "stdlib-trigram", "docs-markdown")
PROMPT = "What is a heap, and why would I use one?"


def _call(
    server: TritonServer, model: str, prompt: str = PROMPT, protocol: str = "grpc", **params: object
) -> GenerationResult:
    url = server.grpc_url if protocol == "grpc" else server.http_url
    sampling = SamplingParams(
        **{"temperature": 0.9, "top_p": 0.95, "max_tokens": 256, "seed": 1, **params}  # type: ignore[arg-type]
    )
    result = generate(EndpointSpec(url, protocol, model), prompt, sampling)  # type: ignore[arg-type]
    assert result.ok, result.error
    return result


@pytest.mark.parametrize("model", CONTESTANTS)
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_same_seed_and_prompt_give_identical_answers(triton_server, model, protocol):
    first = _call(triton_server, model, protocol=protocol, seed=7)
    second = _call(triton_server, model, protocol=protocol, seed=7)
    assert first.text == second.text
    assert first.output_tokens == second.output_tokens == len(first.text.split())
    assert first.finish_reason == "stop"


@pytest.mark.parametrize("model", CONTESTANTS)
def test_both_protocols_serve_the_same_answer(triton_server, model):
    assert _call(triton_server, model, protocol="grpc").text == _call(triton_server, model, protocol="http").text


@pytest.mark.parametrize("model", CONTESTANTS)
def test_different_seeds_usually_give_different_answers(triton_server, model):
    texts = {_call(triton_server, model, seed=seed, temperature=1.0, top_p=1.0).text for seed in range(6)}
    assert len(texts) >= 4


@pytest.mark.parametrize("model", CONTESTANTS)
def test_system_prompt_is_part_of_the_seed(triton_server, model):
    texts = {_call(triton_server, model, system_prompt=f"You are assistant {i}.").text for i in range(4)}
    assert len(texts) >= 3


@pytest.mark.parametrize("model", CONTESTANTS)
@pytest.mark.parametrize("max_tokens", [1, 5, 12])
def test_max_tokens_cuts_with_finish_reason_length(triton_server, model, max_tokens):
    full = _call(triton_server, model, seed=3)
    assert full.output_tokens > 12
    cut = _call(triton_server, model, seed=3, max_tokens=max_tokens)
    assert cut.finish_reason == "length"
    assert cut.output_tokens == max_tokens == len(cut.text.split())
    # Truncation, not a different answer: the cut text is a prefix of the full one.
    assert full.text.startswith(cut.text)


@pytest.mark.parametrize("model", CONTESTANTS)
def test_max_tokens_at_natural_length_is_stop(triton_server, model):
    full = _call(triton_server, model, seed=3)
    exact = _call(triton_server, model, seed=3, max_tokens=full.output_tokens)
    assert (exact.text, exact.finish_reason) == (full.text, "stop")


@pytest.mark.parametrize("model", CONTESTANTS)
def test_temperature_zero_is_greedy_and_ignores_the_seed(triton_server, model):
    greedy = {_call(triton_server, model, temperature=0.0, seed=seed).text for seed in range(4)}
    assert len(greedy) == 1


@pytest.mark.parametrize("model", CONTESTANTS)
def test_temperature_changes_the_answer(triton_server, model):
    greedy = _call(triton_server, model, temperature=0.0, top_p=1.0).text
    hot = {_call(triton_server, model, temperature=1.5, top_p=1.0, seed=s).text for s in range(4)}
    assert hot - {greedy}, "sampling at temperature 1.5 never left the greedy answer"


@pytest.mark.parametrize("model", CONTESTANTS)
def test_tiny_top_p_keeps_only_the_most_likely_word(triton_server, model):
    greedy = _call(triton_server, model, temperature=0.0).text
    for seed in range(3):
        assert _call(triton_server, model, temperature=1.5, top_p=1e-6, seed=seed).text == greedy


@pytest.mark.parametrize("model", CONTESTANTS)
def test_answer_echoes_the_prompt_topic(triton_server, model):
    text = _call(triton_server, model, prompt="Explain binary search in sorted lists").text
    assert "binary search in sorted lists" in text.split("\n")[0].lower()


@pytest.mark.parametrize("model", CONTESTANTS)
@pytest.mark.parametrize(
    "prompt",
    ["", "   ", "héllo wörld 🙂 — 日本語のテキスト", "**#`>", "word " * 2000, "\x00\x01 control"],
    ids=["empty", "blank", "unicode", "markup", "long", "control"],
)
def test_odd_prompts_still_get_an_answer(triton_server, model, prompt):
    result = _call(triton_server, model, prompt=prompt, max_tokens=64)
    assert result.text.strip()
    assert result.output_tokens == len(result.text.split())


def test_zero_max_tokens_is_a_clear_error_not_a_crash(triton_server):
    result = generate(
        EndpointSpec(triton_server.grpc_url, "grpc", "zen-bigram"),
        PROMPT,
        SamplingParams(temperature=1.0, top_p=1.0, max_tokens=0),
    )
    assert not result.ok
    assert "max_tokens must be >= 1" in result.error
    # The model is still serving afterwards.
    assert _call(triton_server, "zen-bigram").ok


def test_styles_differ_between_contestants(triton_server):
    """Through Triton, over a few prompts (markup is a tendency, not a fixed layout; the rates are
    measured over 200 prompts in test_ngram_signatures.py)."""
    prompts = [
        PROMPT,
        "Explain binary search in sorted lists",
        "How do I write a good commit message?",
        "What causes the seasons on Earth?",
        "Describe the water cycle.",
    ]
    markdown = "\n\n".join(_call(triton_server, "docs-markdown", prompt=p).text for p in prompts)
    assert re.search(r"^## \S", markdown, re.MULTILINE)
    assert re.search(r"^- \S", markdown, re.MULTILINE)
    assert "**" in markdown
    for plain_model in ("zen-bigram", "stdlib-trigram"):
        for prompt in prompts:
            assert not re.search(r"^(#+ |- )", _call(triton_server, plain_model, prompt=prompt).text, re.MULTILINE)
    assert "\n\n" in _call(triton_server, "stdlib-trigram").text  # two paragraphs or more
    assert "\n" not in _call(triton_server, "zen-bigram").text  # one paragraph


def test_contestants_answer_differently(triton_server):
    assert len({_call(triton_server, model).text for model in CONTESTANTS}) == 3
