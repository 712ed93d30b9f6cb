from django.contrib.admin.apps import AdminConfig


class ArenaAdminConfig(AdminConfig):
    default_site = "arena.admin_site.ArenaAdminSite"
