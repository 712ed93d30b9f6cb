"""A deterministic judge built for judging, shipped for the demo (``arena-judge``: it is no competitor, so it
may judge every campaign) and used by the tests with settable imperfections (``tests/serving/model_repository/
judge-sim*``): reads the judge prompt's data block (battles/judging.py, loaded by path so both sides share one
format) and answers strict JSON. It reads no meaning: a stand-in that follows the judge format exactly.

Ground truth the tests control: an answer's quality is the number N of its marker ``[[quality:N]]``
when it has one, else its word count (so the shipped n-gram contestants get a verdict too: the longer
answer is better). The better answer wins; equal quality is a tie.

Settable imperfections (the model's ``config.pbtxt`` parameters), each decided by a hash, so the reply is
a pure function of (text_input, seed, model name, settings):

- ``accuracy``: per *unordered* pair (the same in both presentation orders, as a judge's real opinion
  of two answers is), the probability that the judge's preference is the true one; otherwise it prefers
  the worse answer (on a true tie, one of the two).
- ``position_bias``: per call (per order), the probability that it ignores the content and answers
  "A", the answer shown first. Counterbalancing turns such a call into an order disagreement.
- ``malformed_rate``: per call, the probability that the reply is not the strict JSON asked for
  (prose around the object, a code fence, a repeated key): a refusal for the platform.
- ``special_tokens``: the strict reply wrapped in chat tokens (``<|im_start|>...<|im_end|><end_of_turn>``),
  which the client removes before the platform reads it (serving/triton/special_tokens.py).

A prompt without exactly one decodable data block (a broken escape) always gets a malformed reply."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

_QUALITY = re.compile(r"\[\[quality:(-?\d+)\]\]")


def _load_judging() -> types.ModuleType:
    # exec by path, never import: no bytecode may be written into a model repository.
    path = Path(__file__).resolve().parents[2] / "battles" / "judging.py"
    module = types.ModuleType("arena_judging")
    module.__file__ = str(path)
    sys.modules["arena_judging"] = module
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


judging = _load_judging()


@dataclass(frozen=True)
class Settings:
    accuracy: float = 1.0
    position_bias: float = 0.0
    malformed_rate: float = 0.0
    special_tokens: bool = False  # the reply wrapped in chat tokens, as a model that renders them writes it


def quality(answer: str) -> int:
    found = _QUALITY.search(answer)
    return int(found.group(1)) if found else len(answer.split())


def _unit(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts (sha256: stable across processes and Python versions)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


MALFORMED = (
    'Sure! Here is my verdict: {{"verdict": "{v}", "reason": "looks better"}}',
    '```json\n{{"verdict": "{v}"}}\n```',
    '{{"verdict": "{v}", "verdict": "{v}"}}',
    "The first answer is better.",
)


def reply(text: str, *, seed: int, name: str, settings: Settings) -> str:
    data = judging.data_decode(text)
    if data is None:
        return "I cannot find the two answers in this prompt."
    a, b = data["answer_a"], data["answer_b"]
    qa, qb = quality(a), quality(b)
    pair = sorted([a, b])
    if _unit("pair", name, seed, data["prompt"], *pair) < settings.accuracy:
        verdict = "A" if qa > qb else "B" if qb > qa else "tie"
    elif qa != qb:
        verdict = "B" if qa > qb else "A"
    else:  # wrong about a true tie: prefers one answer, the same one in either order
        verdict = "A" if a == pair[int(_unit("tie", name, seed, *pair) < 0.5)] else "B"
    if _unit("bias", name, seed, text) < settings.position_bias:
        verdict = "A"
    if _unit("malformed", name, seed, text) < settings.malformed_rate:
        shape = MALFORMED[int(_unit("shape", name, seed, text) * len(MALFORMED))]
        return shape.format(v=verdict)
    strict = json.dumps({"verdict": verdict, "reason": f"quality {qa} against {qb}"})
    return f"<|im_start|>{strict}<|im_end|><end_of_turn>" if settings.special_tokens else strict


def respond(pb_utils: object, model_name: str, settings: Settings, request: object) -> object:
    import numpy as np

    get = pb_utils.get_input_tensor_by_name  # type: ignore[attr-defined]
    text = get(request, "text_input").as_numpy().reshape(-1)[0].decode("utf-8")
    seed_tensor = get(request, "seed")
    seed = int(seed_tensor.as_numpy().reshape(-1)[0]) if seed_tensor is not None else 0
    answer = reply(text, seed=seed, name=model_name, settings=settings)
    tensor = pb_utils.Tensor  # type: ignore[attr-defined]
    return pb_utils.InferenceResponse(  # type: ignore[attr-defined]
        output_tensors=[
            tensor("text_output", np.array([answer.encode("utf-8")], dtype=np.object_)),
            tensor("output_tokens", np.array([len(answer.split())], dtype=np.int32)),
            tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
        ]
    )
