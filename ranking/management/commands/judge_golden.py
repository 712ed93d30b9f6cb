"""``manage.py judge_golden``: an offline golden-set run for CI. Each competitor of the campaign answers
every active pool prompt once, the judge compares every pair of answers (both presentation orders), the
campaign gets a golden judge board, and the command exits by what happened (``EXIT_CODES``), with the
numbers on stdout as JSON whenever a run took place.

    manage.py judge_golden --campaign 12 --judge 3 --candidate 40 --baseline 41 --confidence 0.95

A usage error (its own status, 3) is found before any run is created or any model is called, so a CI can
tell a typo from a regression."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser, DjangoHelpFormatter

from battles.models import Campaign, Judge, JudgeRun
from battles.services import judge_run_create
from core.errors import DomainError
from ranking.services import golden_check_validate, golden_run_and_check
from raters.tenancy import organization_scope, scopes_disabled

EXIT_PASSED = 0
EXIT_NOT_BEATEN = 1
EXIT_RUN_FAILED = 2
EXIT_USAGE = 3

EXIT_CODES = f"""exit status:
  {EXIT_PASSED}  the run finished and the candidate beats the baseline (or no check was asked for)
  {EXIT_NOT_BEATEN}  the run finished and the candidate does not beat the baseline at --confidence
  {EXIT_RUN_FAILED}  the run failed (every judge call, or every competitor's answer, failed), or no pair of the
     candidate and the baseline was judged (their answers failed or were refused): nothing to decide on
  {EXIT_USAGE}  usage error (bad or missing option, no such campaign, a judge of another organisation or
     retired, a bad --confidence, an unknown, retired or foreign candidate or baseline, or one the judge
     may not judge: its own model or an excluded family): nothing was run"""


class _Formatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Keeps the exit-status table's lines as written."""


def _usage(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_USAGE)


class Command(BaseCommand):
    help = "Run a golden set (every competitor answers every pool prompt once, a judge compares them) for CI."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, formatter_class=_Formatter, epilog=EXIT_CODES, **kwargs)

        # argparse exits 2 on a bad option, which is this command's "the run failed": a usage error is 3.
        def error(message: str) -> NoReturn:
            if parser.called_from_command_line:
                parser.print_usage(sys.stderr)
                parser.exit(EXIT_USAGE, f"{parser.prog}: error: {message}\n")
            raise _usage(f"Error: {message}")

        parser.error = error  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--campaign", type=int, required=True, help="The campaign's id.")
        parser.add_argument("--judge", type=int, required=True, help="The judge's id (same organisation).")
        parser.add_argument("--candidate", type=int, help="Competitor id that must beat the baseline.")
        parser.add_argument("--baseline", type=int, help="Competitor id to beat.")
        parser.add_argument(
            "--confidence", type=float, default=0.95, help="One-sided confidence in (0.5, 1) (default 0.95)."
        )
        parser.add_argument("--seed", type=int, default=0, help="Seed sent with every call (default 0).")
        parser.add_argument(
            "--competitor", type=int, action="append", default=[], help="Repeatable; default: the active ones."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if (options["candidate"] is None) != (options["baseline"] is None):
            raise _usage("--candidate and --baseline go together.")
        with scopes_disabled():  # the one lookup across organisations: the campaign names its own
            found = Campaign.objects.filter(pk=options["campaign"]).values_list("organization_id", flat=True)
            organization_id = found.first()
        if organization_id is None:
            raise _usage(f"No campaign {options['campaign']}.")
        with organization_scope(organization_id):
            campaign = Campaign.objects.get(pk=options["campaign"])
            judge = Judge.objects.filter(pk=options["judge"]).select_related("rubric", "endpoint").first()
            if judge is None:
                raise _usage(f"No judge {options['judge']} in the campaign's organisation.")
            competitors = list(options["competitor"])
            for named in (options["candidate"], options["baseline"]):
                if named is not None and competitors and named not in competitors:
                    competitors.append(named)
            try:
                if options["candidate"] is not None:
                    golden_check_validate(
                        campaign_id=campaign.pk,
                        candidate_id=options["candidate"],
                        baseline_id=options["baseline"],
                        confidence=options["confidence"],
                        competitor_ids=competitors,
                        judge=judge,
                    )
                run = judge_run_create(
                    judge=judge,
                    campaign=campaign,
                    actor=None,
                    kind=JudgeRun.Kind.GOLDEN,
                    seed=options["seed"],
                    competitor_ids=competitors,
                    start=False,
                )
            except DomainError as exc:
                raise _usage(str(exc)) from exc
            try:
                result = golden_run_and_check(
                    run_id=run.pk,
                    candidate_id=options["candidate"],
                    baseline_id=options["baseline"],
                    confidence=options["confidence"],
                )
            except DomainError as exc:
                raise CommandError(f"golden run {run.pk} failed: {exc}", returncode=EXIT_RUN_FAILED) from exc
        self.stdout.write(json.dumps(result, indent=2, sort_keys=True, default=str))
        if result["status"] != JudgeRun.Status.DONE:
            self.stderr.write(f"golden run {result['run_id']} failed: {result['error']}")
            raise SystemExit(EXIT_RUN_FAILED)
        check = result.get("check")
        if check is not None and check["pairs"] == 0:
            # Nothing to decide on (the candidate's or the baseline's answers all failed, or the judge
            # refused every pair of theirs): a failed run for CI, not evidence of a regression.
            self.stderr.write(
                f"golden run {result['run_id']}: no judged pair between competitor {check['candidate_id']} and "
                f"{check['baseline_id']} (their answers failed or every verdict was refused): nothing to decide on"
            )
            raise SystemExit(EXIT_RUN_FAILED)
        if check is not None and not check["beats"]:
            self.stderr.write(
                f"competitor {check['candidate_id']} does not beat {check['baseline_id']} at "
                f"{check['confidence']:g} confidence (share {check['share']}, lower bound {check['lower_bound']})"
            )
            raise SystemExit(EXIT_NOT_BEATEN)
