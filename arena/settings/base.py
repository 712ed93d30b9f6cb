"""Settings for every environment; values come from the environment.

Defaults are safe for production (DEBUG off, SECRET_KEY required) and otherwise give a complete local
platform: SQLite, tasks run eagerly, local-memory cache, and the Triton server started by
``manage.py demo`` on loopback. ``arena.settings.local`` turns DEBUG on for development.
"""

from __future__ import annotations

import re
from pathlib import Path

import dj_database_url

from core import queues

from .env import (
    ImproperEnvironment,
    env_bool,
    env_hosts,
    env_int,
    env_list,
    env_networks,
    env_path,
    env_rate,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parents[2]
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperEnvironment("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "insecure-local-development-key-change-me"  # noqa: S105 - only ever used with DEBUG on
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "arena.apps.ArenaAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "allauth",
    "allauth.account",
    "raters",
    "battles",
    "serving",
    "ranking",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Cache-Control: no-store on the API and on whatever a signed-in person is shown (core/http.py).
    "core.http.PrivateNoStoreMiddleware",
    "arena.csp.ContentSecurityPolicyMiddleware",
    "core.api.ApiBodyLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Each cached fact (core.cached: the session, its user and their organisations...) read once a request.
    "core.cached.CachedFactsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's AuthenticationMiddleware with the session's user from the shared cache (raters.principals).
    "raters.middleware.SessionUserMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # Every request runs inside its principal's tenant scope (an unscoped tenant query raises).
    "raters.middleware.TenantScopeMiddleware",
    "django_ratelimit.middleware.RatelimitMiddleware",
]

ROOT_URLCONF = "arena.urls"
WSGI_APPLICATION = "arena.wsgi.application"
ASGI_APPLICATION = "arena.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_url(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'arena.sqlite3'}",
    schemes=("sqlite", "postgres", "postgresql", "pgsql"),
)
DATABASES = {"default": dj_database_url.parse(DATABASE_URL or "", conn_max_age=env_int("DB_CONN_MAX_AGE", 0))}
# A pool of PostgreSQL connections per process (psycopg_pool through core.postgresql, Django's "pool" option),
# DB_POOL_MAX_SIZE connections at most (default 10; 0: none, a connection per request). The ASGI web's
# requests each run in a thread of their own and so cannot keep a connection (DB_CONN_MAX_AGE is for sync
# workers); a fresh one per request cost the load run a third of its throughput (docs/reliability/load.md).
# Each connection is checked as it is handed out (a restarted server's dead ones are replaced), a lost one is
# re-made within a second of the server's return (core/postgresql/base.py), and a request waits up to
# DB_POOL_TIMEOUT_S for a connection while the pool is busy (a burst queues rather than fails), but only
# DB_POOL_UNREACHABLE_TIMEOUT_S while the server cannot be reached; then the 503 page with Retry-After.
# The compose file's Celery workers set 0: a prefork worker cannot carry a pool across its fork, and Celery
# closes the connections after every task anyway.
_POSTGRESQL = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 10, minimum=0)
if DB_POOL_MAX_SIZE and _POSTGRESQL:
    if DATABASES["default"].get("CONN_MAX_AGE"):
        raise ImproperEnvironment("DB_POOL_MAX_SIZE and DB_CONN_MAX_AGE exclude each other: set one of them")
    DATABASES["default"]["ENGINE"] = "core.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DB_POOL_MAX_SIZE),
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": float(env_int("DB_POOL_TIMEOUT_S", 10, minimum=1)),
        "unreachable_timeout": float(env_int("DB_POOL_UNREACHABLE_TIMEOUT_S", 1, minimum=0)),
    }
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The web's handlers (arena/asgi.py, core/asgi.py): async views (the live battle's event stream) on Django's
# ASGI handler, every sync view on its WSGI handler in ARENA_WEB_THREADS threads a worker process (default:
# the pool's size, 10 without a pool: a thread holds at most one connection). The ASGI handler's thread hops
# cost 3.5-4.5 ms of CPU on the sign-in page (docs/reliability/load.md). ARENA_ASGI_SYNC_VIEWS=asgi serves
# every view through the ASGI handler as before.
ARENA_WEB_THREADS = env_int("ARENA_WEB_THREADS", DB_POOL_MAX_SIZE or 10, minimum=1)
ARENA_ASGI_SYNC_VIEWS = env_str("ARENA_ASGI_SYNC_VIEWS", "wsgi")
if ARENA_ASGI_SYNC_VIEWS not in ("wsgi", "asgi"):
    raise ImproperEnvironment(f"ARENA_ASGI_SYNC_VIEWS={ARENA_ASGI_SYNC_VIEWS!r}: wsgi (the default) or asgi")
