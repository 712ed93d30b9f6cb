"""The foundation every app stands on, and that knows none of them.

- ``errors``: the domain errors services raise (``NotFound``, ``PermissionDenied``, ``Invalid``,
  ``Conflict``, ``LimitReached``), with no HTTP in sight;
- ``http``: the request types of views and admin, the client address behind proxies, and the one
  mapping of domain errors to HTTP (pages and DRF's exception handler);
- ``api``: the REST API's shared plumbing (one error body, cursor pages, filters, the body-size limit);
- ``outbound``: which addresses the platform may call on a tenant's behalf (the rule against SSRF);
- ``tasks``: ``TransactionAwareTask``, the base of every Celery task (sent when the transaction commits);
- ``spreadsheet``: ``csv_cell``, which every CSV writer passes its cells through (no formula runs in a
  spreadsheet that opens an export).

Layers (checked by import-linter, ``pyproject.toml``): ``arena`` (the project: settings, URLs, the Celery
app, the admin site) on top, then ``ranking`` -> ``battles`` -> ``serving`` -> ``raters`` -> ``core``.
``core`` imports no app and not the project. It is a plain package, not a Django app: it has no models."""
