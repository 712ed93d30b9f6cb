"""Deterministic word n-gram "contestants" for the shipped Triton model repository.

Why these exist: a fresh machine or CI must be able to run real battles through a real Triton
server without downloading weights. Each contestant is a small word n-gram language model over text
that ships with Python itself (the Zen of Python, stdlib docstrings), wrapped in an answer style
(plain paragraphs, markdown with a header, bullets and bold) so that the style features the
platform measures actually vary between contestants.

Triton only treats *folders* of a repository as models, so this plain file at the repository's top
level is shared by every model's `1/model.py` (which loads it by path, without writing bytecode).
It imports nothing from Triton: the Python-backend utilities are passed in, so the generator can be
used and tested outside the server too.

The contract is the one GPU LLM backends use: `text_input` (BYTES [1]) plus optional
`system_prompt`, `max_tokens`, `temperature`, `top_p`, `seed`; outputs `text_output`,
`output_tokens` (whitespace words) and `finish_reason` ("stop" at a natural end, "length" when
`max_tokens` cut the answer).

Determinism: the answer's *plan* (its structure, how many sentences) depends only on the prompt and
system prompt; word *sampling* additionally depends on the seed. So, like a real LLM, temperature 0
(or a tiny top_p) gives the same answer whatever the seed, and the same (seed, prompt, system
prompt, parameters) always gives the same answer.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib
import inspect
import io
import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

BOS = "<s>"
EOS = "</s>"
DEFAULT_MAX_TOKENS = 256
MAX_SENTENCE_WORDS = 32

# Stable, prose-heavy stdlib modules whose docstrings make the "stdlib" corpus.
STDLIB_MODULES = (
    "heapq",
    "bisect",
    "textwrap",
    "string",
    "functools",
    "itertools",
    "collections",
    "contextlib",
    "fractions",
    "statistics",
    "difflib",
    "queue",
    "calendar",
)

_SENTENCE_END = re.compile(r"[.!?]['\")\]]*$")
_WORD = re.compile(r"\S+")


# -- corpora ---------------------------------------------------------------------------------------


def zen_sentences() -> list[list[str]]:
    """The Zen of Python, one aphorism per sentence (from `this.s`, which is rot13-encoded)."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        this = importlib.import_module("this")
    text = codecs.decode(this.s, "rot13")
    lines = [line.strip() for line in text.splitlines()]
    return [line.split() for line in lines[1:] if line]  # line 0 is the title


def _prose_paragraphs(doc: str) -> list[str]:
    """Paragraphs of a docstring that read as prose (drops code examples, tables, signatures)."""
    kept = []
    for para in re.split(r"\n\s*\n", doc):
        lines = para.splitlines()
        if not lines:
            continue
        if any(line.startswith((" ", "\t", ">>>", "...")) or "  #" in line for line in lines):
            continue
        text = " ".join(line.strip() for line in lines)
        words = text.split()
        if len(words) < 6 or not _SENTENCE_END.search(text):
            continue
        alpha = sum(1 for w in words if re.fullmatch(r"[A-Za-z][A-Za-z'-]*[.,;:!?]?", w))
        if alpha / len(words) < 0.7:
            continue
        kept.append(text)
    return kept


def stdlib_sentences(modules: tuple[str, ...] = STDLIB_MODULES) -> list[list[str]]:
    """Sentences from the docstrings of a few stdlib modules and their public callables."""
    paragraphs: list[str] = []
    for name in modules:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module) or ""]
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_") or not callable(obj):
                continue
            if getattr(obj, "__module__", None) not in (name, "_" + name):
                continue
            docs.append(inspect.getdoc(obj) or "")
        for doc in docs:
            paragraphs.extend(_prose_paragraphs(doc))
    sentences: list[list[str]] = []
    for para in paragraphs:
        current: list[str] = []
        for word in para.split():
            current.append(word)
            if _SENTENCE_END.search(word) and len(current) >= 3:
                sentences.append(current)
                current = []
        if len(current) >= 3:
            sentences.append(current)
    return sentences


# -- the language model ----------------------------------------------------------------------------


def _normalise(word: str) -> str:
    return word.strip(".,;:!?\"'()[]{}`*").lower()


