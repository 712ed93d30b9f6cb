"""Special and control tokens out of answers: a token such as `<start_of_image>` or `<|im_end|>` in the
text a rater reads names the model family as surely as a signature does (Gemma 3 270M once answered with
`<start_of_image>` eight times before the vote).

Why in the client: every answer a rater or a judge sees comes through `client.py` (battles non-streamed
and streamed, battle judges, ratio judges), whatever server produced it: a model server that renders its
tokenizer's special tokens (vLLM and llama.cpp render the ones their tokenizer does not mark "special",
Gemma's image markers among them) cannot be fixed from here, its answers can.

What is removed (`SPECIAL_TOKEN`): the literal markers of the common open model families, and any
`<|name|>` or `<｜name｜>` (the generic form of ChatML, Llama 3, Phi, GPT-OSS, DeepSeek...) whose name
is letters, digits and `_ ▁ . : -`, 48 at most:

- Gemma: `<start_of_turn>`, `<end_of_turn>`, `<start_of_image>`, `<end_of_image>`, any `<start_of_x>` and
  `<end_of_x>`, `<image_soft_token>`, `<unusedN>`, `<bos>`, `<eos>`, `<pad>`, `<unk>`, `<mask>`;
- Llama 2 and Mistral: `<s>`, `</s>`, `[INST]`, `[/INST]`, `<<SYS>>`, `<</SYS>>`, `[AVAILABLE_TOOLS]`,
  `[/AVAILABLE_TOOLS]`, `[TOOL_CALLS]`, `[TOOL_RESULTS]`, `[/TOOL_RESULTS]`, `[SYSTEM_PROMPT]`,
  `[/SYSTEM_PROMPT]`;
- StarCoder and SmolLM: `<fim_prefix>`, `<fim_middle>`, `<fim_suffix>`, `<fim_pad>`, `<file_sep>`,
  `<repo_name>`, `<reponame>`, `<gh_stars>`, `<issue_start>`, `<issue_comment>`, `<issue_closed>`,
  `<jupyter_start>`, `<jupyter_text>`, `<jupyter_code>`, `<jupyter_output>`, `<jupyter_script>`,
  `<empty_output>`, `<commit_before>`, `<commit_msg>`, `<commit_after>`;
- everything of the form `<|...|>`: `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`,
  `<|start_header_id|>`, `<|end|>`, `<|channel|>`...

The price: an answer that writes one of these strings as text (an answer about tokenizers, or HTML's
`<s>` strikethrough) loses it as well; the rule cannot tell a token from its spelling, and a marker that
names a model weighs more than a strikethrough.

A streamed answer may split a token across chunks (`<start_of` then `_image>`): `SpecialTokenFilter`
holds back the end of what has arrived while it could still be the start of a token, and releases it
when the next chunk shows that it is not (or at the end), so the streamed text and the final text are the
same, and no part of a token is ever shown.
"""

from __future__ import annotations

import re

__all__ = ["SPECIAL_TOKEN", "SpecialTokenFilter", "strip_special_tokens"]

_LITERALS: tuple[str, ...] = (
    # Gemma (the <start_of_x>/<end_of_x> family and <unusedN> are patterns below)
    "<image_soft_token>",
    "<bos>",
    "<eos>",
    "<pad>",
    "<unk>",
    "<mask>",
    # Llama 2, Mistral
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_CALLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    # StarCoder, SmolLM
    "<fim_prefix>",
    "<fim_middle>",
    "<fim_suffix>",
    "<fim_pad>",
    "<file_sep>",
    "<repo_name>",
    "<reponame>",
    "<gh_stars>",
    "<issue_start>",
    "<issue_comment>",
    "<issue_closed>",
    "<jupyter_start>",
    "<jupyter_text>",
    "<jupyter_code>",
    "<jupyter_output>",
    "<jupyter_script>",
    "<empty_output>",
    "<commit_before>",
    "<commit_msg>",
    "<commit_after>",
)
_NAME_MAX = 48  # longest name inside a generic <|...|> or <start_of_...> token
_BARS = "|｜"  # ASCII, and the full-width bar of DeepSeek's tokens
_NAME = r"[\w▁.:\-]"  # a token's name: letters, digits, _, SentencePiece's ▁, . : -
_GENERIC = rf"<[{_BARS}]{_NAME}{{1,{_NAME_MAX}}}[{_BARS}]>"
_GEMMA = rf"<(?:start|end)_of_[a-z_]{{1,{_NAME_MAX}}}>|<unused\d{{1,6}}>"

SPECIAL_TOKEN = re.compile(
    "|".join([_GENERIC, _GEMMA, *(re.escape(literal) for literal in sorted(_LITERALS, key=len, reverse=True))])
)

# What a string that could still grow into a token looks like: a prefix of a literal, of a stem below
# followed by the rest of its name, or of a generic <|name|>.
_GENERIC_PREFIX = re.compile(rf"<(?:[{_BARS}]{_NAME}{{0,{_NAME_MAX}}}[{_BARS}]?)?")
_STEMS = (
    ("<start_of_", re.compile(rf"[a-z_]{{0,{_NAME_MAX}}}")),
    ("<end_of_", re.compile(rf"[a-z_]{{0,{_NAME_MAX}}}")),
    ("<unused", re.compile(r"\d{0,6}")),
)
_LONGEST = max(max(len(literal) for literal in _LITERALS), _NAME_MAX + 12)


def _strip(text: str) -> tuple[str, int]:
    removed = 0
    while True:  # until none is left: removing one must not join two halves into a new one that stays
        text, count = SPECIAL_TOKEN.subn("", text)
        if not count:
            return text, removed
        removed += count


def strip_special_tokens(text: str) -> str:
    """`text` without special tokens."""
    return _strip(text)[0]


def _could_grow(tail: str) -> bool:
    """Whether `tail` (starting with < or [) is a proper beginning of some special token."""
    if any(literal.startswith(tail) and literal != tail for literal in _LITERALS):
        return True
    if _GENERIC_PREFIX.fullmatch(tail):
        return True
    for stem, rest in _STEMS:
        if stem.startswith(tail) or (tail.startswith(stem) and rest.fullmatch(tail[len(stem) :])):
            return True
    return False


def _held_from(text: str) -> int:
    """Where the part of `text` that could still become a token begins (len(text): none). A token may
    also form around another one still arriving (`<|` then `<|eot_id|>` then `x|>`: once the inner one is
    removed, the outer one is whole), so a possible beginning right before a held part is held too."""
    held = next(
        (i for i in range(max(0, len(text) - _LONGEST), len(text)) if text[i] in "<[" and _could_grow(text[i:])),
        len(text),
    )
    while True:
        before = next(
            (i for i in range(max(0, held - _LONGEST), held) if text[i] in "<[" and _could_grow(text[i:held])),
            None,
        )
        if before is None:
            return held
        held = before


class SpecialTokenFilter:
    """Special tokens out of a streamed answer, chunk by chunk: `feed(delta)` answers what may be shown
    now, `flush()` the rest at the end. The chunks it answers, joined, are `strip_special_tokens` of the
    deltas joined. `removed` counts the tokens taken out."""

    def __init__(self) -> None:
        self._pending = ""
        self.removed = 0

    def feed(self, delta: str) -> str:
        text, removed = _strip(self._pending + delta)
        self.removed += removed
        held = _held_from(text)
        self._pending = text[held:]
        return text[:held]

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return text
