"""Render a conversation into the one `text_input` string a text-generation backend takes.

Why this exists: Triton's vLLM backend and the TensorRT-LLM ensemble take raw text (`text_input`)
and apply no chat template of their own, so a multi-turn battle (or a system prompt) has to reach
them already rendered in the model's own template. The renderer is pure (no Django, no tritonclient)
so that it can be tested against each model family's documented template.

Formats (the endpoint's `prompt_format`):

- `raw`: the last user message as it is; the system prompt, if any, is not part of the text (the
  project's own contract sends it in its `system_prompt` tensor; the GPU contracts have none, and
  the client refuses to drop it silently). Earlier turns are not sent.
- `chatml`: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, then `<|im_start|>assistant\\n`
  (SmolLM2-Instruct, Qwen). SmolLM2's own template inserts a default system message naming the model
  ("... named SmolLM, trained by Hugging Face") when none is given; it is left out on purpose: a
  model told its name answers "who are you" with it, which would unblind the battle.
- `gemma`: `<start_of_turn>user\\n{content}<end_of_turn>\\n`, assistant turns as `model`, then
  `<start_of_turn>model\\n` (Gemma 2 / 3). Gemma has no system role: as its template does, the system
  prompt is prepended to the first user turn, followed by a blank line; contents are trimmed.
- `llama3`: `<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>` per message (content
  trimmed), then `<|start_header_id|>assistant<|end_header_id|>\\n\\n` (Llama 3 Instruct).

No format writes the beginning-of-sequence token (`<bos>`, `<|begin_of_text|>`): vLLM and the
TensorRT-LLM preprocessing tokenise `text_input` with the tokenizer's special tokens on, which adds it;
writing it too would give the model two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

__all__ = ["PROMPT_FORMATS", "Message", "PromptFormat", "TemplateError", "conversation", "render"]

PromptFormat = Literal["raw", "chatml", "gemma", "llama3"]
PROMPT_FORMATS: tuple[PromptFormat, ...] = ("raw", "chatml", "gemma", "llama3")
ROLES = ("system", "user", "assistant")

Message = Mapping[str, str]


class TemplateError(ValueError):
    """The conversation cannot be rendered (unknown role, turns out of order, an unknown format)."""


def conversation(prompt: str | Sequence[Message], system_prompt: str = "") -> list[dict[str, str]]:
    """The conversation as a checked list of {"role", "content"}: a plain prompt is one user turn; the
    system prompt (the battle's shared one) goes first. A list may carry its own leading system message
    only when no system prompt is given, so that both sides can never get two different ones."""
    if isinstance(prompt, str):
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    else:
        messages = []
        for index, message in enumerate(prompt):
            role, content = message.get("role"), message.get("content")
            if role not in ROLES:
                raise TemplateError(f"message {index}: role {str(role)[:20]!r} is not one of {ROLES}")
            if not isinstance(content, str):
                raise TemplateError(f"message {index}: content is not text")
            messages.append({"role": role, "content": content})
    if system_prompt:
        if messages and messages[0]["role"] == "system":
            raise TemplateError("the conversation has a system message and a system prompt is set too")
        messages.insert(0, {"role": "system", "content": system_prompt})
    turns = messages[1:] if messages and messages[0]["role"] == "system" else messages
    if not turns:
        raise TemplateError("the conversation has no user message")
    for index, message in enumerate(turns):
        expected = "user" if index % 2 == 0 else "assistant"
        if message["role"] != expected:
            raise TemplateError(f"turn {index} is {message['role']!r}, expected {expected!r} (user first, alternating)")
    if turns[-1]["role"] != "user":
        raise TemplateError("the conversation must end with a user message")
    return messages


def render(prompt: str | Sequence[Message], fmt: PromptFormat, system_prompt: str = "") -> str:
    """`text_input` for a prompt or a conversation in the format `fmt` (see the module docstring)."""
    messages = conversation(prompt, system_prompt)
    system = messages[0]["content"] if messages[0]["role"] == "system" else None
    turns = messages[1:] if system is not None else messages
    if fmt == "raw":
        return turns[-1]["content"]
    if fmt == "chatml":
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + (
            "<|im_start|>assistant\n"
        )
    if fmt == "gemma":
        parts = []
        for index, message in enumerate(turns):
            role = "model" if message["role"] == "assistant" else "user"
            prefix = f"{system}\n\n" if index == 0 and system is not None else ""
            parts.append(f"<start_of_turn>{role}\n{prefix}{message['content'].strip()}<end_of_turn>\n")
        return "".join(parts) + "<start_of_turn>model\n"
    if fmt == "llama3":
        return "".join(
            f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content'].strip()}<|eot_id|>" for m in messages
        ) + ("<|start_header_id|>assistant<|end_header_id|>\n\n")
    raise TemplateError(f"unknown prompt format {str(fmt)[:20]!r}; expected one of {PROMPT_FORMATS}")
