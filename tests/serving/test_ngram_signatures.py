"""Blindness of the shipped contestants: each keeps a style tendency (so the style features vary) but
no signature — no opening or closing phrase that lets a rater tell the models apart before voting.

The generator is tested directly (no Triton needed): it is the code each model's model.py runs."""

from __future__ import annotations

import importlib.util
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

REPOSITORY = Path(__file__).resolve().parents[2] / "serving" / "model_repository"
SHIPPED = {  # as in each model's config.pbtxt
    "zen-bigram": ("zen", 2, "plain"),
    "stdlib-trigram": ("stdlib", 3, "paragraphs"),
    "docs-markdown": ("zen+stdlib", 2, "markdown"),
}

SUBJECTS = (
    "a hash table",
    "binary search",
    "recursion",
    "public-key cryptography",
    "the water cycle",
    "a closure in programming",
    "database indexes",
    "garbage collection",
    "unit testing",
    "version control",
    "the seasons on Earth",
    "compound interest",
    "a job interview",
    "a weekend hiking trip",
    "code review",
    "naming variables",
    "concurrency and parallelism",
    "a linked list",
    "photosynthesis",
    "inflation",
    "a healthy morning routine",
    "learning a new language",
    "regular expressions",
    "caching",
    "load balancing",
    "the French revolution",
    "climate change",
    "a good cover letter",
    "renting or buying a home",
    "sorting",
)
FORMS = (
    "What is {s}, and why does it matter?",
    "How would you explain {s} to a new colleague?",
    "What are the common mistakes people make with {s}?",
    "Give me a short overview of {s} for beginners.",
    "Why do so many people find {s} confusing at first?",
    "Can you describe {s} in a few clear sentences?",
    "What should I know before I start with {s}?",
)
PROMPTS = [form.format(s=subject) for subject in SUBJECTS for form in FORMS][:200]


@pytest.fixture(scope="module")
def arena_ngram() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arena_ngram", REPOSITORY / "arena_ngram.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["arena_ngram"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def answers(arena_ngram: ModuleType) -> dict[str, list[str]]:
    out = {}
    for name, (corpus, order, style) in SHIPPED.items():
        contestant = arena_ngram.build_contestant(name, corpus, order, style)
        out[name] = [
            contestant.answer(arena_ngram.Request(prompt=p, temperature=0.8, top_p=0.95, seed=i)).text
            for i, p in enumerate(PROMPTS)
        ]
    return out


def _words(text: str) -> list[str]:
    return [w.lower() for w in text.split()]


def test_the_configs_are_the_ones_tested():
    for name, (corpus, order, style) in SHIPPED.items():
        config = (REPOSITORY / name / "config.pbtxt").read_text()
        assert f'string_value: "{corpus}"' in config and f'string_value: "{order}"' in config
        assert f'string_value: "{style}"' in config


def test_no_opening_or_closing_three_words_in_more_than_a_fifth_of_a_models_answers(answers):
    assert len(PROMPTS) == 200
    for name, texts in answers.items():
        openings = Counter(tuple(_words(t)[:3]) for t in texts)
        closings = Counter(tuple(_words(t)[-3:]) for t in texts)
        ((top_open, n_open),) = openings.most_common(1)
        ((top_close, n_close),) = closings.most_common(1)
        assert n_open <= 0.2 * len(texts), (name, top_open, n_open)
        assert n_close <= 0.2 * len(texts), (name, top_close, n_close)


def _most_likely(words: list[str], counts: dict[str, Counter[str]], priors: Counter[str], vocabulary: int) -> str:
    def score(label: str) -> float:
        total = sum(counts[label].values()) + vocabulary
        return math.log(priors[label]) + sum(math.log((counts[label][w] + 1) / total) for w in words)

    return max(counts, key=score)


def _naive_bayes_accuracy(samples: list[tuple[list[str], str]], folds: int = 5) -> float:
    """Multinomial naive Bayes (add-one smoothing) on bags of words, k-fold cross-validated."""
    order = list(range(len(samples)))
    random.Random(0).shuffle(order)
    correct = 0
    for fold in range(folds):
        test = set(order[fold::folds])
        counts: dict[str, Counter[str]] = {}
        priors: Counter[str] = Counter()
        for i, (words, label) in enumerate(samples):
            if i in test:
                continue
            priors[label] += 1
            counts.setdefault(label, Counter()).update(words)
        vocabulary = set().union(*counts.values())
        for i in test:
            words, label = samples[i]
            correct += _most_likely(words, counts, priors, len(vocabulary)) == label
    return correct / len(samples)


def test_a_classifier_on_the_first_ten_words_does_no_better_than_chance_plus_ten_points(answers):
    samples = [(_words(t)[:10], name) for name, texts in answers.items() for t in texts]
    accuracy = _naive_bayes_accuracy(samples)
    chance = 1 / len(answers)
    print(f"first-ten-words classifier accuracy {accuracy:.3f} (chance {chance:.3f})")
    assert accuracy <= chance + 0.10, accuracy


def test_the_classifier_would_catch_a_signature(answers):
    """The test above can fail: the same classifier on answers that carry a fixed opening per model
    (what the contestants did before) tells them apart almost perfectly."""
    signatures = {"zen-bigram": "On the topic:", "stdlib-trigram": "You asked about", "docs-markdown": "## Topic"}
    samples = [(_words(signatures[name] + " " + t)[:10], name) for name, texts in answers.items() for t in texts]
    assert _naive_bayes_accuracy(samples) > 0.9


def test_style_tendencies_still_differ(answers):
    def share(name: str, pattern: str) -> float:
        return sum(bool(re.search(pattern, t, re.MULTILINE)) for t in answers[name]) / len(answers[name])

    assert share("docs-markdown", r"^## \S") >= 0.4
    assert share("docs-markdown", r"^- \S") >= 0.6
    assert share("docs-markdown", r"\*\*\S") >= 0.95
    for plain in ("zen-bigram", "stdlib-trigram"):
        assert share(plain, r"^(#+ |- )") == 0  # (the stdlib corpus itself has a few "**kwargs")
    assert share("stdlib-trigram", r"\n\n") == 1.0
    assert share("zen-bigram", r"\n") == 0
    lengths = {name: sum(len(t.split()) for t in texts) / len(texts) for name, texts in answers.items()}
    assert lengths["stdlib-trigram"] > 1.3 * lengths["zen-bigram"]
