"""Test settings: the same platform, faster hashing, and rate limits off unless a test turns them on."""

from .local import *  # noqa: F403

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
