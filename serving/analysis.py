"""Answer analysis at write time: style counts and identity signals (DESIGN.md §3 step 3).

Pure Python, no Django: the vote log stores what these functions return, and the style-controlled
leaderboard regresses on the differences of the style counts between the two sides.

Style counts come from markdown-it-py's token stream, parsed with the same configuration the rater
page renders with (CommonMark plus GFM tables and strikethrough, raw HTML treated as text), so a
header counts exactly when the rater saw a header.

Identity signals are heuristics built from regular expressions; see the notes on
``prompt_asks_identity`` and ``answer_model_mentions`` for what they do and do not catch.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from markdown_it import MarkdownIt

__all__ = [
    "IdentitySignals",
    "StyleCounts",
    "answer_model_mentions",
    "identity_signals",
    "prompt_asks_identity",
    "style_counts",
]

# Same options as battles.rendering so counts describe what the rater was shown.
_PARSER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


# ---------------------------------------------------------------------------------------------------
# Style counts


@dataclass(frozen=True, slots=True)
class StyleCounts:
    """Markdown style of one answer.

    tokens:      whitespace-separated words of the answer's prose, i.e. of every inline text run
                 (paragraphs, headings, list items, table cells, block quotes) and NOT of code
                 blocks. Markup that markdown consumes as structure (``#``, ``-``, ``1.``, ``>``,
                 table pipes, ``---`` rules, fence lines) is not counted; markup that stays glued to
                 words (``**bold**``) does not add words. Inline code (`` `x` ``) is prose and counts.
                 This is a length measure, not the model's tokenizer count (that is recorded
                 separately as output tokens by serving).
    headers:     ATX (``# x``) and setext (``x\\n===``) headings, outside code blocks.
    list_items:  items of bullet and ordered lists (nested items count too), outside code blocks.
    bold:        strong emphasis spans (``**x**`` or ``__x__``), outside code blocks.
    code_blocks: fenced (```` ``` ````/``~~~``) plus indented code blocks. Inline code is not a block.
    """

    tokens: int
    headers: int
    list_items: int
    bold: int
    code_blocks: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def style_counts(text: str) -> StyleCounts:
    """Count the markdown style features of ``text`` (see ``StyleCounts`` for the definitions).

    The contents of fenced and indented code blocks are opaque to the markdown parser, so a ``#``
    or ``- item`` or ``**x**`` inside one is never a header, list item or bold span, and its words
    are not counted as tokens either.
    """
    tokens = headers = list_items = bold = code_blocks = 0
    for token in _PARSER.parse(text):
        if token.type == "heading_open":
            headers += 1
        elif token.type == "list_item_open":
            list_items += 1
        elif token.type in ("fence", "code_block"):
            code_blocks += 1
        elif token.type == "inline":
            tokens += len(token.content.split())
            bold += sum(1 for child in token.children or () if child.type == "strong_open")
    return StyleCounts(tokens=tokens, headers=headers, list_items=list_items, bold=bold, code_blocks=code_blocks)


# ---------------------------------------------------------------------------------------------------
# Identity signals


@dataclass(frozen=True, slots=True)
class IdentitySignals:
    """Whether a battle may reveal who is who: the prompt asks, or an answer names a model/vendor."""

    prompt_asks_identity: bool
    answer_names_model: bool
    names: tuple[str, ...]


def _normalise_quotes(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("\u02bc", "'")


# Model and vendor names in the order used for canonical output. Each pattern is tuned against the
# common false positives named beside it. Case-sensitive where the lower-case word means something
# else (cohere, mistral, grok, llama the animal, palm, anthropic the adjective).
_I = re.IGNORECASE
_MODEL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, flags))
    for name, pattern, flags in (
        ("OpenAI", r"\bOpen\s?AI\b", _I),
        ("ChatGPT", r"\bChat\s?GPT\b", _I),
        # GPT-3, GPT-3.5, GPT-4, GPT-4o, GPT4, GPT-J, GPT-NeoX; not the GUID partition table.
        (
            "GPT",
            r"(?<!MBR/)(?<!MBR )(?<!MBR or )\bGPT(?:-?[1-9](?:\.\d)?[a-z]?|-J|-Neo(?:X)?)?\b"
            r"(?!\s+(?:partition|disk|drive|header|scheme|table)s?\b)",
            0,
        ),
        ("o1/o3", r"\bo[13]-(?:mini|preview|pro)\b", 0),
        # "anthropic principle" / "anthropic reasoning" are not the company.
        ("Anthropic", r"\bAnthropic\b(?!\s+(?:principle|bias|reasoning|argument)s?\b)", 0),
        # Claude the model, not Claude Shannon / Monet / Debussy or Jean-Claude.
        ("Claude", r"(?<![-\w])Claude\b(?!\s+(?!(?:Sonnet|Opus|Haiku|Instant|Code|AI)\b)[A-Z][a-zà-ÿ])", 0),
        ("Google", r"\bGoogle\b", 0),
        ("DeepMind", r"\bDeep\s?Mind\b", _I),
        ("Gemini", r"\bGemini\b", 0),
        ("Bard", r"(?<!\bthe )(?<!\bThe )\bBard\b", 0),  # "the Bard" is Shakespeare
        ("PaLM", r"\bPaLM(?:[- ]?2)?\b", 0),
        ("Gemma", r"\b(?:Code)?Gemma(?:[- ]?\d|\s+(?:model|LLM)s?\b)|\bGoogle'?s?\s+Gemma\b", 0),
        # "meta-analysis", "meta tags", "the meta description": require an unambiguous context.
        ("Meta", r"\bMeta(?:\s+(?:AI|Platforms|Llama)\b|'s\b)|\b(?:by|from|at|of|with)\s+Meta\b(?![-\w])", 0),
        # LLaMA / Llama 3 / Llama-2-7b; the lower-case animal is not matched.
        ("Llama", r"\b(?:LLaMA|Llama|LLAMA)(?:[- ]?\d(?:\.\d)?)?\b", 0),
        ("Mistral", r"\bMistral\b", 0),
        ("Mixtral", r"\bMixtral\b", _I),
        ("Qwen", r"\bQwen(?:\d(?:\.\d)?)?\b", _I),
        ("Alibaba", r"\bAlibaba\b", _I),
        ("DeepSeek", r"\bDeep\s?Seek\b", _I),
        ("Microsoft", r"\bMicrosoft\b", _I),
        # Phi-2 / Phi-3.5 / Microsoft Phi; not the Greek letter, golden ratio or phi coefficient.
        ("Phi", r"\bPhi-?[1-4](?:\.\d)?(?![\d.]*\s*coefficient)\b|\bMicrosoft(?:'s)?\s+Phi\b", 0),
        ("Cohere", r"\bCohere\b", 0),  # "cohere" the verb is lower-case
        ("Command R", r"\bCommand[- ]R\b\+?", 0),
        # Falcon-40B, Falcon 180B, Falcon 2/3, Falcon Mamba; not the bird nor Falcon 9 / Heavy.
        ("Falcon", r"\bFalcon(?:[- ]?\d+(?:\.\d+)?B\b|[- ](?:Mamba|LLM)\b|[- ][23]\b)", _I),
        ("Grok", r"\bGrok(?:[- ]?\d)?\b", 0),  # "to grok" is lower-case
        ("xAI", r"\bxAI\b", 0),
        ("SmolLM", r"\bSmolLM\d?\b", _I),
        ("Hugging Face", r"\bHugging\s?Face\b", _I),
        ("NVIDIA", r"\bNVIDIA\b", _I),
        ("Nemotron", r"\bNemotron\b", _I),
        # Yi-34B, Yi-Large, Yi 1.5; "yi" alone is a Chinese word and a surname.
        ("Yi", r"\bYi[- ](?:\d|Large|Lightning|Coder|VL)", 0),
        ("01.AI", r"(?<![\w.])01[.-]AI\b", _I),
    )
)


# A word each pattern cannot match without (lower case): a pattern runs only on text that contains its
# word, so an answer naming no model costs a few substring scans instead of every regex (shadow battles
# are analysed by the thousand per request). A necessary condition only: the patterns still decide.
_MODEL_KEYWORDS: dict[str, tuple[str, ...]] = {
    "OpenAI": ("open",),
    "ChatGPT": ("chat",),
    "GPT": ("gpt",),
    "o1/o3": ("o1-", "o3-"),
    "Anthropic": ("anthropic",),
    "Claude": ("claude",),
    "Google": ("google",),
    "DeepMind": ("deep",),
    "Gemini": ("gemini",),
    "Bard": ("bard",),
    "PaLM": ("palm",),
    "Gemma": ("gemma",),
    "Meta": ("meta",),
    "Llama": ("llama",),
    "Mistral": ("mistral",),
    "Mixtral": ("mixtral",),
    "Qwen": ("qwen",),
    "Alibaba": ("alibaba",),
    "DeepSeek": ("deep",),
    "Microsoft": ("microsoft",),
    "Phi": ("phi",),
    "Cohere": ("cohere",),
    "Command R": ("command",),
    "Falcon": ("falcon",),
    "Grok": ("grok",),
    "xAI": ("xai",),
    "SmolLM": ("smollm",),
    "Hugging Face": ("hugging",),
    "NVIDIA": ("nvidia",),
    "Nemotron": ("nemotron",),
    "Yi": ("yi",),
    "01.AI": ("01",),
}


def _keyword_text(text: str) -> str:
    # What a case-insensitive regex treats as these letters: str.lower(), plus the few characters that
    # re.IGNORECASE matches to an ASCII letter but lower() does not map to it (dotless i, long s; the
    # dotted capital I lowers to i + a combining dot).
    return text.lower().replace("\u0131", "i").replace("\u017f", "s").replace("\u0307", "")


def answer_model_mentions(answer: str) -> tuple[str, ...]:
    """Canonical names of the vendors and models ``answer`` mentions, in order of first appearance.

    A mention is not a claim: "search it on Google" counts as a Google mention. The patterns avoid
    the common false positives listed in the table above (meta-analysis, the phi coefficient,
    Claude Shannon, llama the animal, GPT partition tables, Falcon 9, "the Bard"...), and in
    exchange miss some genuine but unusual spellings (lower-case "llama 3", a bare "Yi", "Phi"
    without a version number, "meta" in lower case). Zodiac "Gemini" is still a false positive.
    """
    text = _normalise_quotes(answer)
    lowered = _keyword_text(text)
    found: list[tuple[int, str]] = []
    for name, pattern in _MODEL_PATTERNS:
        if not any(word in lowered for word in _MODEL_KEYWORDS[name]):
            continue
        match = pattern.search(text)
        if match is not None:
            found.append((match.start(), name))
    found.sort()
    return tuple(name for _, name in found)


_YOU = r"(?:you|u|ya|yourself)"
_MAKE_VERB = (
    r"(?:made|make|created|create|built|build|trained|train|developed|develop|designed|design|"
    r"programmed|program|wrote|owns|own|runs|run|powers|power|invented|produced)"
)
_WHAT = r"(?:what|which|wat|wut)"
_AI_NOUN = (
    r"(?:ai|a\.i\.|ai\s+model|model|llm|large\s+language\s+model|language\s+model|chat\s?bot|bot|"
    r"assistant|version|system|neural\s+network|gpt|company|organi[sz]ation|lab|vendor|team|"
    r"corporation|firm|people)"
)
_NAMES = (
    r"(?:chat\s?gpt|gpt[-\s]?\d?(?:\.\d)?o?|claude|llama|gemini|bard|palm|mistral|mixtral|qwen|"
    r"deepseek|phi(?:-?\d)?|gemma|grok|falcon|copilot|bing|command[- ]r|smollm\d?|nemotron|yi)"
)

_IDENTITY_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # "who are you?", "who are you, really", "hi! who are you and what can you do"
        rf"\bwho\s+(?:exactly\s+|really\s+)?(?:are|r)\s+{_YOU}\b"
        r"(?=\s*(?:[?.!,;:)]|$|and\b|exactly\b|really\b|anyway\b|again\b))",
        # "who made you", "who trained you", "who is your creator"
        rf"\bwho\s+{_MAKE_VERB}\s+{_YOU}\b",
        r"\bwho\s+(?:is|are|'s)\s+(?:your|ur)\s+(?:creator|maker|developer|author|owner|vendor|"
        r"parent\s+company|company)s?\b",
        # "what model are you", "which company trained you", "what LLM is this",
        # "what kind of AI am I talking to", "which language model are you based on"
        rf"\b{_WHAT}\s+(?:kind\s+of\s+|type\s+of\s+|sort\s+of\s+)?{_AI_NOUN}\s+"
        rf"(?:(?:are|r)\s+{_YOU}\b|is\s+this\b|am\s+i\s+(?:talking|speaking|chatting)\b|"
        rf"{_MAKE_VERB}\s+{_YOU}\b|(?:are\s+)?{_YOU}\s+(?:based|running|built|powered|using|made|trained)\b|"
        rf"do\s+{_YOU}\s+(?:run|use)\b|is\s+behind\s+{_YOU}\b)",
        # "what version of GPT are you"
        rf"\bwhat\s+version\s+of\s+\S+\s+(?:are|r)\s+{_YOU}\b",
        # "what is your name", "what's your name", "tell me your model name", "do you have a name"
        r"\b(?:what\s*'?\s*s|what\s+is|whats|tell\s+me)\s+(?:your|ur)\s+(?:real\s+|actual\s+)?"
        r"(?:name|model(?:\s+name)?|identity|version)\b",
        rf"\bdo\s+{_YOU}\s+have\s+a\s+name\b",
        rf"\bwhat\s+(?:are|r)\s+{_YOU}\s+called\b",
        # "are you ChatGPT", "are you GPT-4?", "r u claude", "are you made by OpenAI"
        rf"\b(?:are|r)\s+{_YOU}\s+(?:a\s+|an\s+)?(?:version\s+of\s+)?{_NAMES}\b",
        rf"\b(?:are|r)\s+{_YOU}\s+(?:{_MAKE_VERB}|based\s+on|powered)\b\s*(?:by|on|from)?\s*"
        r"(?:open\s?ai|anthropic|google|meta|microsoft|mistral|alibaba|deepseek|hugging\s?face|nvidia|"
        rf"x\.?ai|cohere|{_NAMES})\b",
        # "are you an AI / a bot / a language model / a human?"
        rf"\b(?:are|r)\s+{_YOU}\s+(?:a\s+|an\s+)?(?:ai|a\.i\.|bot|chat\s?bot|robot|human|person|"
        r"real\s+person|language\s+model|llm|machine)\s*(?:[?.!,]|$|or\b)",
        # "what are you?" (but not "what are you doing")
        rf"\bwhat\s+(?:exactly\s+)?(?:are|r)\s+{_YOU}\s*(?:[?!.]|$)",
        r"\b(?:introduce|describe)\s+yourself\b",
        r"\btell\s+me\s+(?:a\s+bit\s+|a\s+little\s+)?about\s+yourself\b",
        r"\bwho\s+am\s+i\s+(?:talking|speaking|chatting)\s+(?:to|with)\b",
    )
)


def prompt_asks_identity(prompt: str) -> bool:
    """Whether ``prompt`` asks the model who or what it is, or who made it.

    Case-insensitive, word-boundary regexes over a list of common English phrasings ("who are you",
    "what model are you", "which company trained you", "are you GPT-4", "what is your name",
    "introduce yourself", "are you an AI"...). A heuristic: it misses paraphrases and other
    languages, and "who are you" only counts when the question ends there (so "who are you
    voting for" does not).
    """
    text = _normalise_quotes(prompt)
    return any(pattern.search(text) for pattern in _IDENTITY_PATTERNS)


def identity_signals(prompt: str, answer: str) -> IdentitySignals:
    """Identity signals of one side of a battle: the prompt's question and this answer's names."""
    names = answer_model_mentions(answer)
    return IdentitySignals(
        prompt_asks_identity=prompt_asks_identity(prompt),
        answer_names_model=bool(names),
        names=names,
    )
