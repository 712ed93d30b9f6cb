"""Several django-ratelimit limits of one view, counted in one round trip.

django-ratelimit's ``ratelimit`` decorator counts each limit on its own: ``cache.add`` (the window's first
request), else ``cache.incr``, two round trips to the cache a limit. The rater's next-battle and vote views have two
limits each (the account and the network address), so a rater's cycle made eight round trips to Redis for them,
half of its calls to Redis (docs/reliability/load.md). ``ratelimits`` keeps django-ratelimit's meaning and its
counters: the same groups (a limit without one is named after the view, as django-ratelimit names it), keys,
rates, windows and cache keys, each made by django-ratelimit's own functions, so ``get_usage`` reads the counters it
writes. It counts every limit of the request at once: the cache's ``incr_windows`` where it has one
(``arena.cache.FailoverRedisCache``: one script in Redis, atomic there, and a counter is never without its
expiry), else ``add`` then ``incr`` a limit, as django-ratelimit does. A request over any of its limits raises
the exception django-ratelimit raises (``RATELIMIT_EXCEPTION_CLASS``, answered by ``RATELIMIT_VIEW``), and
``request.limited`` is set as it sets it.

One difference, on purpose: every limit of a request counts it, also when another limit refuses it (stacked
django-ratelimit decorators stopped counting at the first that refused, so a throttled account's requests no
longer counted against its address). The ``RATELIMIT_ENABLE`` setting turns the limits off as it does there.
The django-ratelimit versions are pinned in pyproject.toml; ``tests/battles/test_rate_limits.py`` checks that the
counters are the ones ``get_usage`` reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import BaseCache, caches
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from django_ratelimit import ALL
from django_ratelimit.core import (  # django-ratelimit's own naming of a limit's counter
    _SIMPLE_KEYS,
    EXPIRATION_FUDGE,
    _get_window,
    _make_cache_key,
    _split_rate,
)
from django_ratelimit.exceptions import Ratelimited

View = TypeVar("View", bound=Callable[..., HttpResponse])


@dataclass(frozen=True)
class Limit:
    """One limit: ``key`` one of django-ratelimit's simple keys (``user``, ``ip``, ``user_or_ip``); ``rate``
    ``(group, request) -> "<count>/<period>"`` or None for no limit; ``group`` the counter's name (the view's
    when None)."""

    key: str
    rate: Callable[[str, HttpRequest], str | None]
    group: str | None = None


def windows_incr(cache: BaseCache, counters: Sequence[tuple[str, int]]) -> list[int]:
    """Count one more in each counter ``(key, seconds)``: created at 1 with that expiry when it is not there,
    else incremented (keeping its expiry); the counts after. One call where the cache can (``incr_windows``)."""
    incr_windows = getattr(cache, "incr_windows", None)
    if incr_windows is not None:
        return list(incr_windows(counters))
    counts = []
    for key, seconds in counters:
        if cache.add(key, 1, seconds):
            counts.append(1)
            continue
        try:
            counts.append(cache.incr(key))
        except ValueError:  # expired between the two calls: a new window
            cache.add(key, 1, seconds)
            counts.append(1)
    return counts


def limits_count(request: HttpRequest, limits: Sequence[Limit], named: str) -> bool:
    """Count the request against each of ``limits`` (``named``: the group of a limit without one) and say whether
    it is over any of them; ``request.limited`` is set as django-ratelimit sets it."""
    counted: list[tuple[str, int, int]] = []  # (cache key, seconds it lives, the limit)
    for limit in limits:
        group = limit.group or named
        rate = limit.rate(group, request)
        if rate is None:
            continue
        count, period = _split_rate(rate)
        value = _SIMPLE_KEYS[limit.key](request)
        key = _make_cache_key(group, _get_window(value, period), rate, value, ALL)
        counted.append((key, period + EXPIRATION_FUDGE, count))
    limited = False
    if counted:
        cache = caches[getattr(settings, "RATELIMIT_USE_CACHE", "default")]
        counts = windows_incr(cache, [(key, seconds) for key, seconds, _ in counted])
        limited = any(n > most for n, (_, _, most) in zip(counts, counted, strict=True))
    request.limited = limited or getattr(request, "limited", False)  # type: ignore[attr-defined]
    return limited


def ratelimits(*limits: Limit) -> Callable[[View], View]:
    """django-ratelimit's ``ratelimit(key=..., rate=..., group=..., block=True)`` for each of ``limits``,
    counted together (see the module's text)."""

    def decorator(view: View) -> View:
        named = f"{view.__module__}.{view.__qualname__}"  # django-ratelimit's name for a limit without a group

        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if getattr(settings, "RATELIMIT_ENABLE", True) and limits_count(request, limits, named):
                raised = getattr(settings, "RATELIMIT_EXCEPTION_CLASS", Ratelimited)
                raise (import_string(raised) if isinstance(raised, str) else raised)()
            return view(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorator
