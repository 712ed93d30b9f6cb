"""The platform's settings with the Django floor's URLs first (``benchmarks/floor_app.py``; load.py's floor
phase). Nothing else differs."""

from arena.settings.base import *  # noqa: F403

ROOT_URLCONF = "benchmarks.floor_app"
