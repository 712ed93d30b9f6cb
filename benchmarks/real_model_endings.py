"""How many of the real small LLMs' answers a token budget cuts mid-sentence.

    python benchmarks/real_model_endings.py [--prompts 12] [--budgets 120,400]

Starts a Triton of its own with the real models (serving/llm_model_repository/, installed by
``scripts/bootstrap --real-models``) and plays the demo's real-model campaign: the first ``--prompts`` of
the demo's prompts, both models at once with the campaign's temperature and top_p and a fixed seed per
prompt, once per budget (``max_tokens``). Prints, per budget and model, how many answers stopped at the
budget (finish reason ``length``), how many end mid-sentence (the last non-blank character is not one
that closes a sentence, a list item or a code block), the median output tokens and the median battle
time (the slower side). Needs the Triton environment with the real models; no database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.local")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from battles.demo import DEMO_PROMPTS, REAL_MODELS  # noqa: E402
from serving.triton import EndpointSpec, SamplingParams, TritonServer, generate_pair  # noqa: E402

# What may end a finished answer: a sentence, a quotation or bracket after one, a code block, a list item
# or a table row, an emoji-free closing mark.
FINISHED_ENDINGS = tuple(".!?:;)]}\"'`*|") + ("…", "”", "’")


def ends_mid_sentence(text: str) -> bool:
    stripped = text.rstrip()
    return not stripped or not stripped.endswith(FINISHED_ENDINGS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--budgets", default="120,400")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.95)
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    prompts = DEMO_PROMPTS[: args.prompts]
    server = TritonServer(
        model_repositories=[Path(settings.ARENA_LLM_MODEL_REPOSITORY)], environment=settings.ARENA_TRITON_ENV
    )
    with server:
        specs = [
            EndpointSpec(
                url=server.grpc_url,
                protocol="grpc",
                model_name=model,
                timeout_s=120.0,
                contract="vllm",
                prompt_format=prompt_format,  # type: ignore[arg-type]
            )
            for model, prompt_format in REAL_MODELS
        ]
        print(f"{len(prompts)} prompts, temperature {args.temperature}, top_p {args.top_p}, {os.cpu_count()} cores")
        for budget in budgets:
            rows: dict[str, list[tuple[str, int, str]]] = {spec.model_name: [] for spec in specs}
            times = []
            for index, prompt in enumerate(prompts):
                params = SamplingParams(
                    temperature=args.temperature, top_p=args.top_p, max_tokens=budget, seed=1000 + index
                )
                started = time.monotonic()
                results = generate_pair(specs[0], specs[1], prompt, params)
                times.append(time.monotonic() - started)
                for spec, result in zip(specs, results, strict=True):
                    if not result.ok:
                        print(f"  {spec.model_name} failed: {result.error}")
                    rows[spec.model_name].append((result.finish_reason, result.output_tokens, result.text))
            for model, answers in rows.items():
                cut = sum(1 for reason, _, _ in answers if reason == "length")
                mid = sum(1 for _, _, text in answers if ends_mid_sentence(text))
                tokens = statistics.median(tokens for _, tokens, _ in answers)
                print(
                    f"max_tokens {budget:4d}  {model:22s} stopped at the budget {cut:2d}/{len(answers)}, "
                    f"mid-sentence {mid:2d}/{len(answers)}, median {tokens:.0f} tokens"
                )
            median = statistics.median(times)
            print(f"max_tokens {budget:4d}  battle time median {median:.1f} s, max {max(times):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
