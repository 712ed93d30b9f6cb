"""Prompt validation, normalisation, hashing and classification (battles.prompting)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from battles.prompting import (
    CATEGORIES,
    LANGUAGES,
    PROMPT_MAX_CHARS,
    UNDETERMINED_LANGUAGE,
    prompt_classify,
    prompt_hash,
    prompt_normalise,
    prompt_validate,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------------
# Validation


def test_validate_strips_and_returns_text() -> None:
    assert prompt_validate("  Hello there \n") == "Hello there"


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", "\u3000\u00a0"])
def test_validate_rejects_empty_and_whitespace(text: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        prompt_validate(text)


def test_validate_length_limit_is_inclusive_and_counted_after_stripping() -> None:
    assert PROMPT_MAX_CHARS == 8000
    assert prompt_validate("x" * PROMPT_MAX_CHARS) == "x" * PROMPT_MAX_CHARS
    assert prompt_validate("  " + "x" * PROMPT_MAX_CHARS + "\n") == "x" * PROMPT_MAX_CHARS
    with pytest.raises(ValueError, match=r"too long: 8001 characters, the maximum is 8000"):
        prompt_validate("x" * (PROMPT_MAX_CHARS + 1))


def test_validate_rejects_nul_and_non_strings() -> None:
    with pytest.raises(ValueError, match="NUL"):
        prompt_validate("a\x00b")
    with pytest.raises(ValueError, match="text"):
        prompt_validate(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Normalisation and hashing


def test_normalise_collapses_case_whitespace_and_compatibility_forms() -> None:
    assert prompt_normalise("  Hello \t\n  World  ") == "hello world"
    assert prompt_normalise("\uff28\uff25\uff2c\uff2c\uff2f") == "hello"  # full-width letters
    assert prompt_normalise("Stra\u00dfe") == prompt_normalise("STRASSE")  # casefold, not lower
    assert prompt_normalise("\ufb01ne") == "fine"  # ligature
    assert prompt_normalise("a\u00a0\u2003b") == "a b"  # no-break and em spaces


@pytest.mark.parametrize(
    "variant",
    ["Hello  World", " hello world\n", "HELLO\tWORLD", "\uff28ello world", "hello\u00a0world"],
)
def test_hash_ignores_case_whitespace_and_width(variant: str) -> None:
    assert prompt_hash(variant) == prompt_hash("hello world")


def test_hash_is_sha256_hex_of_the_normalised_text() -> None:
    import hashlib

    assert prompt_hash(" Hello  World") == hashlib.sha256(b"hello world").hexdigest()
    assert len(prompt_hash("x")) == 64


@pytest.mark.parametrize(
    ("a", "b"),
    [("hello world", "hello, world"), ("helloworld", "hello world"), ("2+2", "2 + 2"), ("café", "cafe")],
)
def test_hash_distinguishes_different_text(a: str, b: str) -> None:
    assert prompt_hash(a) != prompt_hash(b)


@given(st.text(max_size=200))
def test_normalise_is_idempotent_and_hash_follows_it(text: str) -> None:
    once = prompt_normalise(text)
    assert prompt_normalise(once) == once
    assert prompt_hash(text) == prompt_hash(once)


# --------------------------------------------------------------------------------------------------
# Classification

CATEGORY_EXAMPLES = {
    "coding": [
        "Write a Python function that reverses a linked list.",
        "Why does this code throw a TypeError?\n```js\nconst x = null; x.foo();\n```",
        "How do I write a SQL query to find duplicate rows?",
        "Fix the bug in my Rust program: it panics on an empty vector.",
    ],
    "math": [
        "Solve the equation 3x + 5 = 20.",
        "What is the derivative of x^2 * sin(x)?",
        "What is 17 * 23?",
        "Prove that there are infinitely many prime numbers.",
    ],
    "writing": [
        "Write a poem about the sea.",
        "Compose a short story about a dragon who loves tea.",
        "Draft a cover letter for a junior data analyst position.",
        "Rewrite this paragraph to sound more formal: hey guys, meeting's moved.",
    ],
    "knowledge": [
        "What is the capital of Australia?",
        "Who was the first president of the United States?",
        "Explain how photosynthesis works.",
        "When did the Roman Empire fall?",
    ],
    "reasoning": [
        "Here is a riddle: what has keys but can't open locks?",
        "Sally has 3 brothers. Each brother has 2 sisters. How many sisters does Sally have?",
        "Which is heavier, a kilogram of feathers or a kilogram of steel?",
        "If all bloops are razzies and all razzies are lazzies, then are all bloops lazzies?",
    ],
    "advice": [
        "Should I quit my job to start a business?",
        "How can I improve my sleep?",
        "My boss keeps taking credit for my work. What would you do?",
        "Is it worth buying a used car or leasing?",
    ],
    "other": ["Hello!", "asdf qwerty", "Let's play a game.", "Thanks"],
}


@pytest.mark.parametrize(
    ("text", "category"),
    [(text, category) for category, texts in CATEGORY_EXAMPLES.items() for text in texts],
)
def test_category_examples(text: str, category: str) -> None:
    assert prompt_classify(text)[0] == category


def test_categories_tuple_is_fixed() -> None:
    assert CATEGORIES == ("coding", "math", "writing", "knowledge", "reasoning", "advice", "other")


def test_category_ties_break_by_categories_order_not_by_position() -> None:
    # "poem" scores writing 3 and "riddle" scores reasoning 3: writing comes first in CATEGORIES.
    assert prompt_classify("poem riddle")[0] == "writing"
    assert prompt_classify("riddle poem")[0] == "writing"


LANGUAGE_EXAMPLES = {
    "en": "What is the best way to learn a new language as an adult?",
    "de": "Wie kann ich meine Wohnung im Winter warm halten, ohne viel Geld auszugeben?",
    "fr": "Quelle est la meilleure façon d'apprendre une nouvelle langue à l'âge adulte ?",
    "es": "¿Cuál es la mejor manera de aprender un idioma nuevo cuando eres adulto?",
    "it": "Qual è il modo migliore per imparare una nuova lingua da adulto?",
    "pt": "Qual é a melhor maneira de aprender uma nova língua quando se é adulto?",
    "nl": "Wat is de beste manier om als volwassene een nieuwe taal te leren?",
    "zh": "学习一门新语言最好的方法是什么？",
    "ja": "大人になってから新しい言語を学ぶ最良の方法は何ですか？",
    "ko": "성인이 새로운 언어를 배우는 가장 좋은 방법은 무엇입니까?",
    "ru": "Как лучше всего выучить новый язык во взрослом возрасте?",
    "ar": "ما هي أفضل طريقة لتعلم لغة جديدة كشخص بالغ؟",
}

MORE_LANGUAGE_EXAMPLES = [
    ("en", "Write a Python function that reverses a linked list."),
    ("en", "Can you explain why the sky is blue?"),
    ("de", "Erkläre mir bitte, wie ein Kühlschrank funktioniert."),
    ("fr", "Pourquoi le ciel est-il bleu ? C'est une question que je me pose."),
    ("es", "¿Por qué el cielo es azul? Explícalo de forma sencilla."),
    ("it", "Perché il cielo è blu? Spiegalo in modo semplice per un bambino."),
    ("pt", "Por que o céu é azul? Explique de forma simples para uma criança."),
    ("nl", "Waarom is de lucht blauw? Leg het eenvoudig uit voor een kind."),
    ("ja", "なぜ空は青いのですか"),
    ("zh", "为什么天空是蓝色的"),
]


@pytest.mark.parametrize(("language", "text"), list(LANGUAGE_EXAMPLES.items()) + MORE_LANGUAGE_EXAMPLES)
def test_language_examples(language: str, text: str) -> None:
    assert prompt_classify(text)[1] == language


@pytest.mark.parametrize("text", ["", "ok", "42", "x = f(y)", "🙂🙂🙂", "Hallo Bonjour Hola"])
def test_language_is_und_when_unsure(text: str) -> None:
    assert prompt_classify(text)[1] == UNDETERMINED_LANGUAGE


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_classify_is_total_and_deterministic(text: str) -> None:
    category, language = prompt_classify(text)
    assert category in CATEGORIES
    assert language in LANGUAGES or language == UNDETERMINED_LANGUAGE
    assert prompt_classify(text) == (category, language)


@pytest.mark.server
def test_classify_and_hash_do_not_depend_on_the_process_hash_seed() -> None:
    texts = [t for ts in CATEGORY_EXAMPLES.values() for t in ts] + list(LANGUAGE_EXAMPLES.values())
    script = (
        "import json, sys\n"
        "from battles.prompting import prompt_classify, prompt_hash\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps([[*prompt_classify(t), prompt_hash(t)] for t in texts]))\n"
    )
    outputs = []
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            check=True,
        )
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1] == outputs[2]
    assert [row[:2] for row in outputs[0]] == [list(prompt_classify(t)) for t in texts]