class NgramModel:
    """Word n-gram counts with backoff to shorter contexts, down to the unigram distribution."""

    def __init__(self, sentences: list[list[str]], order: int) -> None:
        if order < 1:
            raise ValueError("order must be >= 1")
        self.order = order
        # tables[k] maps a context of k words to Counter(next word); k = 0 .. order-1.
        self.tables: list[dict[tuple[str, ...], Counter[str]]] = [defaultdict(Counter) for _ in range(order)]
        self.frequency: Counter[str] = Counter()
        # Normalised word -> its surface form that most often has a continuation (used as opener).
        self.surface: dict[str, str] = {}
        for sentence in sentences:
            padded = [BOS] * (order - 1) + sentence + [EOS]
            for i in range(order - 1, len(padded)):
                for k in range(order):
                    context = tuple(padded[i - k : i])
                    self.tables[k][context][padded[i]] += 1
            self.frequency.update(sentence)
        self.tables = [dict(t) for t in self.tables]
        best: dict[str, tuple[int, str]] = {}
        for word in sorted(self.frequency):
            follows = self.tables[1].get((word,), Counter()) if order > 1 else Counter()
            score = sum(c for w, c in follows.items() if w != EOS)
            key = _normalise(word)
            if key and (key not in best or score > best[key][0]):
                best[key] = (score, word)
        self.surface = {key: word for key, (_, word) in best.items()}
        self.key_frequency: Counter[str] = Counter()
        for word, count in self.frequency.items():
            self.key_frequency[_normalise(word)] += count

    def candidates(self, context: tuple[str, ...]) -> Counter[str]:
        for k in range(min(len(context), self.order - 1), -1, -1):
            found = self.tables[k].get(tuple(context[len(context) - k :]) if k else ())
            if found:
                return found
        return Counter({EOS: 1})

    def sentence_start(self, rng: random.Random) -> str:
        """A word that starts a sentence in the corpus, drawn in proportion to how often it does."""
        word = sample(self.candidates((BOS,) * (self.order - 1)), rng, 1.0, 1.0)
        return "" if word == EOS else word

    def topic_word(self, prompt: str) -> str | None:
        """The prompt word the model knows that is rarest in its corpus (the most specific one)."""
        best: tuple[int, int, str] | None = None
        for position, raw in enumerate(prompt.split()):
            key = _normalise(raw)
            if len(key) < 3 or key not in self.surface:
                continue
            word = self.surface[key]
            if self.order > 1 and set(self.tables[1].get((word,), {})) <= {EOS}:
                continue  # a word that only ever ends a sentence makes a poor opener
            rank = (self.key_frequency[key], position, word)
            if best is None or rank < best:
                best = rank
        return None if best is None else best[2]

    def sentence(
        self,
        rng: random.Random,
        temperature: float,
        top_p: float,
        first_word: str | None = None,
        seen: set[tuple[str, ...]] | None = None,
    ) -> list[str]:
        """One sentence. `seen` collects the answer's word trigrams: a trigram is never repeated
        (as with `no_repeat_ngram_size=3` in LLM decoding), which keeps greedy decoding from looping
        on a corpus this small."""
        seen = set() if seen is None else seen
        context: list[str] = [BOS] * (self.order - 1)
        words: list[str] = []
        if first_word:
            words.append(first_word[:1].upper() + first_word[1:])
            context.append(first_word)
        while len(words) < MAX_SENTENCE_WORDS:
            counts = self.candidates(tuple(context))
            if len(words) >= 2:
                fresh = Counter({w: c for w, c in counts.items() if (words[-2], words[-1], w) not in seen})
                counts = fresh or Counter({EOS: 1})
            nxt = sample(counts, rng, temperature, top_p)
            if nxt == EOS:
                if words:
                    break
                continue
            if len(words) >= 2:
                seen.add((words[-2], words[-1], nxt))
            words.append(nxt)
            context.append(nxt)
        if words and not _SENTENCE_END.search(words[-1]):
            words[-1] = words[-1].rstrip(",;:") + "."
        return words


def sample(counts: Counter[str], rng: random.Random, temperature: float, top_p: float) -> str:
    """Draw the next word: counts sharpened by temperature, restricted to the top_p nucleus.

    Temperature <= 0 is greedy. The candidate order is fixed (probability, then word) so that the
    draw depends only on the rng state, never on dict order.
    """
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if temperature <= 1e-6 or len(ranked) == 1:
        return ranked[0][0]
    temperature = min(temperature, 10.0)
    top = math.log(ranked[0][1])
    weights = [math.exp((math.log(c) - top) / temperature) for _, c in ranked]
    total = sum(weights)
    p = min(max(top_p, 0.0), 1.0)
    kept, cumulative = 0, 0.0
    for w in weights:
        kept += 1
        cumulative += w / total
        if cumulative >= p - 1e-12:
            break
    weights = weights[:kept]
    draw = rng.random() * sum(weights)
    for (word, _), w in zip(ranked, weights, strict=False):
        draw -= w
        if draw < 0:
            return word
    return ranked[kept - 1][0]


