"""``manage.py judge_golden``: an offline golden-set run for CI. Each competitor of the campaign answers
every active pool prompt once, the judge compares every pair of answers (both presentation orders), the
campaign gets a golden judge board, and the command exits non-zero (status 1) when ``--candidate`` does
not beat ``--baseline`` at ``--confidence``, with the numbers on stdout as JSON either way.

    manage.py judge_golden --campaign 12 --judge 3 --candidate 40 --baseline 41 --confidence 0.95

A failed run (every judge call failed) exits with status 2."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from battles.models import Campaign, Judge, JudgeRun
from battles.services import judge_run_create
from ranking.services import golden_run_and_check
from raters.errors import DomainError
from raters.tenancy import organization_scope, scopes_disabled


class Command(BaseCommand):
    help = "Run a golden set (every competitor answers every pool prompt once, a judge compares them) for CI."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", type=int, required=True, help="The campaign's id.")
        parser.add_argument("--judge", type=int, required=True, help="The judge's id (same organisation).")
        parser.add_argument("--candidate", type=int, help="Competitor id that must beat the baseline.")
        parser.add_argument("--baseline", type=int, help="Competitor id to beat.")
        parser.add_argument("--confidence", type=float, default=0.95, help="One-sided confidence (default 0.95).")
        parser.add_argument("--seed", type=int, default=0, help="Seed sent with every call (default 0).")
        parser.add_argument(
            "--competitor", type=int, action="append", default=[], help="Repeatable; default: the active ones."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if (options["candidate"] is None) != (options["baseline"] is None):
            raise CommandError("--candidate and --baseline go together.")
        with scopes_disabled():  # the one lookup across organisations: the campaign names its own
            found = Campaign.objects.filter(pk=options["campaign"]).values_list("organization_id", flat=True)
            organization_id = found.first()
        if organization_id is None:
            raise CommandError(f"No campaign {options['campaign']}.")
        with organization_scope(organization_id):
            campaign = Campaign.objects.get(pk=options["campaign"])
            judge = Judge.objects.filter(pk=options["judge"]).select_related("rubric").first()
            if judge is None:
                raise CommandError(f"No judge {options['judge']} in the campaign's organisation.")
            competitors = list(options["competitor"])
            for named in (options["candidate"], options["baseline"]):
                if named is not None and competitors and named not in competitors:
                    competitors.append(named)
            try:
                run = judge_run_create(
                    judge=judge,
                    campaign=campaign,
                    actor=None,
                    kind=JudgeRun.Kind.GOLDEN,
                    seed=options["seed"],
                    competitor_ids=competitors,
                    start=False,
                )
                result = golden_run_and_check(
                    run_id=run.pk,
                    candidate_id=options["candidate"],
                    baseline_id=options["baseline"],
                    confidence=options["confidence"],
                )
            except DomainError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(result, indent=2, sort_keys=True, default=str))
        if result["status"] != JudgeRun.Status.DONE:
            self.stderr.write(f"golden run {result['run_id']} failed: {result['error']}")
            raise SystemExit(2)
        check = result.get("check")
        if check is not None and not check["beats"]:
            self.stderr.write(
                f"competitor {check['candidate_id']} does not beat {check['baseline_id']} at "
                f"{check['confidence']:g} confidence (share {check['share']}, lower bound {check['lower_bound']})"
            )
            raise SystemExit(1)
