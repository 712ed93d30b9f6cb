"""Seed a stack's own database (``python -m tests.reliability.seed``, DATABASE_URL pointing at it): one
organisation, raters with the factories' password, a campaign between two models on the stack's Triton
(with ``--migrate``, the migrations first, as ``manage.py migrate`` runs them). Prints the ids the
drivers need as one JSON line. Run as a child process: the suite's own Django is bound to the suite's
test database, the stack's database is another cluster."""

from __future__ import annotations

import argparse
import json
import os

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--raters", type=int, default=4)
    parser.add_argument("--triton", required=True, help="host:port of Triton's gRPC")
    parser.add_argument("--models", default="zen-bigram,stdlib-trigram")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--timeout-s", type=float, default=20.0)
    parser.add_argument("--migrate", action="store_true", help="run the migrations first, in this same process")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.local")
    django.setup()
    if args.migrate:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)

    from raters.models import Role
    from raters.tenancy import scopes_disabled
    from tests.factories import (
        PASSWORD,
        CampaignFactory,
        CompetitorFactory,
        MembershipFactory,
        ModelEndpointFactory,
        OrganizationFactory,
        PromptFactory,
        RaterPoolFactory,
        UserFactory,
    )

    with scopes_disabled():
        organization = OrganizationFactory.create(name="Reliable", slug="reliable")
        owner = UserFactory.create(email="owner@reliable.test")
        MembershipFactory.create(user=owner, organization=organization, role=Role.OWNER)
        pool = RaterPoolFactory.create(organization=organization, name="Reliable raters")
        raters = []
        for i in range(args.raters):
            rater = UserFactory.create(email=f"rater{i}@reliable.test")
            MembershipFactory.create(user=rater, organization=organization, role=Role.RATER)
            pool.members.add(rater)
            raters.append(rater.email)
        # Caps out of the way: the drivers count votes, they do not test the caps.
        campaign = CampaignFactory.create(
            organization=organization, name="Reliable chat", slug="reliable-chat", session_cap=100_000
        )
        campaign.rater_pools.add(pool)
        for model in args.models.split(","):
            endpoint = ModelEndpointFactory.create(
                organization=organization,
                name=f"reliable-{model}",
                url=args.triton,
                model_name=model,
                timeout_s=args.timeout_s,
            )
            CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="2026-12")
        for _ in range(args.prompts):
            PromptFactory.create(campaign=campaign)
        # A second campaign between the slow test models (answers after 300 / 100 ms): a battle that is
        # being generated for long enough to stop Triton in the middle of it.
        slow = CampaignFactory.create(
            organization=organization, name="Reliable slow", slug="reliable-slow", session_cap=100_000
        )
        slow.rater_pools.add(pool)
        for model in ("delay-slow", "delay-fast"):
            endpoint = ModelEndpointFactory.create(
                organization=organization, name=f"slow-{model}", url=args.triton, model_name=model, timeout_s=5.0
            )
            CompetitorFactory.create(campaign=slow, endpoint=endpoint, version_label="2026-12")
        for _ in range(20):
            PromptFactory.create(campaign=slow)
    print(
        json.dumps(
            {
                "campaign_id": campaign.pk,
                "slow_campaign_id": slow.pk,
                "raters": raters,
                "owner": owner.email,
                "password": PASSWORD,
            }
        )
    )


if __name__ == "__main__":
    main()
