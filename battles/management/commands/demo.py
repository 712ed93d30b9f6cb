"""``manage.py demo``: migrate, seed the demo, start the local Triton server and the workers, fill the
campaigns' buffers of ready battles, then serve the platform (DEBUG off unless ``--debug``) under ASGI
with uvicorn. ``--real-models`` (or ARENA_REAL_MODELS=1) also serves the opt-in real LLMs from the same
Triton and seeds a campaign between them."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from battles.demo import DEMO_MANAGER, DEMO_PASSWORD, DEMO_RATER, demo_seed, demo_seed_real_models
from battles.generation_worker import generation_concurrency, generation_worker
from battles.models import Battle, Campaign
from battles.services import buffer_fill
from core.asgi import web_application
from raters.tenancy import organization_scope
from serving.triton import TritonEnvironment, TritonEnvironmentError, TritonServer

# How long the demo waits for its first battles before it serves anyway (the rater then gets a battle
# streamed live); the real models on a loaded 2-core machine take 10-40 s a battle.
BUFFER_FILL_TIMEOUT_S = 600.0


def real_models_check(environment: Path, repository: Path) -> None:
    """Raise CommandError, saying how to install them, unless the Triton environment can serve the
    real models (asks its interpreter, as the models will: ``arena_llm.py check``)."""
    python = environment / "bin" / "python"
    try:
        check = subprocess.run(
            [str(python), "-I", str(repository / "arena_llm.py"), "check"], capture_output=True, text=True, timeout=120
        )
    except OSError as exc:
        raise CommandError(f"the Triton environment's interpreter {python} failed: {exc}") from exc
    if check.returncode != 0:
        raise CommandError(f"the real models are not ready:\n{check.stderr.strip()}")


# Loopback, for the webhooks a demo user points at a receiver on their own machine. The demo only: the
# production default allows no internal address (ARENA_WEBHOOK_HOSTS, core/outbound.py's rule unchanged).
DEMO_WEBHOOK_HOSTS = ("127.0.0.0/8", "[::1]")


def demo_webhooks_loopback() -> None:
    """Let the demo's webhooks reach loopback (plain http:// too), unless ARENA_WEBHOOK_HOSTS says otherwise."""
    if "ARENA_WEBHOOK_HOSTS" not in os.environ:
        settings.ARENA_WEBHOOK_HOSTS = list(DEMO_WEBHOOK_HOSTS)


def demo_debug_off() -> None:
    """Serve the demo as a new user should see it: the site's own error pages, never Django's debug
    page with a traceback and the settings.

    The settings were loaded by ``arena.settings.local`` with DEBUG on, which is what the demo wants
    otherwise: the development SECRET_KEY and cookies that work over plain http on loopback. DEBUG is
    read per request (error pages) and when the server builds its handler, so turning it off before
    the server starts is enough. WhiteNoise (already in the middleware) serves the static files,
    straight from the static folders, so the demo needs no ``collectstatic``."""
    settings.DEBUG = False
    settings.WHITENOISE_USE_FINDERS = True


def demo_buffer_size() -> int:
    """The demo campaigns' buffer: ARENA_DEMO_BUFFER_SIZE, else two rounds of what the generation worker
    generates at once (one round waiting for raters while the next is generated)."""
    return settings.ARENA_DEMO_BUFFER_SIZE or 2 * generation_concurrency()


def demo_buffers_fill(
    campaigns: list[Campaign], *, report: Callable[[str], None], timeout_s: float = BUFFER_FILL_TIMEOUT_S
) -> int:
    """Fill the campaigns' buffers through the running generation worker and wait until every battle in
    them is generated (or voided), reporting progress; returns how many are ready. Battles a previous run
    left generating are voided first: no worker of that run is alive to finish them (this process runs
    the demo's only workers), and a rater holding one gets a new battle."""
    pks = [campaign.pk for campaign in campaigns]
    for campaign in campaigns:
        with organization_scope(campaign.organization_id):
            Battle.objects.filter(campaign=campaign, status=Battle.Status.GENERATING).update(
                status=Battle.Status.VOID, void_reason="The demo was restarted before the answers were complete."
            )
            buffer_fill(campaign_id=campaign.pk)
    organizations = sorted({campaign.organization_id for campaign in campaigns})
    wanted = sum(campaign.buffer_size for campaign in campaigns)
    deadline = time.monotonic() + timeout_s
    said = None
    while True:
        with organization_scope(organizations):
            waiting = Battle.objects.filter(campaign__in=pks, rater__isnull=True)
            ready = waiting.filter(status=Battle.Status.READY).count()
            generating = waiting.filter(status=Battle.Status.GENERATING).count()
        if ready != said:
            report(f"  battles ready: {ready} of {wanted}")
            said = ready
        if not generating:
            return ready
        if time.monotonic() > deadline:
            report(f"  still generating after {timeout_s:.0f} s; serving now (a rater gets a battle streamed live)")
            return ready
        time.sleep(0.2)


