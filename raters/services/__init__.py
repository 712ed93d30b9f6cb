"""Every write about organisations, people and pools.

One module per concern; this face re-exports every public name, so ``from raters.services import
audit_record`` and ``from raters import services; services.membership_set(...)`` work as before.

- ``audit``: the audit log's one writer (``audit_record``) and the audited save and delete of rows the
  console edits with no rule of their own (``tenant_row_save``, ``tenant_row_delete``).
- ``organizations``: organisations, memberships and roles, users.
- ``pools``: rater pools, their members, and invitation links to them.
- ``api_keys``: an organisation's API keys.
- ``flags``: rater flags, raised and cleared.
- ``attributes``: rater attributes (expertise, language, ...), set by managers or a vendor's link.
- ``webhooks``: webhook endpoints, events, deliveries (attempts, retries, sweep, purge) and their Celery
  tasks (``raters/tasks.py`` re-exports those).
"""

from .api_keys import (
    API_KEY_PREFIX,
    api_key_create,
    api_key_revoke,
    api_key_scope_cap,
    api_key_scopes_for,
    api_keys_revoke_made_by,
)
from .attributes import rater_attribute_remove, rater_attribute_set
from .audit import audit_record, tenant_row_delete, tenant_row_save
from .flags import rater_flag_clear, rater_flag_create, rater_flag_raise
from .organizations import membership_change_check, membership_remove, membership_set, organization_create, user_create
from .pools import InvitationError, invitation_accept, invitation_create, pool_member_add, pool_member_remove, pool_save
from .webhooks import (
    webhook_body,
    webhook_deliver,
    webhook_deliveries_due,
    webhook_deliveries_purge,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_enable,
    webhook_endpoint_update,
    webhook_event_emit,
    webhook_events_subscribed,
    webhook_ping,
)

__all__ = [
    "API_KEY_PREFIX",
    "InvitationError",
    "api_key_create",
    "api_key_scope_cap",
    "api_key_scopes_for",
    "api_keys_revoke_made_by",
    "api_key_revoke",
    "audit_record",
    "invitation_accept",
    "invitation_create",
    "membership_change_check",
    "membership_remove",
    "membership_set",
    "organization_create",
    "pool_member_add",
    "pool_member_remove",
    "pool_save",
    "rater_flag_clear",
    "rater_flag_create",
    "rater_flag_raise",
    "rater_attribute_remove",
    "rater_attribute_set",
    "tenant_row_delete",
    "tenant_row_save",
    "user_create",
    "webhook_body",
    "webhook_deliver",
    "webhook_deliveries_due",
    "webhook_deliveries_purge",
    "webhook_endpoint_create",
    "webhook_endpoint_delete",
    "webhook_endpoint_enable",
    "webhook_endpoint_update",
    "webhook_event_emit",
    "webhook_events_subscribed",
    "webhook_ping",
]
