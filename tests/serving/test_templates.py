"""Conversations rendered into one `text_input`, checked against each family's documented chat template.

The expected strings are what the models' published Jinja templates (`chat_template` of their
tokenizer_config.json / GGUF metadata) render with `add_generation_prompt=True`, minus the
beginning-of-sequence token, which the serving tokenizer adds itself (see serving/triton/templates.py)."""

from __future__ import annotations

import pytest

from serving.triton.templates import TemplateError, conversation, render

MULTI_TURN = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "What is a heap?"},
]


def test_raw_is_the_last_user_message():
    assert render("What is a heap?", "raw") == "What is a heap?"
    assert render(MULTI_TURN, "raw", system_prompt="Be brief.") == "What is a heap?"


def test_chatml_as_smollm2_renders_it_without_the_default_system_message():
    # SmolLM2-Instruct's template; its default system message (naming the model) is left out on purpose.
    assert render("Hi", "chatml") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert render(MULTI_TURN, "chatml", system_prompt="Be brief.") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
        "<|im_start|>user\nWhat is a heap?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_gemma_puts_the_system_prompt_into_the_first_user_turn_and_calls_the_assistant_model():
    assert render("Hello", "gemma", system_prompt="Be helpful.") == (
        "<start_of_turn>user\nBe helpful.\n\nHello<end_of_turn>\n<start_of_turn>model\n"
    )
    assert render(MULTI_TURN, "gemma") == (
        "<start_of_turn>user\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n"
        "<start_of_turn>user\nWhat is a heap?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert render("  padded \n", "gemma") == "<start_of_turn>user\npadded<end_of_turn>\n<start_of_turn>model\n"


def test_llama3_headers_and_trimmed_contents():
    assert render([{"role": "user", "content": " Hi \n"}], "llama3", system_prompt="Be brief.") == (
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_no_format_writes_a_beginning_of_sequence_token():
    for fmt in ("chatml", "gemma", "llama3"):
        text = render(MULTI_TURN, fmt, system_prompt="Be brief.")  # type: ignore[arg-type]
        assert "<bos>" not in text and "<|begin_of_text|>" not in text


def test_a_conversation_carries_its_own_system_message_unless_one_is_given():
    own = [{"role": "system", "content": "Be brief."}, *MULTI_TURN]
    assert render(own, "chatml") == render(MULTI_TURN, "chatml", system_prompt="Be brief.")
    with pytest.raises(TemplateError, match="system prompt is set too"):
        conversation(own, system_prompt="Be long.")


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "no user message"),
        ([{"role": "assistant", "content": "x"}], "expected 'user'"),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "expected 'assistant'"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "end with a user message"),
        ([{"role": "tool", "content": "a"}], "role 'tool'"),
        ([{"role": "user", "content": 3}], "content is not text"),
    ],
)
def test_malformed_conversations_are_refused(messages, message):
    with pytest.raises(TemplateError, match=message):
        render(messages, "chatml")


def test_unknown_format_is_refused():
    with pytest.raises(TemplateError, match="unknown prompt format"):
        render("x", "alpaca")  # type: ignore[arg-type]