class Command(BaseCommand):
    help = "Run the platform with demo data against a real local Triton server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--addr", default="127.0.0.1", help="Address for the web server.")
        parser.add_argument("--port", type=int, default=8000, help="Port for the web server.")
        parser.add_argument("--seed-only", action="store_true", help="Seed and exit (no servers).")
        parser.add_argument(
            "--real-models",
            action="store_true",
            default=settings.ARENA_REAL_MODELS,
            help="Also serve the real small LLMs (installed by scripts/bootstrap --real-models) and seed a "
            "campaign between them (default: ARENA_REAL_MODELS).",
        )
        parser.add_argument(
            "--debug",
            action="store_true",
            help="Run with DEBUG on (Django's debug pages, with tracebacks and settings).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        repository = Path(settings.ARENA_MODEL_REPOSITORY)
        repositories = [repository, Path(settings.ARENA_JUDGE_REPOSITORY)]
        if options["real_models"]:
            repositories.append(Path(settings.ARENA_LLM_MODEL_REPOSITORY))
        server = TritonServer(
            model_repositories=repositories,
            http_port=settings.ARENA_TRITON_HTTP_PORT,
            grpc_port=settings.ARENA_TRITON_GRPC_PORT,
            environment=settings.ARENA_TRITON_ENV,
        )
        world = demo_seed(triton_grpc_url=server.grpc_url, model_repository=repository)
        endpoints = list(world.endpoints)
        campaigns = [world.campaign]
        if options["real_models"]:
            real = demo_seed_real_models(triton_grpc_url=server.grpc_url)
            endpoints += real.endpoints
            campaigns.append(real.campaign)
        seeded = [campaign.name for campaign in campaigns]
        if options["seed_only"]:
            names = ", ".join(repr(name) for name in seeded)
            self.stdout.write(f"Seeded {world.organization.name}: campaign {names}.")
            return
        try:
            TritonEnvironment.locate(settings.ARENA_TRITON_ENV)
        except TritonEnvironmentError as exc:
            raise CommandError(str(exc)) from exc
        if options["real_models"]:
            real_models_check(Path(settings.ARENA_TRITON_ENV), Path(settings.ARENA_LLM_MODEL_REPOSITORY))
        models = ", ".join(e.name for e in endpoints)
        self.stdout.write(f"Starting Triton (local models: {models}) ...")
        if not options["debug"]:
            demo_debug_off()
        demo_webhooks_loopback()
        # The buffer sized to this machine (each start: the machine or the setting may have changed).
        size = demo_buffer_size()
        with organization_scope(world.organization.pk):
            Campaign.objects.filter(pk__in=[c.pk for c in campaigns]).update(buffer_size=size)
            for campaign in campaigns:
                campaign.refresh_from_db()
        with server:
            address = f"http://{options['addr']}:{options['port']}/"
            # ASGI (the battle page's server-sent events stream from an async view), and real Celery
            # workers in this process (battles/generation_worker.py): one for generation, one for the other
            # queues, so a webhook or an export never waits behind the models. Without them tasks would run
            # eagerly, generating battles inside the rater's request.
            with generation_worker():
                self.stdout.write(
                    f"Generating the first battles ({size} a campaign, {generation_concurrency()} at once; "
                    "ARENA_DEMO_BUFFER_SIZE, ARENA_GENERATION_CONCURRENCY) ..."
                )
                started = time.monotonic()
                demo_buffers_fill(campaigns, report=self.stdout.write)
                self.stdout.write(f"  in {time.monotonic() - started:.1f} s")
                self.stdout.write(
                    self.style.SUCCESS(
                        "\nArena is running at " + address + "\n"
                        f"  rater:   {DEMO_RATER} / {DEMO_PASSWORD}   (vote at {address})\n"
                        f"  manager: {DEMO_MANAGER} / {DEMO_PASSWORD}   (console at {address}admin/)\n"
                        f"  Triton:  grpc {server.grpc_url}, http {server.http_url}\n"
                        "  Webhooks may call loopback (a receiver on this machine); the judge 'Demo judge' is ready.\n"
                        "Stop with Ctrl-C.\n"
                    )
                )
                uvicorn.run(
                    web_application(),
                    host=options["addr"],
                    port=options["port"],
                    lifespan="off",
                    log_level="info",
                    timeout_graceful_shutdown=2,
                )
