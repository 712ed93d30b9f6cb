"""core.nested: related rows read in their parent's statement come back as the same model instances a read of their
own makes, every kind of value through JSON and back (floats to the last digit, UUIDs, date-times, None, JSON,
text of any characters), the fields not asked for deferred, and none where there are none. PostgreSQL's."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from django.db import connection
from django.db.models import OuterRef
from django.test.utils import CaptureQueriesContext

from battles.models import Battle, Generation
from core.nested import instances_from_json, rows_json
from ranking.models import LeaderboardSnapshot
from tests.battles.test_identity_refuse import ready_battle
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db

FIELDS = (
    "id", "battle_id", "side", "turn", "competitor_id", "text", "output_tokens", "latency_s", "ttft_s",
    "tokens_per_s", "style", "model_mentions", "created_at",
)  # fmt: skip
# Floats that a decimal text round trip gets wrong unless it keeps every digit, and the edges of the type.
AWKWARD = [0.1 + 0.2, 1 / 3, 2.0, 0.0, -0.0, 5e-324, 1e-300, 1.7976931348623157e308, 123456789.12345679]


def _values(instance: Generation) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in Generation._meta.concrete_fields if f.name in FIELDS}


def _read_with_battle(battle: Battle) -> list[Generation]:
    answers = rows_json(Generation.objects.filter(battle_id=OuterRef("pk")), FIELDS, order_by=("turn", "side"))
    read = Battle.objects.annotate(answers=answers).get(pk=battle.pk)
    return instances_from_json(Generation, FIELDS, read.answers)  # type: ignore[attr-defined]


def test_the_rows_come_back_as_a_read_of_their_own_makes_them(acme: Tenant, bob: Any):
    rng = random.Random(7)
    battle = ready_battle(acme, bob)
    floats = [*AWKWARD, float("inf"), *(rng.uniform(-1e6, 1e6) for _ in range(6)), *(rng.random() for _ in range(6))]
    for turn, latency in enumerate(floats, start=1):
        for side, competitor in (("left", acme.left), ("right", acme.right)):
            battle.generations.create(
                side=side,
                turn=turn,
                competitor=competitor,
                text=rng.choice(["", 'quotes " and \\ back', "é ü 中文 🙂", "line\nbreak\ttab\x01ctl", "<b>&amp;</b>"]),
                output_tokens=rng.randrange(0, 2**31 - 1),
                latency_s=latency,
                ttft_s=None if turn % 2 else latency / 7,
                tokens_per_s=float("nan") if turn == 3 else rng.random(),
                style={"bold": turn, "nested": {"list": [1, 2.5, None, "x"]}},
                model_mentions=[] if turn % 3 else ["some-model"],
            )
    expected = list(Generation.objects.filter(battle=battle).only(*FIELDS).order_by("turn", "side"))
    with CaptureQueriesContext(connection) as captured:
        got = _read_with_battle(battle)
    assert len(captured.captured_queries) == 1  # the battle and its answers, in one statement
    assert len(got) == len(expected) == 2 * (len(floats) + 1)
    for mine, theirs in zip(got, expected, strict=True):
        a, b = _values(mine), _values(theirs)
        nan = isinstance(b["tokens_per_s"], float) and math.isnan(b["tokens_per_s"])
        assert nan == (isinstance(a["tokens_per_s"], float) and math.isnan(a["tokens_per_s"]))
        if nan:
            a.pop("tokens_per_s"), b.pop("tokens_per_s")
        assert a == b
        # The same types, not just equal values (a float read as an int would print differently on a page).
        assert {k: type(v) for k, v in a.items()} == {k: type(v) for k, v in b.items()}
        assert math.copysign(1, mine.latency_s) == math.copysign(1, theirs.latency_s)  # -0.0 stays negative
        assert mine.pk == theirs.pk and not mine._state.adding and mine._state.db == "default"
    # The fields not asked for are deferred, as only() leaves them: read on access, right.
    first = got[0]
    assert first.get_deferred_fields() == {"text_html", "text_html_version", "finish_reason", "error"}
    assert first.finish_reason == expected[0].finish_reason


def test_no_rows_give_no_instances(acme: Tenant, bob: Any):
    battle = ready_battle(acme, bob)
    none = rows_json(Generation.objects.filter(battle_id=OuterRef("pk"), turn=9), FIELDS)  # a turn not asked yet
    read = Battle.objects.annotate(answers=none).get(pk=battle.pk)
    assert read.answers is None  # type: ignore[attr-defined]
    assert instances_from_json(Generation, FIELDS, read.answers) == []  # type: ignore[attr-defined]
    assert instances_from_json(Generation, FIELDS, None) == []


def test_a_field_that_does_not_go_through_json_as_it_is_is_refused_when_named():
    with pytest.raises(ValueError, match="BinaryField does not go through JSON"):
        rows_json(LeaderboardSnapshot.objects.all(), ("id", "pairwise_arrays"))
    with pytest.raises(ValueError, match="not a column"):
        rows_json(Battle.objects.all(), ("id", "generations"))