# Server-side parameter binding and prepared statements (Django's "server_side_binding" and psycopg 3's
# "prepare_threshold", which Django otherwise sets to None): the parameters travel apart from the SQL, and
# a statement sent five times on a connection is prepared, so PostgreSQL plans it once, not on every
# execution. Planning was three quarters of PostgreSQL's CPU on the load run's vote path, and binding cut
# PostgreSQL's CPU a vote by 61% (docs/reliability/load.md). Only worth it where connections live across
# requests (the pool, or DB_CONN_MAX_AGE): a prepared statement dies with its connection. So on by default
# with the pool or persistent connections (sync workers), off with a connection a request (as in Django);
# DB_SERVER_SIDE_BINDING=0 turns it off behind a transaction-mode PgBouncer (which cannot keep a session's
# prepared statements).
_CONNECTIONS_PERSIST = bool(DB_POOL_MAX_SIZE or DATABASES["default"].get("CONN_MAX_AGE"))
DB_SERVER_SIDE_BINDING = env_bool("DB_SERVER_SIDE_BINDING", _CONNECTIONS_PERSIST and _POSTGRESQL)
if DB_SERVER_SIDE_BINDING and _POSTGRESQL:
    DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 5})
# The rater's cycle's statements compiled once a process and run with each request's values (core.prepared):
# 48 -> 26 ms of CPU a cycle in process (docs/reliability/load.md). PostgreSQL only; ARENA_PREPARED=0 builds
# every statement anew through the ORM, as before 2026-12-05.
ARENA_PREPARED = env_bool("ARENA_PREPARED", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Votes, battles and answers are written from concurrent requests and worker threads: wait for the lock
    # instead of failing at once. A transaction takes the write lock when it begins (BEGIN IMMEDIATE), not
    # at its first write: one that read first and wrote later (the buffer's fill: count, pick, create)
    # could not wait for a writer that had come in between, and failed with "database is locked" at once,
    # whatever the timeout (SQLite refuses to upgrade a read lock that would deadlock).
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
# Two PostgreSQL roles (docs/deployment/index.md): DATABASE_URL is the application's (no superuser, owns
# nothing; SELECT and INSERT only on the vote log), DATABASE_MIGRATE_URL the owner's, which runs
# `manage.py migrate --database migrate` and `manage.py db_grants --database migrate`. Tests use the
# default database for it (MIRROR): the alias adds no test database.
DATABASE_MIGRATE_URL = env_url("DATABASE_MIGRATE_URL", None, schemes=("postgres", "postgresql", "pgsql"))
if DATABASE_MIGRATE_URL:
    DATABASES["migrate"] = dj_database_url.parse(DATABASE_MIGRATE_URL)
    DATABASES["migrate"]["TEST"] = {"MIRROR": "default"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", None, schemes=("redis", "rediss", "unix"))
if REDIS_URL:
    # arena.cache.FailoverRedisCache: while Redis is down, a local in-process cache answers (and the log
    # says so), so rate limits degrade to per-process limits instead of failing every request. Short
    # socket timeouts: a Redis that does not answer must not hold a request for long.
    CACHES = {
        "default": {
            "BACKEND": "arena.cache.FailoverRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True
# After a vote, the campaign's leaderboards are recomputed this many seconds later (votes in between
# share the one recompute).
ARENA_RANKING_DEBOUNCE_S = env_int("ARENA_RANKING_DEBOUNCE_S", 30, minimum=0)
# How long a recompute mark outlives the worker that set it (ranking/services/recompute.py): a queued task's mark
# expires this long after its countdown, a computing task renews its mark every third of it. A killed
# worker therefore holds nothing for longer, and beat takes over.
ARENA_RANKING_LEASE_S = env_int("ARENA_RANKING_LEASE_S", 10, minimum=1)
# Beat's safety net: recompute open campaigns with votes newer than their snapshot that nothing is
# working on. Cheap (two indexed queries per open campaign), so frequent: with the lease it bounds how
# stale a leaderboard gets after a worker died to about debounce + lease + this + the computation.
ARENA_RANKING_SCHEDULE_S = env_int("ARENA_RANKING_SCHEDULE_S", 15, minimum=1)
# Endpoint health (serving/tasks.py): every this many seconds beat asks Triton whether each model of an
# open campaign's active competitors is ready, each check bounded by the timeout (all of an
# organisation's endpoints at once, up to the concurrency). An endpoint goes down after this many failed
# checks in a row (one blip does not pull a model) and is back at the first ready answer.
ARENA_HEALTH_INTERVAL_S = env_int("ARENA_HEALTH_INTERVAL_S", 15, minimum=1)
ARENA_HEALTH_TIMEOUT_S = env_int("ARENA_HEALTH_TIMEOUT_S", 3, minimum=1)
ARENA_HEALTH_DOWN_AFTER = env_int("ARENA_HEALTH_DOWN_AFTER", 2, minimum=1)
ARENA_HEALTH_CONCURRENCY = env_int("ARENA_HEALTH_CONCURRENCY", 16, minimum=1)
# Judge runs (battles/services/judges.py judge_run_execute): how many pairs are judged at once (each pair is two
# calls, one per presentation order), and golden runs' answers generated at once.
ARENA_JUDGE_CONCURRENCY = env_int("ARENA_JUDGE_CONCURRENCY", 4, minimum=1)
# Attribute runs: a judge call that fails (an error, not a refusal) is retried ARENA_RATIO_CALL_RETRIES
# times, the k-th retry after k x ARENA_RATIO_RETRY_WAIT_MS; a first batch whose every call fails (a cold
# judge: loading, not yet served) is asked again after each of ARENA_RATIO_COLD_START_WAITS_S seconds.
ARENA_RATIO_CALL_RETRIES = env_int("ARENA_RATIO_CALL_RETRIES", 2, minimum=0)
ARENA_RATIO_RETRY_WAIT_MS = env_int("ARENA_RATIO_RETRY_WAIT_MS", 500, minimum=0)
ARENA_RATIO_COLD_START_WAITS_S = tuple(float(x) for x in env_list("ARENA_RATIO_COLD_START_WAITS_S", ["5", "20", "60"]))
CELERY_TASK_ACKS_LATE = True
# A broker that went away (Redis restarted) is waited for however long it takes, at start too: a worker
# reconnects rather than exits after kombu's default of 100 attempts (docs/reliability/index.md).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A recompute that runs away is killed and not redelivered (acks on failure/timeout stay on).
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 1800, minimum=10)
# Late acknowledgement: a task whose worker was killed stays unacknowledged in Redis and is delivered
# again after the visibility timeout. It must exceed the longest countdown plus the time limit, or a
# task still running (or a delayed one still waiting in a live worker) would be delivered twice.
CELERY_VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", ARENA_RANKING_DEBOUNCE_S + CELERY_TASK_TIME_LIMIT + 60)
if CELERY_VISIBILITY_TIMEOUT <= ARENA_RANKING_DEBOUNCE_S + CELERY_TASK_TIME_LIMIT:
    raise ImproperEnvironment(
        "CELERY_VISIBILITY_TIMEOUT must exceed ARENA_RANKING_DEBOUNCE_S + CELERY_TASK_TIME_LIMIT "
        "(a shorter one delivers running tasks twice)"
    )
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT}
CELERY_TASK_IGNORE_RESULT = True  # tasks write their results to the database
# How often beat checks every open campaign's battle buffer (stale battles voided, deficits refilled).
ARENA_BUFFER_SCHEDULE_S = env_int("ARENA_BUFFER_SCHEDULE_S", 30, minimum=1)
# Crowd studies: how often beat ends the participants whose time limit passed (their open battle is voided).
ARENA_STUDY_SWEEP_S = env_int("ARENA_STUDY_SWEEP_S", 60, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "leaderboards-recompute-open": {
        "task": "ranking.tasks.leaderboards_recompute_open_task",
        "schedule": float(ARENA_RANKING_SCHEDULE_S),
        # A tick nobody ran before the next one is dropped, not piled up behind a long recompute.
        "options": {"expires": float(ARENA_RANKING_SCHEDULE_S)},
    },
    "endpoints-health-check": {
        "task": "serving.tasks.endpoints_health_check_open_task",
        "schedule": float(ARENA_HEALTH_INTERVAL_S),
        # A late tick is dropped: the next one checks the same endpoints with fresher answers.
        "options": {"expires": float(ARENA_HEALTH_INTERVAL_S)},
    },
}
# Each kind of background work has its own queue and workers (core/queues.py): leaderboards (recompute),
# model calls (generation), webhooks (delivery), export files (exports), beat's sweeps (the default), so a
# crowd's battles never wait behind a recompute, nor one tenant's board behind another's slow webhooks.
# How many tasks of one kind one organisation may run at once across the deployment (raters.tenancy.TenantTask's
# organization_slots): "generation" is every model call to the organisation's own endpoints (battles, judge,
# golden and attribute runs). Below the generator's processes (the compose file's GENERATION_CONCURRENCY, 4),
# so that one organisation's flood, or its slow endpoint, always leaves workers to the others. 0: no limit.
ARENA_ORGANIZATION_SLOTS = {"generation": env_int("ARENA_GENERATION_ORG_CONCURRENCY", 3, minimum=0)}
CELERY_TASK_ROUTES = queues.ROUTES
CELERY_BEAT_SCHEDULE["battle-buffers-maintain"] = {
    "task": "battles.tasks.buffer_maintain_open_task",
    "schedule": float(ARENA_BUFFER_SCHEDULE_S),
    "options": {"expires": float(ARENA_BUFFER_SCHEDULE_S)},
}
CELERY_BEAT_SCHEDULE["study-participants-time-out"] = {
    "task": "battles.tasks.participants_time_out_task",
    "schedule": float(ARENA_STUDY_SWEEP_S),
    "options": {"expires": float(ARENA_STUDY_SWEEP_S)},
}
# Promotions (a board's winner rolled out in stages through an A/B experiment): how often beat watches the
# boards of the running ones (ranking/services/promotions.py).
ARENA_PROMOTION_CHECK_S = env_int("ARENA_PROMOTION_CHECK_S", 60, minimum=1)
CELERY_BEAT_SCHEDULE["promotions-check"] = {
    "task": "ranking.tasks.promotions_check_task",
    "schedule": float(ARENA_PROMOTION_CHECK_S),
    "options": {"expires": float(ARENA_PROMOTION_CHECK_S)},
}
# Asynchronous exports (POST /api/v1/campaigns/<id>/exports/): the worker writes each file under this
# folder (one subfolder per organisation); beat deletes files older than the retention (days) and marks
# their jobs expired. Export tasks run on their own queue (exports).
ARENA_EXPORT_ROOT = env_path("ARENA_EXPORT_ROOT", VAR_DIR / "exports")
ARENA_EXPORT_RETENTION_DAYS = env_int("ARENA_EXPORT_RETENTION_DAYS", 7, minimum=1)
CELERY_BEAT_SCHEDULE["exports-purge"] = {
    "task": "battles.tasks.export_jobs_purge_task",
    "schedule": 3600.0,
    "options": {"expires": 3600.0},
}
# Rater-typed prompts streamed live (see docs/serving/streaming.md): a generation worker streams both
# sides into the battle's live channel while the page reads it. On by default with Redis (the channel
# between worker and web); without it tasks run eagerly, so typed prompts are generated like pool
# battles unless a generation worker shares this process (manage.py demo, battles/generation_worker.py).
ARENA_LIVE_STREAMING = env_bool("ARENA_LIVE_STREAMING", bool(REDIS_URL))
# The workers a process runs for itself (manage.py demo, battles/generation_worker.py): how many battles its
# generation worker generates at once (0: one per two cores, at least one), and the demo campaigns' buffer
# (0: two battles per battle generated at once, so one round is waiting while the next is generated).
ARENA_GENERATION_CONCURRENCY = env_int("ARENA_GENERATION_CONCURRENCY", 0, minimum=0)
ARENA_DEMO_BUFFER_SIZE = env_int("ARENA_DEMO_BUFFER_SIZE", 0, minimum=0)
# Most rows one prompt file may hold (API and console imports); a larger file is refused whole.
ARENA_PROMPT_IMPORT_MAX_ROWS = env_int("ARENA_PROMPT_IMPORT_MAX_ROWS", 100_000, minimum=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = "username"
# Sign-up must not tell whether an e-mail is registered: with mandatory verification (the production
# default) a sign-up for a registered address ends on the same "check your e-mail" page as any other and
# the owner gets a mail instead. "none" (DEBUG's default: the demo and tests) logs new users in at once,
# which cannot hide a clash; `manage.py check --deploy` warns about it (arena.W001).
ACCOUNT_PREVENT_ENUMERATION = True
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "none" if DEBUG else "mandatory")
if ACCOUNT_EMAIL_VERIFICATION not in {"none", "optional", "mandatory"}:
    raise ImproperEnvironment("ACCOUNT_EMAIL_VERIFICATION must be none, optional or mandatory")
ACCOUNT_LOGOUT_ON_GET = False
ACCOUNT_ADAPTER = "arena.accounts.AccountAdapter"
# Failed logins are limited per client address (behind the ARENA_TRUSTED_PROXIES) and per
# account, whatever address they come from: allauth's "<n>/<period>/ip,<n>/<period>/key" (key: e-mail).
ACCOUNT_RATE_LIMITS = {"login_failed": env_str("ARENA_LOGIN_FAILED_RATE", "10/m/ip,5/5m/key")}
if not re.fullmatch(r"\d+/\d*[smhd](/(ip|key))?(,\d+/\d*[smhd](/(ip|key))?)*", ACCOUNT_RATE_LIMITS["login_failed"]):
    raise ImproperEnvironment("ARENA_LOGIN_FAILED_RATE must look like 10/m/ip,5/5m/key")
LOGIN_REDIRECT_URL = "/"
LOGIN_URL = "/accounts/login/"
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "arena@localhost")
# The address people reach the site at (https://arena.example.org), for the absolute links it mails or hands
# out (invitations, crowd study links: core/site.py); unset, a link is built from the request's address.
ARENA_SITE_URL = (env_url("ARENA_SITE_URL", None, schemes=("https", "http")) or "").rstrip("/")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "raters.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Authenticated; a read-only key may only read (raters/authentication.py).
    "DEFAULT_PERMISSION_CLASSES": ["raters.authentication.ScopedAccess"],
    # Every refusal in one body, {"error": {"code", "message", "fields"}}; services' domain errors
    # (core.errors) get their status from core.http's one table.
    "EXCEPTION_HANDLER": "core.http.api_exception_handler",
    "DEFAULT_PAGINATION_CLASS": "core.api.CursorPage",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["raters.authentication.ApiKeyThrottle"],
    "DEFAULT_SCHEMA_CLASS": "arena.api_schema.ArenaAutoSchema",
    # JSON only: the interactive page is the schema's Swagger UI (/api/v1/docs/), which runs under the
    # site's Content-Security-Policy; DRF's browsable pages carry inline scripts that it would block.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Arena API",
    "DESCRIPTION": (
        "Blind pairwise evaluation of LLMs: campaigns, prompts, shadow battles from your gateway, "
        "leaderboards with honest intervals, the vote log and preference pairs, A/B assignment, webhooks.\n\n"
        "Authenticate with `Authorization: Api-Key arena_<prefix>_<secret>` (an organisation's key, made in "
        "the console). Lists are cursor-paginated (`?limit=`, then follow `next`). Every error has the body "
        '`{"error": {"code": "...", "message": "...", "fields": {...}}}`. Another organisation\'s objects are 404.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Choice sets that share a field name ("status") get names of their own in generated clients.
    "ENUM_NAME_OVERRIDES": {"BattleStatusEnum": "battles.models.Battle.Status"},
}
# Requests per minute (or /s, /h, /d) for each API key unless the key sets its own (ApiKey.rate_limit).
ARENA_API_KEY_RATE = env_str("ARENA_API_KEY_RATE", "1200/m")
# The largest request body the API reads (prompt files, batches of shadow battles); larger ones get 413.
ARENA_API_MAX_BODY_BYTES = env_int("ARENA_API_MAX_BODY_BYTES", 32 * 1024 * 1024, minimum=1024)

RATELIMIT_VIEW = "battles.views.ratelimited"
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", True)
# Per rater: how many votes and new battles a minute before the server answers 429.
ARENA_VOTE_RATE = env_str("ARENA_VOTE_RATE", "30/m")
ARENA_BATTLE_RATE = env_str("ARENA_BATTLE_RATE", "30/m")
# Per network address (the client behind the ARENA_TRUSTED_PROXIES), across every account:
# a script rotating accounts is stopped at its address. Higher than one rater's, since a lab or an
# office behind one NAT address shares it; empty: no limit by address.
ARENA_VOTE_IP_RATE = env_rate("ARENA_VOTE_IP_RATE", "120/m")
ARENA_BATTLE_IP_RATE = env_rate("ARENA_BATTLE_IP_RATE", "120/m")
# Crowd-study entries per network address: the link is public to a vendor's whole panel, and each new
# participant id makes an account.
ARENA_STUDY_ENTRY_RATE = env_str("ARENA_STUDY_ENTRY_RATE", "20/m")
# Published boards (ranking.apis.PublicRateThrottle): requests a minute per client IP to the public,
# keyless endpoints (empty: no limit). The serialized latest leaderboard is cached this many seconds per snapshot (a new
# version is a new snapshot; only a competitor's live model, version and retired flag can lag).
ARENA_PUBLIC_RATE = env_str("ARENA_PUBLIC_RATE", "60/m")
ARENA_LEADERBOARD_CACHE_S = env_int("ARENA_LEADERBOARD_CACHE_S", 30, minimum=0)

# The Triton server that serves the demo's local models (started by ``manage.py demo``).
ARENA_TRITON_HTTP_PORT = env_int("ARENA_TRITON_HTTP_PORT", 8500, minimum=1)
ARENA_TRITON_GRPC_PORT = env_int("ARENA_TRITON_GRPC_PORT", 8501, minimum=1)
ARENA_MODEL_REPOSITORY = BASE_DIR / "serving" / "model_repository"
# CPU stand-ins for the GPU backends' contracts (Triton's vLLM backend, the TensorRT-LLM ensemble):
# served next to the shipped models where a streamed battle or a contract test needs them.
ARENA_STANDIN_REPOSITORY = BASE_DIR / "serving" / "standin_repository"
# The demo's judge (serving/judge_repository/arena-judge): a deterministic model built for judging, never a
# competitor, so the demo's judge runs judge every campaign (manage.py demo serves it next to the models).
ARENA_JUDGE_REPOSITORY = BASE_DIR / "serving" / "judge_repository"
# Opt-in real small LLMs (llama.cpp, vLLM-backend contract), installed into the Triton environment by
# `ARENA_REAL_MODELS=1 scripts/bootstrap`; the demo serves them too when ARENA_REAL_MODELS is on.
ARENA_LLM_MODEL_REPOSITORY = BASE_DIR / "serving" / "llm_model_repository"
ARENA_REAL_MODELS = env_bool("ARENA_REAL_MODELS", False)
# The Triton server's own virtual environment (nvidia-pytriton, numpy<2), made by scripts/bootstrap.
ARENA_TRITON_ENV = Path(env_str("ARENA_TRITON_ENV", "") or BASE_DIR / ".venv-triton").expanduser()
# Which internal model servers a tenant's endpoint may name (core/outbound.py): host names, addresses
# or networks, each optionally with a port. Any other host must resolve to public addresses only, so a
# manager cannot make the server call loopback, private ranges or link-local (metadata) addresses.
ARENA_MODEL_HOSTS = env_hosts("ARENA_MODEL_HOSTS", [])
# The same rule for webhook URLs (raters/webhook_transport.py); a listed host may also be plain http://.
ARENA_WEBHOOK_HOSTS = env_hosts("ARENA_WEBHOOK_HOSTS", [])
# Webhook deliveries (docs/api/webhooks.md): each POST's socket timeout and how much of the answer is read;
# failed attempts are retried after base * 4^(n-1) seconds (capped, with +-20% jitter) up to the maximum
# number of attempts; an endpoint whose attempts have all failed for at least DISABLE_AFTER_S and at
# least DISABLE_AFTER_FAILURES times in a row is disabled. Beat sends what is due every SWEEP_S.
ARENA_WEBHOOK_TIMEOUT_S = env_int("ARENA_WEBHOOK_TIMEOUT_S", 10, minimum=1)
ARENA_WEBHOOK_RESPONSE_MAX_BYTES = env_int("ARENA_WEBHOOK_RESPONSE_MAX_BYTES", 65536, minimum=0)
ARENA_WEBHOOK_MAX_ATTEMPTS = env_int("ARENA_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
ARENA_WEBHOOK_RETRY_BASE_S = env_int("ARENA_WEBHOOK_RETRY_BASE_S", 30, minimum=1)
ARENA_WEBHOOK_RETRY_MAX_S = env_int("ARENA_WEBHOOK_RETRY_MAX_S", 6 * 3600, minimum=1)
ARENA_WEBHOOK_DISABLE_AFTER_FAILURES = env_int("ARENA_WEBHOOK_DISABLE_AFTER_FAILURES", 10, minimum=1)
ARENA_WEBHOOK_DISABLE_AFTER_S = env_int("ARENA_WEBHOOK_DISABLE_AFTER_S", 24 * 3600, minimum=0)
ARENA_WEBHOOK_SWEEP_S = env_int("ARENA_WEBHOOK_SWEEP_S", 30, minimum=1)
# Per organisation, at most this many webhook sends at once across every delivery worker (core/slots.py):
# one tenant's slow or flooded receiver holds that many worker threads, never the others' share. A slot
# holder sends its organisation's due deliveries one after another for up to ARENA_WEBHOOK_DRAIN_S.
ARENA_WEBHOOK_ORG_CONCURRENCY = env_int("ARENA_WEBHOOK_ORG_CONCURRENCY", 2, minimum=1)
ARENA_WEBHOOK_DRAIN_S = env_int("ARENA_WEBHOOK_DRAIN_S", 30, minimum=1)
# Certificates of https:// receivers are verified against the system's trust store, or against this PEM
# bundle instead (receivers on an internal network with a private CA).
ARENA_WEBHOOK_CA_FILE = env_str("ARENA_WEBHOOK_CA_FILE", "")
CELERY_BEAT_SCHEDULE["webhook-deliveries-send-due"] = {
    "task": "raters.tasks.webhook_deliveries_due_task",
    "schedule": float(ARENA_WEBHOOK_SWEEP_S),
    "options": {"expires": float(ARENA_WEBHOOK_SWEEP_S)},
}
# The delivery log is kept this many days: beat deletes finished deliveries (succeeded, gave up) created
# longer ago, in batches; deliveries still waiting for an attempt are never deleted. 0 keeps them forever.
ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS = env_int("ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS", 30, minimum=0)
CELERY_BEAT_SCHEDULE["webhook-deliveries-purge"] = {
    "task": "raters.tasks.webhook_deliveries_purge_task",
    "schedule": 3600.0,
    "options": {"expires": 3600.0},
}

SECURE_CONTENT_TYPE_NOSNIFF = True
# Behind a TLS-terminating proxy (docker/: put one in front of web) the app must trust its header, or
# absolute URLs such as invitation links come out as http://.
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The proxies of our own in front of the app (the TLS proxy): addresses or networks. X-Forwarded-For is
# read only from a request whose connecting address is one of them, and the client is its right-most
# entry that is not one of them (core.http.client_ip), for the login throttle and rate limits; empty
# trusts no header. A count of proxies (the former ARENA_TRUSTED_PROXY_COUNT) trusted the header from
# anyone who reached the web port directly, so a setting of it stops start-up rather than being ignored.
ARENA_TRUSTED_PROXIES = env_networks("ARENA_TRUSTED_PROXIES", [])
if env_str("ARENA_TRUSTED_PROXY_COUNT", "").strip() not in ("", "0"):
    raise ImproperEnvironment(
        "ARENA_TRUSTED_PROXY_COUNT is replaced by ARENA_TRUSTED_PROXIES: list your proxies' addresses or "
        "network (docs/deployment/configuration.md) and unset ARENA_TRUSTED_PROXY_COUNT"
    )
RATELIMIT_IP_META_KEY = "core.http.client_ip"
# HTTPS only in production (DEBUG off): redirect plain HTTP and send HSTS for a year, unless turned off
# explicitly (a plain-HTTP trial on localhost: SECURE_SSL_REDIRECT=false SECURE_HSTS_SECONDS=0).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
ARENA_CONTENT_SECURITY_POLICY = env_str(
    "ARENA_CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
)
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Database sessions read through the shared cache, dropped on every save and delete (raters/sessions.py).
SESSION_ENGINE = "raters.sessions"
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
