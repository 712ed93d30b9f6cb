"""Settings for a developer's machine and the demo: DEBUG on unless the environment says otherwise.

``manage.py`` and the Celery app default to this module; the WSGI/ASGI entry points (what a
production server imports) default to ``arena.settings.base``, where DEBUG is off and SECRET_KEY is
required, so a deployment that forgets a variable fails closed rather than open."""

import os

os.environ.setdefault("DEBUG", "true")

from .base import *  # noqa: E402, F403

if "ARENA_MODEL_HOSTS" not in os.environ:
    # The demo's Triton runs on loopback (manage.py demo, triton_serve): allow exactly its two ports.
    ARENA_MODEL_HOSTS = [f"127.0.0.1:{ARENA_TRITON_HTTP_PORT}", f"127.0.0.1:{ARENA_TRITON_GRPC_PORT}"]  # noqa: F405
