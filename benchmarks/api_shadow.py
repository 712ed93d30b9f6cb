"""Shadow import benchmark: battles pushed through the real HTTP stack into PostgreSQL, in batches.

    python benchmarks/api_shadow.py [--battles 20000] [--batch 1000] [--single 300]

Into the PostgreSQL database named by BENCH_DATABASE_URL (default: a local database arena_bench_shadow), a
fresh campaign per run; then ``POST /api/v1/campaigns/<id>/shadow-battles/batch/`` with batches of 1,000
battles through Django's test client (API key authentication, tenant scope, the JSON parser, the
serializers' validation of every field, the service's checks, idempotency lookups, competitor matching,
prompt reuse, the style and identity analysis of both answers, bulk inserts). Each response is checked
(201, every battle created).

Measured in the same run, as references:
  floor   the same rows written by bulk ORM inserts with nothing validated or analysed (what the database
          and the ORM cost alone): the batch import's ratio to it is its overhead
  single  ``POST /shadow-battles/`` one battle per request, for a few hundred battles: what batching buys

Target (issue 10): >= 500 battles/s through the batch endpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_PER_S = 500.0
MODELS = [("prod-assistant", "2026-11"), ("candidate-a", "rc1"), ("candidate-b", "rc2"), ("distilled", "v4")]
WORDS = (
    "the a model answer garden water soil tomato light code python list value error test plan step result "
    "data table user request latency token cache server queue batch write read index query"
).split()


def setup_django(url: str) -> None:
    from benchmarks.claim import setup_django as claim_setup

    claim_setup(url)  # creates the database if needed, test settings, migrations, no task runs


def _text(rng: random.Random, words: int) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    if rng.random() < 0.5:
        return f"## Answer\n\n- **{rng.choice(WORDS)}** {body[:80]}\n- {body[80:160]}\n\n{body}"
    return body


def battles_make(n: int, *, seed: int = 0, prefix: str = "") -> list[dict[str, Any]]:
    """``n`` shadow battles as a gateway would send them: a prompt (some repeated), two answers of two
    different models, each with its tokens, finish reason and timings."""
    rng = random.Random(seed)
    items = []
    for i in range(n):
        first, second = rng.sample(MODELS, 2)
        items.append(
            {
                "idempotency_key": f"{prefix}{i}",
                "prompt": f"Question {rng.randrange(n // 2 + 1)}: how does {rng.choice(WORDS)} relate to "
                f"{rng.choice(WORDS)}?",
                "category": rng.choice(["advice", "coding", "knowledge"]),
                "language": "en",
                "answers": [
                    {
                        "model": model,
                        "version": version,
                        "text": _text(rng, rng.randint(40, 160)),
                        "output_tokens": rng.randint(40, 300),
                        "finish_reason": "stop",
                        "latency_s": round(rng.uniform(0.3, 4.0), 3),
                        "ttft_s": round(rng.uniform(0.05, 0.3), 3),
                    }
                    for model, version in (first, second)
                ],
            }
        )
    return items


def _world(tag: str) -> tuple[int, str]:
    """A fresh campaign and a read-write key of its organisation (the key's rate high enough for the run)."""
    from battles.models import Campaign
    from raters.models import Organization
    from raters.services import api_key_create

    organization, _ = Organization.objects.get_or_create(slug="bench-shadow", defaults={"name": "Shadow benchmark"})
    campaign = Campaign.objects.create(
        organization=organization, name=f"shadow {tag}", slug=f"shadow-{tag}", status=Campaign.Status.OPEN
    )
    _, key = api_key_create(
        organization=organization, name=f"bench {tag}", scope="write", rate_limit="1000000/m", actor=None
    )
    return campaign.pk, key


def floor_insert(campaign_id: int, items: list[dict[str, Any]]) -> float:
    """The same rows by bulk ORM insert: prompts, battles, generations; no validation, no analysis, no
    idempotency lookups. Returns seconds."""
    from django.db import transaction
    from django.utils import timezone

    from battles.models import Battle, Campaign, Competitor, Generation, Prompt, Side
    from battles.prompting import prompt_hash

    campaign = Campaign.objects.get(pk=campaign_id)
    competitors = {
        model: Competitor.objects.get_or_create(
            organization_id=campaign.organization_id, campaign=campaign, external_model=model, version_label=version
        )[0]
        for model, version in MODELS
    }
    start = time.perf_counter()
    with transaction.atomic():
        now = timezone.now()
        prompts = Prompt.objects.bulk_create(
            Prompt(
                organization_id=campaign.organization_id,
                campaign=campaign,
                text=item["prompt"],
                text_hash=prompt_hash(item["prompt"]),
                category=item["category"],
                language=item["language"],
                source=Prompt.Source.SHADOW,
            )
            for item in items
        )
        battles = Battle.objects.bulk_create(
            Battle(
                organization_id=campaign.organization_id,
                campaign=campaign,
                prompt=prompt,
                left=competitors[item["answers"][0]["model"]],
                right=competitors[item["answers"][1]["model"]],
                status=Battle.Status.READY,
                source=Battle.Source.SHADOW,
                ready_at=now,
                idempotency_key=f"floor-{item['idempotency_key']}",
            )
            for prompt, item in zip(prompts, items, strict=True)
        )
        Generation.objects.bulk_create(
            (
                Generation(
                    battle=battle,
                    side=side,
                    competitor=competitors[answer["model"]],
                    text=answer["text"],
                    output_tokens=answer["output_tokens"],
                    finish_reason=answer["finish_reason"],
                    latency_s=answer["latency_s"],
                    ttft_s=answer["ttft_s"],
                )
                for battle, item in zip(battles, items, strict=True)
                for side, answer in zip((Side.LEFT, Side.RIGHT), item["answers"], strict=True)
            ),
            batch_size=2000,
        )
    return time.perf_counter() - start


def run(*, battles: int = 20000, batch: int = 1000, single: int = 300, url: str | None = None) -> dict[str, Any]:
    """Import ``battles`` shadow battles in batches through the API and measure; the references (floor,
    single) in the same run. Returns the figures (battles per second and the ratios)."""
    from django.conf import settings

    if not settings.configured:
        setup_django(
            url or os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arena_bench_shadow")
        )
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from battles.models import Battle
    from raters.tenancy import scopes_disabled

    tag = uuid.uuid4().hex[:8]
    with scopes_disabled():
        campaign_id, key = _world(tag)
        floor_id, _ = _world(tag + "-floor")
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    items = battles_make(battles, prefix=f"{tag}-")
    batch_url = reverse("api:shadow-battles-batch", args=[campaign_id])

    bodies = [json.dumps({"battles": items[i : i + batch]}) for i in range(0, len(items), batch)]
    start = time.perf_counter()
    for body in bodies:
        response = client.post(batch_url, data=body, content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"batch refused: {response.status_code} {response.content[:500]!r}")
        result = response.json()
        if result["created"] != len(json.loads(body)["battles"]):
            raise SystemExit(f"batch created {result['created']} battles, not all")
    api_s = time.perf_counter() - start

    with scopes_disabled():
        stored = Battle.objects.filter(campaign_id=campaign_id, source=Battle.Source.SHADOW).count()
        if stored != battles:
            raise SystemExit(f"{stored} battles stored, {battles} sent")
        floor_s = floor_insert(floor_id, battles_make(battles, seed=1, prefix="f-"))

    # One replayed batch (same keys, same bodies): nothing written, answered from the idempotency lookup.
    start = time.perf_counter()
    replay = client.post(batch_url, data=bodies[0], content_type="application/json")
    replay_s = time.perf_counter() - start
    if replay.status_code != 200 or replay.json()["created"] != 0:
        raise SystemExit(f"replay not idempotent: {replay.status_code}")

    single_url = reverse("api:shadow-battles", args=[campaign_id])
    singles = battles_make(single, seed=2, prefix=f"{tag}-single-")
    start = time.perf_counter()
    for item in singles:
        response = client.post(single_url, data=json.dumps(item), content_type="application/json")
        if response.status_code != 201:
            raise SystemExit(f"single POST refused: {response.status_code} {response.content[:500]!r}")
    single_s = time.perf_counter() - start
    connection.close()

    per_s = battles / api_s
    floor_per_s = battles / floor_s
    single_per_s = single / single_s
    return {
        "battles": battles,
        "batch": batch,
        "api_battles_per_s": round(per_s, 1),
        "floor_orm_battles_per_s": round(floor_per_s, 1),
        "ratio_to_floor": round(per_s / floor_per_s, 3),
        "single_post_battles_per_s": round(single_per_s, 1),
        "batch_speedup_over_single": round(per_s / single_per_s, 1),
        "replayed_batch_ms": round(replay_s * 1000, 1),
        "target_battles_per_s": TARGET_PER_S,
        "target_met": per_s >= TARGET_PER_S,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--single", type=int, default=300)
    args = parser.parse_args(argv)
    result = run(battles=args.battles, batch=args.batch, single=args.single)
    print(
        f"shadow import, {result['battles']} battles in batches of {result['batch']} through the API:\n"
        f"  batch API   {result['api_battles_per_s']:>9.1f} battles/s  (target >= {TARGET_PER_S:.0f}: "
        f"{'met' if result['target_met'] else 'NOT met'})\n"
        f"  floor (ORM) {result['floor_orm_battles_per_s']:>9.1f} battles/s  bulk inserts, nothing validated; "
        f"API/floor = {result['ratio_to_floor']:.3f}\n"
        f"  single POST {result['single_post_battles_per_s']:>9.1f} battles/s  one per request; "
        f"batching is {result['batch_speedup_over_single']:.1f}x faster\n"
        f"  a replayed batch (idempotent, nothing written): {result['replayed_batch_ms']:.1f} ms"
    )
    print(json.dumps(result))
    return 0  # a missed target is printed, not an error (benchmarks/api.py runs the parts)


if __name__ == "__main__":
    raise SystemExit(main())
