"""Special tokens never reach a rater or a judge's parser: stripped from every answer, streamed or not,
whole or split across chunks (serving/triton/special_tokens.py, applied in the client)."""

from __future__ import annotations

import importlib.util
import random
import threading
from pathlib import Path
from types import ModuleType

import pytest

from serving.ratio_judging import ratio_judge_call
from serving.triton.client import EndpointSpec, SamplingParams, StreamEvent, generate, generate_pair, stream_pair
from serving.triton.server import TritonServer
from serving.triton.special_tokens import SPECIAL_TOKEN, SpecialTokenFilter, strip_special_tokens

PARAMS = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=64, seed=1)


def _sim() -> ModuleType:
    path = Path(__file__).parent / "model_repository" / "special_tokens_sim.py"
    spec = importlib.util.spec_from_file_location("special_tokens_sim", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIM = _sim()
# The markers of the families the issue names, and a few more of the same kinds.
KNOWN = (
    "<start_of_image>",
    "<end_of_image>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<unused12>",
    "<image_soft_token>",
    "<bos>",
    "<eos>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end|>",
    "<|channel|>",
    "<｜begin▁of▁sentence｜>",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
    "[TOOL_CALLS]",
    "<s>",
    "</s>",
    "<fim_prefix>",
    "<file_sep>",
)
# Text that looks a little like a token and must stay as it is.
KEPT = (
    "if a < b and b > c: pass",
    "a <= b, x<y, <div>html</div>, <em>",
    "[x] a link [here](https://example.org) and [INSTALL] notes",
    "| a | b |\n|---|---|\n| <| |",
    "<start here> and <end of story> and <unused> and <|not a token|>",
    "array[0] < array[1]",
)


@pytest.mark.parametrize("token", KNOWN)
def test_every_known_token_is_removed_wherever_it_stands(token: str) -> None:
    assert SPECIAL_TOKEN.fullmatch(token)
    assert strip_special_tokens(f"{token}Hello{token} world{token}") == "Hello world"


@pytest.mark.parametrize("text", KEPT)
def test_text_that_only_looks_like_a_token_is_kept(text: str) -> None:
    assert strip_special_tokens(text) == text
    assert _streamed(text, list(text)) == text  # one character a chunk: held back, then released


def test_the_gemma_answer_of_the_issue_shows_no_marker() -> None:
    answer = "<start_of_image>" * 8 + "The three most important inventions are the wheel, the press and the chip."
    assert strip_special_tokens(answer) == "The three most important inventions are the wheel, the press and the chip."


def test_removing_one_token_cannot_leave_a_new_one() -> None:
    assert strip_special_tokens("<|im_<|im_end|>start|>hi") == "hi"


def _streamed(text: str, chunks: list[str]) -> str:
    """Feed `chunks` through a filter, checking that everything shown so far is the start of the final
    text (so no part of a token was ever shown); returns the text shown."""
    final = strip_special_tokens(text)
    special = SpecialTokenFilter()
    shown = ""
    for chunk in chunks:
        shown += special.feed(chunk)
        assert final.startswith(shown), (shown, final)
    shown += special.flush()
    return shown


def test_a_token_split_across_chunks_is_never_shown_in_part() -> None:
    assert _streamed("".join(SIM.CHUNKS), list(SIM.CHUNKS)) == SIM.SHOWN


def test_any_split_of_any_answer_streams_the_stripped_text() -> None:
    rng = random.Random(20_11)
    pieces = [*KNOWN, *KEPT, "word ", " ", "\n", "<", "[", "|>", "_of_", "<|", "｜>"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 12)))) if len(text) > 1 else []
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert _streamed(text, chunks) == strip_special_tokens(text), chunks
        assert not SPECIAL_TOKEN.search(strip_special_tokens(text))


def test_the_filter_counts_what_it_removed() -> None:
    special = SpecialTokenFilter()
    for chunk in SIM.CHUNKS:
        special.feed(chunk)
    special.flush()
    assert special.removed == 12


# -- through the client, against a real Triton: the fake model answers with special tokens ------


def _spec(server: TritonServer, model: str, protocol: str = "grpc") -> EndpointSpec:
    url = server.grpc_url if protocol == "grpc" else server.http_url
    contract = "vllm" if model.endswith("-stream") else "arena"
    return EndpointSpec(url=url, protocol=protocol, model_name=model, contract=contract)  # type: ignore[arg-type]


@pytest.mark.triton
@pytest.mark.parametrize(
    ("model", "protocol"), [("special-tokens", "grpc"), ("special-tokens", "http"), ("special-tokens-stream", "grpc")]
)
def test_a_model_answering_with_special_tokens_is_answered_without_them(
    triton_server: TritonServer, model: str, protocol: str
) -> None:
    result = generate(_spec(triton_server, model, protocol), "Tell me something.", PARAMS)
    assert result.ok, result.error
    assert result.text == SIM.SHOWN


@pytest.mark.triton
def test_a_battle_pair_shows_neither_sides_tokens(triton_server: TritonServer) -> None:
    left, right = generate_pair(
        _spec(triton_server, "special-tokens"), _spec(triton_server, "special-tokens-stream"), "Hi", PARAMS
    )
    assert left.text == right.text == SIM.SHOWN


@pytest.mark.triton
def test_streamed_chunks_never_carry_a_token_or_part_of_one(triton_server: TritonServer) -> None:
    events: list[StreamEvent] = []
    lock = threading.Lock()

    def on_event(event: StreamEvent) -> None:
        with lock:
            events.append(event)

    left, right = stream_pair(
        _spec(triton_server, "special-tokens-stream"),
        _spec(triton_server, "special-tokens"),
        "Hi",
        "Hi",
        PARAMS,
        on_event,
    )
    assert left.text == right.text == SIM.SHOWN
    for side in (0, 1):
        deltas = [e.delta for e in events if e.side == side]
        assert "".join(deltas) == SIM.SHOWN
        shown = ""
        for delta in deltas:  # as a rater's pane grows: always the start of the final text
            shown += delta
            assert SIM.SHOWN.startswith(shown)
    streamed = [e.delta for e in events if e.side == 0 and not e.done]
    assert len(streamed) >= 5  # it did stream, chunk by chunk


@pytest.mark.triton
def test_a_ratio_judge_that_writes_special_tokens_around_its_reply_is_read(triton_server: TritonServer) -> None:
    # ratio-sim wraps its JSON in <start_of_turn>...<end_of_turn><eos> when told tokens=1.
    call = ratio_judge_call(
        _spec(triton_server, "ratio-sim"),
        attribute="size [[sim noise=0 tokens=1]]",
        question="Which is bigger?",
        instructions="",
        first="big [[true=2.0]]",
        second="small [[true=0.5]]",
        max_tokens=64,
        seed=0,
    )
    assert call.reply.startswith("{") and call.reply.endswith("}"), call.reply
    assert call.verdict.accepted and call.verdict.more == "A"
    assert call.verdict.log_ratio == pytest.approx(1.5, abs=1e-3)
