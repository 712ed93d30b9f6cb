"""Style counts and identity signals (serving.analysis): pure functions, no database."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.analysis import (
    IdentitySignals,
    StyleCounts,
    answer_model_mentions,
    identity_signals,
    prompt_asks_identity,
    style_counts,
)

SAMPLE = """# Title

Some **bold** text and `inline code`.

- one
- two __also bold__
  1. nested

```python
# not a header
- not an item
**not bold**
```

    indented code block

Setext heading
==============

| a | b |
|---|---|
| **x** | y |

---
"""


def test_sample_counts_are_exact() -> None:
    # tokens: Title(1) + "Some **bold** text and `inline code`."(6) + one(1) + "two __also bold__"(3)
    # + nested(1) + "Setext heading"(2) + table cells a, b, **x**, y (4) = 18
    assert style_counts(SAMPLE) == StyleCounts(tokens=18, headers=2, list_items=3, bold=3, code_blocks=2)


def test_as_dict_has_the_five_fields_in_order() -> None:
    counts = style_counts(SAMPLE)
    assert counts.as_dict() == {"tokens": 18, "headers": 2, "list_items": 3, "bold": 3, "code_blocks": 2}
    assert list(counts.as_dict()) == ["tokens", "headers", "list_items", "bold", "code_blocks"]


def test_style_counts_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        style_counts("x").tokens = 3  # type: ignore[misc]


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_markdown_inside_fenced_code_counts_only_as_a_code_block(fence: str) -> None:
    text = f"{fence}\n# header\n## another\n- item\n1. item\n**bold** __bold__\nmany words here\n{fence}\n"
    assert style_counts(text) == StyleCounts(tokens=0, headers=0, list_items=0, bold=0, code_blocks=1)


def test_markdown_inside_indented_code_counts_only_as_a_code_block() -> None:
    text = "Intro words.\n\n    # header\n    - item\n    **bold**\n"
    assert style_counts(text) == StyleCounts(tokens=2, headers=0, list_items=0, bold=0, code_blocks=1)


def test_unclosed_fence_swallows_the_rest_like_the_renderer_does() -> None:
    assert style_counts("```\n# h\n- i\n") == StyleCounts(0, 0, 0, 0, 1)


def test_inline_code_is_prose_not_a_block() -> None:
    assert style_counts("Use `**not bold**` here") == StyleCounts(
        tokens=4, headers=0, list_items=0, bold=0, code_blocks=0
    )


def test_raw_html_is_not_markup() -> None:
    # html=False, as in the renderer: the rater sees these as literal text, not as a header/bold.
    counts = style_counts("<h1>Title</h1> <b>bold</b> <ul><li>x</li></ul>")
    assert (counts.headers, counts.bold, counts.list_items) == (0, 0, 0)


def test_plain_text_counts_whitespace_words() -> None:
    assert style_counts("one two\tthree\n four  five") == StyleCounts(5, 0, 0, 0, 0)
    assert style_counts("") == StyleCounts(0, 0, 0, 0, 0)


def test_structure_markers_are_not_words() -> None:
    assert style_counts("# A\n\n- b\n- c\n\n> d\n\n1. e\n").tokens == 5


def test_nested_lists_and_multiple_bold_spans() -> None:
    counts = style_counts("- a\n  - b\n    - c\n- **d** and **e**\n")
    assert (counts.list_items, counts.bold) == (4, 2)


# --------------------------------------------------------------------------------------------------
# Identity


@pytest.mark.parametrize(
    "prompt",
    [
        "Who are you?",
        "who r u",
        "Hi! Who are you and what can you do?",
        "WHO ARE YOU",
        "What model are you?",
        "what LLM is this?",
        "Which language model are you based on?",
        "what kind of AI am I talking to",
        "Which company trained you?",
        "What company made you?",
        "Who created you?",
        "Who is your creator?",
        "Are you GPT-4?",
        "are you chatgpt",
        "Are you Claude or Llama?",
        "Are you made by OpenAI?",
        "What is your name?",
        "What\u2019s your name",
        "whats ur name",
        "What version of GPT are you?",
        "Are you an AI?",
        "Please introduce yourself.",
        "What are you?",
        "Who am I talking to?",
    ],
)
def test_prompt_asks_identity_positives(prompt: str) -> None:
    assert prompt_asks_identity(prompt) is True


@pytest.mark.parametrize(
    "prompt",
    [
        "Who are you voting for in the election?",
        "What are you doing tonight?",
        "What model of car should I buy?",
        "Which model should I use for regression in sklearn?",
        "What is the name of the capital of France?",
        "What's your favourite colour?",
        "Are you able to help me with Python?",
        "Are you sure?",
        "Who made the Eiffel Tower?",
        "Explain a meta-analysis.",
        "Write a poem about llamas.",
        "Whoareyou is a fictional company; describe its logo.",
    ],
)
def test_prompt_asks_identity_negatives(prompt: str) -> None:
    assert prompt_asks_identity(prompt) is False


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("I am ChatGPT, a model trained by OpenAI, based on GPT-4o.", ("ChatGPT", "OpenAI", "GPT")),
        ("I'm Claude, made by Anthropic.", ("Claude", "Anthropic")),
        ("I am Llama 3 from Meta.", ("Llama", "Meta")),
        ("I'm Qwen, created by Alibaba Cloud.", ("Qwen", "Alibaba")),
        ("I am Gemini, a model from Google DeepMind.", ("Gemini", "Google", "DeepMind")),
        ("I am Phi-3 by Microsoft", ("Phi", "Microsoft")),
        ("Yi-34B by 01.AI", ("Yi", "01.AI")),
        ("I am Gemma 2.", ("Gemma",)),
        ("Mistral and Mixtral 8x7B", ("Mistral", "Mixtral")),
        ("SmolLM2 by Hugging Face", ("SmolLM", "Hugging Face")),
        ("Nemotron from NVIDIA", ("Nemotron", "NVIDIA")),
        ("Command R+ by Cohere", ("Command R", "Cohere")),
        ("Grok, by xAI", ("Grok", "xAI")),
        ("I'm DeepSeek-V3.", ("DeepSeek",)),
        ("Falcon-40B is a model.", ("Falcon",)),
        ("Google Bard and PaLM 2", ("Google", "Bard", "PaLM")),
        ("I was trained by Meta.", ("Meta",)),
        ("Claude Sonnet can help", ("Claude",)),
        ("LLaMA-2-7b", ("Llama",)),
    ],
)
def test_answer_model_mentions_positives(answer: str, names: tuple[str, ...]) -> None:
    assert answer_model_mentions(answer) == names


@pytest.mark.parametrize(
    "answer",
    [
        "A meta-analysis pools the results of several studies.",
        "Add meta tags to the page head.",
        "Claude Shannon founded information theory; Claude Monet painted water lilies.",
        "Jean-Claude Van Damme starred in it.",
        "The phi coefficient measures association; phi is also the golden ratio.",
        "Llamas are camelids, and a llama can spit.",
        "Use a GPT partition table instead of MBR.",
        "SpaceX's Falcon 9 landed; a falcon is a bird.",
        "The anthropic principle is controversial.",
        "Shakespeare is known as the Bard.",
        "Sit under a palm tree and grok the mistral wind.",
        "The parts cohere into a whole.",
        "Yi means one in Chinese.",
        "Here is a plain answer about photosynthesis.",
    ],
)
def test_answer_model_mentions_negatives(answer: str) -> None:
    assert answer_model_mentions(answer) == ()


def test_mentions_are_deduplicated_in_order_of_first_appearance() -> None:
    assert answer_model_mentions("Anthropic made Claude. Anthropic, again, and OpenAI.") == (
        "Anthropic",
        "Claude",
        "OpenAI",
    )


def test_identity_signals_combines_prompt_and_answer() -> None:
    assert identity_signals("Who are you?", "I'm Claude, made by Anthropic.") == IdentitySignals(
        prompt_asks_identity=True, answer_names_model=True, names=("Claude", "Anthropic")
    )
    assert identity_signals("Who are you?", "I am a helpful assistant.") == IdentitySignals(
        prompt_asks_identity=True, answer_names_model=False, names=()
    )
    assert identity_signals("Sum 2 and 2", "It is 4, as GPT-4 would say.") == IdentitySignals(
        prompt_asks_identity=False, answer_names_model=True, names=("GPT",)
    )


_MENTION_FRAGMENTS = [
    "OpenAI",
    "open ai",
    "ChatGPT",
    "GPT-4o",
    "GPT partition table",
    "o3-mini",
    "Anthropic",
    "anthropic principle",
    "Claude",
    "Claude Shannon",
    "Google",
    "DeepMind",
    "Gemini",
    "the Bard",
    "Bard",
    "PaLM 2",
    "Gemma 2",
    "meta-analysis",
    "by Meta",
    "Meta AI",
    "Llama 3",
    "llama",
    "Mistral",
    "MIXTRAL",
    "qwen2.5",
    "Alibaba",
    "Deep Seek",
    "Microsoft Phi",
    "Phi-3",
    "phi coefficient",
    "Cohere",
    "Command R+",
    "Falcon-40B",
    "Falcon 9",
    "Grok-2",
    "xAI",
    "SmolLM2",
    "Hugging Face",
    "nvidia",
    "Nemotron",
    "Yi-34B",
    "01.AI",
    "M\u0131crosoft",
    "\u0130nvidia",
    "Mi\u017ftral",
    "plain words",
    "and",
    "\u2019s",
    "-",
    " ",
    "\n",
    "**",
    "#",
]


def _mentions_without_keywords(answer: str) -> tuple[str, ...]:
    from serving.analysis import _MODEL_PATTERNS, _normalise_quotes

    text = _normalise_quotes(answer)
    found = sorted((m.start(), name) for name, p in _MODEL_PATTERNS if (m := p.search(text)) is not None)
    return tuple(name for _, name in found)


@given(st.lists(st.sampled_from(_MENTION_FRAGMENTS), max_size=12).map(" ".join))
def test_the_keyword_prefilter_never_changes_what_mentions_find(answer: str) -> None:
    # Each pattern runs only where its keyword occurs: a shortcut, which must give what every pattern gives.
    assert answer_model_mentions(answer) == _mentions_without_keywords(answer)
