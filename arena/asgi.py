"""The ASGI application production serves (gunicorn with uvicorn workers): async views on Django's ASGI
handler, sync views on its WSGI handler in a pool of threads (core/asgi.py says why and what it saves)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.base")
django.setup(set_prefix=False)

from core.asgi import web_application  # noqa: E402

application = web_application()
