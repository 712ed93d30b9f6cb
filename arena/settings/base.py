"""Settings for every environment; values come from the environment.

Defaults are safe for production (DEBUG off, SECRET_KEY required) and otherwise give a complete local
platform: SQLite, tasks run eagerly, local-memory cache, and the Triton server started by
``manage.py demo`` on loopback. ``arena.settings.local`` turns DEBUG on for development.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from .env import ImproperEnvironment, env_bool, env_int, env_list, env_str, env_url

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
    "allauth",
    "allauth.account",
    "raters",
    "battles",
    "serving",
    "ranking",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Votes are written from concurrent requests; wait for the lock instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", None, schemes=("redis", "rediss", "unix"))
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
# A recompute that runs away is killed and not redelivered (acks on failure/timeout stay on).
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 1800, minimum=10)
CELERY_TASK_IGNORE_RESULT = True  # tasks write their results to the database
CELERY_BEAT_SCHEDULE = {
    "leaderboards-recompute-open": {
        "task": "ranking.tasks.leaderboards_recompute_open_task",
        "schedule": float(env_int("ARENA_RANKING_SCHEDULE_S", 600, minimum=10)),
    },
}
# After a vote, the campaign's leaderboards are recomputed this many seconds later (votes in between
# share the one recompute).
ARENA_RANKING_DEBOUNCE_S = env_int("ARENA_RANKING_DEBOUNCE_S", 30, minimum=0)
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
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "none")
if ACCOUNT_EMAIL_VERIFICATION not in {"none", "optional", "mandatory"}:
    raise ImproperEnvironment("ACCOUNT_EMAIL_VERIFICATION must be none, optional or mandatory")
ACCOUNT_LOGOUT_ON_GET = False
LOGIN_REDIRECT_URL = "/"
LOGIN_URL = "/accounts/login/"
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")

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
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Services' domain errors (raters.errors) become JSON with their status, mapped in one place.
    "EXCEPTION_HANDLER": "arena.http.api_exception_handler",
}

RATELIMIT_VIEW = "battles.views.ratelimited"
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", True)
# Per rater: how many votes and new battles a minute before the server answers 429.
ARENA_VOTE_RATE = env_str("ARENA_VOTE_RATE", "30/m")
ARENA_BATTLE_RATE = env_str("ARENA_BATTLE_RATE", "30/m")

# The Triton server that serves the demo's local models (started by ``manage.py demo``).
ARENA_TRITON_HTTP_PORT = env_int("ARENA_TRITON_HTTP_PORT", 8500, minimum=1)
ARENA_TRITON_GRPC_PORT = env_int("ARENA_TRITON_GRPC_PORT", 8501, minimum=1)
ARENA_MODEL_REPOSITORY = BASE_DIR / "serving" / "model_repository"
# The Triton server's own virtual environment (nvidia-pytriton, numpy<2), made by scripts/bootstrap.
ARENA_TRITON_ENV = Path(env_str("ARENA_TRITON_ENV", "") or BASE_DIR / ".venv-triton").expanduser()

SECURE_CONTENT_TYPE_NOSNIFF = True
# Behind a TLS-terminating proxy (docker/: put one in front of web) the app must trust its header, or
# absolute URLs such as invitation links come out as http://.
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
