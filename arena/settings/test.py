"""Test settings: the same platform, faster hashing, and rate limits off unless a test turns them on.

Under pytest-xdist (scripts/test runs the suite on every core) each worker process is its own world:
pytest-django gives it its own test database (``test_<name>_gw<N>``), and this module gives it its own
Redis database (the cache, rate limits and the Celery broker: worker N uses REDIS_URL's database minus N,
so two workers never consume each other's tasks or flush each other's keys) and its own export folder.
These are set in the environment before the base settings read it, so the processes a test starts (a
Celery worker, a web server) inherit the same isolation."""

import os
import re
from pathlib import Path

from .env import ImproperEnvironment


def _worker_index() -> int | None:
    """The xdist worker's number (``gw3`` -> 3), or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if re.fullmatch(r"gw\d+", worker) else None


_WORKER = _worker_index()
if _WORKER is not None and not os.environ.get("ARENA_TEST_WORKER_ISOLATED"):
    os.environ["ARENA_TEST_WORKER_ISOLATED"] = "1"  # once: a child process inherits the result
    _redis = os.environ.get("REDIS_URL", "")
    _match = re.fullmatch(r"(redis://[^/]+)/(\d+)", _redis)
    if _redis and not _match:
        raise ImproperEnvironment(f"REDIS_URL={_redis!r}: parallel tests need a redis://host:port/<db> URL")
    if _match:
        _db = int(_match.group(2)) - _WORKER
        if _db < 0:
            raise ImproperEnvironment(f"REDIS_URL={_redis!r}: too few Redis databases below it for worker {_WORKER}")
        os.environ["REDIS_URL"] = f"{_match.group(1)}/{_db}"
    _exports = Path(__file__).resolve().parents[2] / "var" / f"exports-gw{_WORKER}"
    os.environ.setdefault("ARENA_EXPORT_ROOT", str(_exports))

from .local import *  # noqa: E402, F403

# No connection pool in the test process unless the environment asks for one: the test databases are created,
# flushed and dropped under the pool's feet. The processes a test starts with production settings (the
# reliability stack's web server) have it, as deployed.
if "DB_POOL_MAX_SIZE" not in os.environ and DATABASES["default"]["ENGINE"] == "core.postgresql":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"  # noqa: F405
    DATABASES["default"]["OPTIONS"].pop("pool")  # noqa: F405
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = False  # noqa: F405
    # Nor the server-side binding that comes with the pool (tests that want it set DB_SERVER_SIDE_BINDING).
    if "DB_SERVER_SIDE_BINDING" not in os.environ:
        DATABASES["default"]["OPTIONS"].pop("server_side_binding", None)  # noqa: F405
        DATABASES["default"]["OPTIONS"].pop("prepare_threshold", None)  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
RATELIMIT_ENABLE = False
# Every test client is 127.0.0.1: the published boards' per-IP limit would count across tests.
ARENA_PUBLIC_RATE = ""
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# The suite's own Triton runs on loopback at free ports: allow loopback (tests of the rule override it).
ARENA_MODEL_HOSTS = ["127.0.0.0/8", "[::1]"]
# Rater-typed prompts are generated like pool battles (tests/conftest.py's generation_worker_run), so
# tests of prompts, caps and drafts need no streaming reader; the streaming tests make live battles
# themselves (tests/battles/test_streaming.py), the browser test runs a worker (ARENA_LIVE_STREAMING on).
ARENA_LIVE_STREAMING = False

# Attribute runs retry failed judge calls and a cold first batch; the tests' judges fail on cue, so the
# waits are short here (the production defaults are in base.py).
ARENA_RATIO_RETRY_WAIT_MS = 5
ARENA_RATIO_COLD_START_WAITS_S = (0.05, 0.05)
