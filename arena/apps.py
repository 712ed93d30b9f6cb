from django.contrib.admin.apps import AdminConfig


class ArenaAdminConfig(AdminConfig):
    default_site = "arena.admin_site.ArenaAdminSite"

    def ready(self) -> None:
        super().ready()
        from . import checks  # noqa: F401  (registers the project's deployment checks)