# -- answers ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    prompt: str
    system_prompt: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Answer:
    text: str
    output_tokens: int
    finish_reason: str


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8", "surrogatepass")).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def topic_of(prompt: str, max_words: int = 8) -> str:
    words = prompt.split()[:max_words]
    topic = " ".join(words).strip().rstrip("?!.:;,").lstrip("#>-*+ ").strip()
    topic = topic.replace("`", "").replace("*", "")
    if len(topic) > 1 and topic[0].isupper() and topic[1].islower():
        topic = topic[0].lower() + topic[1:]  # "what is a heap", but keep "SQL joins"
    return topic or "your question"


# Openings and closings are shared by every contestant and drawn with the same probabilities, so how
# an answer starts or ends says nothing about which model wrote it (a fixed opening phrase is the
# classic identity leak of an arena). Each opening restates the prompt's topic, so the first words of
# an answer come from the prompt and the shared pool, not from the model's corpus.
OPENINGS = (
    "Here is a short answer about {topic}.",
    "A few thoughts on {topic} to start with.",
    "Let us look at {topic} step by step.",
    "There are several ways to think about {topic}.",
    "The question of {topic} has a simple core.",
    "To answer {topic}, it helps to start small.",
    "Good question: {topic} is worth a closer look.",
    "When it comes to {topic}, a few points matter.",
    "It is easy to overthink {topic}, so here goes.",
    "My take on {topic} comes down to this.",
    "Start with the basics of {topic} and build up.",
    "Thinking about {topic} starts with one idea.",
    "{Topic} is a fair thing to ask about.",
    "{Topic} can be explained in a few lines.",
)
CLOSINGS = ("In short,", "To sum up,", "Overall,", "All in all,", "The main point:", "Put simply,")
CLOSING_RATE = 0.35


class Contestant:
    """An n-gram model plus an answer-style *tendency*: `plain` (one short paragraph), `paragraphs`
    (longer, two or three paragraphs) or `markdown` (often a section header, bullet lists, bold and now
    and then a code block). The tendencies make the platform's style features vary between
    contestants; none of them is a fixed phrase."""

    STYLES = ("plain", "paragraphs", "markdown")

    def __init__(self, name: str, model: NgramModel, style: str) -> None:
        if style not in self.STYLES:
            raise ValueError(f"unknown style {style!r}; expected one of {self.STYLES}")
        self.name = name
        self.model = model
        self.style = style

    def answer(self, request: Request) -> Answer:
        if request.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {request.max_tokens}")
        plan = _rng(self.name, "plan", request.prompt, request.system_prompt)
        rng = _rng(self.name, "sample", request.seed, request.prompt, request.system_prompt)
        topic = topic_of(request.prompt)
        opener = self.model.topic_word(request.prompt)
        seen: set[tuple[str, ...]] = set()

        def sentence(first: str | None = None) -> str:
            # Sentence openers belong to the plan (prompt-dependent, seed-independent), so greedy
            # decoding still varies its sentences instead of starting each one identically.
            first = first or self.model.sentence_start(plan)
            return " ".join(self.model.sentence(rng, request.temperature, request.top_p, first, seen))

        template = OPENINGS[plan.randrange(len(OPENINGS))]
        opening = template.format(topic=topic, Topic=topic[:1].upper() + topic[1:])
        closing = CLOSINGS[plan.randrange(len(CLOSINGS))] if plan.random() < CLOSING_RATE else None
        if self.style == "plain":
            body = [sentence(opener)] + [sentence() for _ in range(plan.randint(1, 3))]
            text = " ".join([opening, *body])
            if closing:
                text += " " + _closing(closing, sentence())
        elif self.style == "paragraphs":
            first = [sentence(opener)] + [sentence() for _ in range(plan.randint(1, 2))]
            paragraphs = [" ".join([opening, *first])]
            for _ in range(plan.randint(1, 2)):
                paragraphs.append(" ".join(sentence() for _ in range(plan.randint(2, 3))))
            if closing:
                paragraphs[-1] += " " + _closing(closing, sentence())
            text = "\n\n".join(paragraphs)
        else:
            text = self._markdown(opening, opener, closing, plan, sentence)
        return _truncate(text, request.max_tokens)

    def _markdown(
        self, opening: str, opener: str | None, closing: str | None, plan: random.Random, sentence: Any
    ) -> str:
        # The opening paragraph is plain, as every contestant's is; the markup follows it.
        parts = [" ".join([opening, sentence(opener)])]
        if plan.random() < 0.6:
            heading = sentence().rstrip(".!?").split()[: plan.randint(2, 4)]
            parts.append("## " + " ".join(w.strip("*_`#") for w in heading if w.strip("*_`#")))
        detail = sentence().split()
        # Bold the longest word of a sentence: a visible, deterministic bit of emphasis.
        longest = max(range(len(detail)), key=lambda i: (len(detail[i].strip(".,;:")), -i))
        word = detail[longest]
        trail = word[len(word.rstrip(".,;:!?")) :]
        core = word[: len(word) - len(trail)].strip("*_`") or word
        detail[longest] = f"**{core}**{trail}"
        parts.append(" ".join(detail))
        if plan.random() < 0.8:
            parts.append("\n".join(f"- {sentence()}" for _ in range(plan.randint(2, 4))))
        if plan.random() < 0.25:
            words = [w.strip(".,;:!?\"'`*").lower() for w in sentence().split()[:3]]
            name = "_".join(w for w in words if w.isidentifier()) or "example"
            parts.append(f"```python\n{name} = {plan.randint(2, 99)}\n```")
        if closing:
            parts.append(_closing(f"**{closing}**", sentence()))
        return "\n\n".join(parts)


