"""Test model: a deterministic simulated ratio judge whose truth the test controls.

It reads the attribute-board prompt (serving/ratio_judging.py): the two items between their markers
(JSON string literals), and the attribute line. Each item carries its hidden true log-strength as
``[[true=<float>]]``; the attribute line may carry the judge's settings as
``[[sim noise=<sd> refuse=<rate> malformed=<rate> bias=<log-ratio> tokens=<0|1>]]`` (defaults 0.5, 0, 0,
0, 0; ``tokens=1`` wraps the reply in chat tokens, as a model that renders them writes it).
The answer is ``log(A/B) = true_A - true_B + bias + N(0, noise²)``, reported as "more" and a ratio
clipped to the ladder's 1 to 26, with a confidence that grows with the gap. ``bias`` favours
whichever item is shown first (a position bias the two presentation orders cancel).

Deterministic: every draw comes from the SHA-256 of the prompt, so the same prompt gets the same
answer (as a judge at temperature 0 does), and the two orders of a pair draw independently. A
refusal is ``{"refuse": ...}``; a malformed answer is one of a few broken shapes (prose around the
object, a cut-off object, a ratio off the ladder). An item without a hidden truth is refused."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # loaded by the tests without Triton (tests/ranking/ratio_sim.py): `judge` only
    pb_utils = None

ITEM = re.compile(r"<<<ITEM ([AB])>>>\n(.*?)\n<<<END ITEM \1>>>", re.S)
TRUTH = re.compile(r"\[\[true=(-?[0-9.]+(?:e-?[0-9]+)?)\]\]")
SETTINGS = re.compile(r"\[\[sim ([^\]]*)\]\]")
DEFAULTS = {"noise": 0.5, "refuse": 0.0, "malformed": 0.0, "bias": 0.0, "tokens": 0.0}


def _uniforms(prompt: str, count: int) -> list[float]:
    digest = hashlib.sha256(prompt.encode("utf-8", errors="surrogatepass")).digest()
    return [(int.from_bytes(digest[4 * k : 4 * k + 4], "big") + 0.5) / 2**32 for k in range(count)]


def _settings(prompt: str) -> dict[str, float]:
    found = dict(DEFAULTS)
    attribute = next((line for line in prompt.splitlines() if line.startswith("Attribute:")), "")
    match = SETTINGS.search(attribute)
    if match:
        for part in match.group(1).split():
            key, _, value = part.partition("=")
            if key in found:
                found[key] = float(value)
    return found


def judge(prompt: str) -> str:
    answer = _judge(prompt)
    return f"<start_of_turn>{answer}<end_of_turn><eos>" if _settings(prompt)["tokens"] else answer


def _judge(prompt: str) -> str:
    settings = _settings(prompt)
    items = {side: json.loads(body) for side, body in ITEM.findall(prompt)}
    truths = {side: TRUTH.search(text) for side, text in items.items()}
    u_refuse, u_malformed, u1, u2, u_kind = _uniforms(prompt, 5)
    if set(truths) != {"A", "B"} or not all(truths.values()):
        return json.dumps({"refuse": "these items carry no simulated truth"})
    if u_refuse < settings["refuse"]:
        return json.dumps({"refuse": "I cannot compare these two items on this attribute."})
    gauss = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    true_a = float(truths["A"].group(1))  # type: ignore[union-attr]
    true_b = float(truths["B"].group(1))  # type: ignore[union-attr]
    log_ratio = true_a - true_b + settings["bias"] + settings["noise"] * gauss
    ratio = round(min(math.exp(abs(log_ratio)), 26.0), 3)
    confidence = round(min(0.99, 0.5 + abs(log_ratio) / 4.0), 2)
    answer = json.dumps({"more": "A" if log_ratio >= 0 else "B", "ratio": max(ratio, 1.0), "confidence": confidence})
    if u_malformed < settings["malformed"]:
        kind = int(u_kind * 3)
        if kind == 0:
            return f"Sure! Here is my verdict: {answer}"
        if kind == 1:
            return answer[: len(answer) // 2]
        return json.dumps({"more": "A", "ratio": 40, "confidence": confidence})
    return answer


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            text = judge(prompt.decode("utf-8", errors="replace"))
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
                        pb_utils.Tensor("output_tokens", np.array([len(text.split())], dtype=np.int32)),
                        pb_utils.Tensor("finish_reason", np.array([b"stop"], dtype=np.object_)),
                    ]
                )
            )
        return responses
