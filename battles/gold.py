"""Attention-check answers made from real ones (pure functions, no Django): a manager picks any answer
and the platform breaks it in an obvious way, so one side of the pair is plainly not an answer."""

from __future__ import annotations

import math
import random
from enum import StrEnum

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
    "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip "
    "ex ea commodo consequat."
)


class Corruption(StrEnum):
    SHUFFLE = "shuffle"  # the answer's words in a random order
    TRUNCATE = "truncate"  # the first few words, cut mid-sentence
    LOREM = "lorem"  # placeholder Latin of about the answer's length


def attention_answer_corrupt(text: str, *, method: Corruption | str = Corruption.SHUFFLE, seed: int = 0) -> str:
    """A broken version of ``text``: the same words shuffled (never the original order when there are
    two or more different words), truncated to its first tenth (at least 3, at most 12 words, with
    no end punctuation), or lorem ipsum of a similar length. Deterministic in ``seed``."""
    method = Corruption(method)
    words = text.split()
    rng = random.Random(seed)
    if method is Corruption.SHUFFLE:
        if len(set(words)) < 2:
            return attention_answer_corrupt(text, method=Corruption.LOREM, seed=seed)
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        return " ".join(shuffled)
    if method is Corruption.TRUNCATE:
        keep = max(3, min(12, len(words) // 10))
        if len(words) <= keep:
            return attention_answer_corrupt(text, method=Corruption.LOREM, seed=seed)
        return " ".join(words[:keep]).rstrip(".!?;:,")
    lorem = LOREM.split()
    length = max(len(words), 8)
    return " ".join(lorem[i % len(lorem)] for i in range(length))


def wilson_interval(correct: int, answered: int, *, z: float = 1.959963984540054) -> tuple[float, float] | None:
    """The Wilson score interval (95% by default) for ``correct`` of ``answered``, or None with none
    answered. The console's copy of ``ranking.estimators.wilson_interval`` (battles cannot import
    ranking); a test holds the two to one value."""
    if answered <= 0:
        return None
    p = correct / answered
    denominator = 1 + z * z / answered
    centre = (p + z * z / (2 * answered)) / denominator
    half = z * math.sqrt(p * (1 - p) / answered + z * z / (4 * answered * answered)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