def _closing(lead: str, sentence: str) -> str:
    return f"{lead} {sentence[:1].lower() + sentence[1:]}"


def _truncate(text: str, max_tokens: int) -> Answer:
    """Cut after `max_tokens` whitespace words, keeping the original layout of the kept part."""
    spans = [m.end() for m in _WORD.finditer(text)]
    if len(spans) <= max_tokens:
        return Answer(text=text, output_tokens=len(spans), finish_reason="stop")
    return Answer(text=text[: spans[max_tokens - 1]], output_tokens=max_tokens, finish_reason="length")


def build_contestant(name: str, corpus: str, order: int, style: str) -> Contestant:
    corpora = {
        "zen": zen_sentences,
        "stdlib": stdlib_sentences,
        "zen+stdlib": lambda: zen_sentences() + stdlib_sentences(),
    }
    if corpus not in corpora:
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {sorted(corpora)}")
    return Contestant(name, NgramModel(corpora[corpus](), order), style)


# -- Triton Python-backend glue ----------------------------------------------------------------------


def _scalar(pb_utils: Any, request: Any, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    array = tensor.as_numpy().reshape(-1)
    return array[0] if array.size else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def parse_request(pb_utils: Any, request: Any) -> Request:
    max_tokens = _scalar(pb_utils, request, "max_tokens")
    temperature = _scalar(pb_utils, request, "temperature")
    top_p = _scalar(pb_utils, request, "top_p")
    seed = _scalar(pb_utils, request, "seed")
    return Request(
        prompt=_text(_scalar(pb_utils, request, "text_input")),
        system_prompt=_text(_scalar(pb_utils, request, "system_prompt")),
        max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens),
        temperature=1.0 if temperature is None or not math.isfinite(temperature) else float(temperature),
        top_p=1.0 if top_p is None or not math.isfinite(top_p) else float(top_p),
        seed=0 if seed is None else int(seed),
    )


def respond(pb_utils: Any, contestant: Contestant, request: Any) -> Any:
    """One Triton request -> one InferenceResponse (an error response instead of raising)."""
    import numpy as np

    try:
        answer = contestant.answer(parse_request(pb_utils, request))
    except ValueError as exc:
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc)))
    return pb_utils.InferenceResponse(
        output_tensors=[
            pb_utils.Tensor("text_output", np.array([answer.text.encode("utf-8")], dtype=np.object_)),
            pb_utils.Tensor("output_tokens", np.array([answer.output_tokens], dtype=np.int32)),
            pb_utils.Tensor("finish_reason", np.array([answer.finish_reason.encode()], dtype=np.object_)),
        ]
    )
