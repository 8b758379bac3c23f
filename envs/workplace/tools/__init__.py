"""The 27 workplace tools, as typed methods over one session's SQLite database, one module per domain.

Names and arguments follow NeMo Gym's workplace_assistant (itself WorkBench's toolkit), so its
datasets replay unchanged. What differs, on purpose:

* every search is paginated (``page``, ``page_size``) and reports ``total`` and
  ``total_pages``, where WorkBench silently returns the first five matches;
* arguments are validated by their schema (types, enums, ISO dates, email syntax) and per field
  for the ``update`` tools; a bad call raises :class:`~textgym.error.ToolError`, which the env
  returns as the tool message, and changes nothing;
* any syntactically valid address may receive mail, not only addresses in the directory;
* IDs may be given without their leading zeros (``"42"`` is ``"00000042"``).

Every write records the table and the id of the row it touched in
:attr:`WorkplaceTools.touched`, which lets the verifier read only those rows. The domains:
:mod:`.inbox` (directory and email), :mod:`.calendar_events`, :mod:`.analytics`,
:mod:`.project_tasks` and :mod:`.customers`, over the shared rows of :mod:`.records`.
"""

from __future__ import annotations

from textgym.envs.workplace.tools.analytics import AnalyticsTools
from textgym.envs.workplace.tools.calendar_events import CalendarTools
from textgym.envs.workplace.tools.customers import CustomerTools
from textgym.envs.workplace.tools.inbox import InboxTools
from textgym.envs.workplace.tools.project_tasks import ProjectTaskTools
from textgym.envs.workplace.tools.records import GuardedToolset
from textgym.tools import Toolset

TOOL_NAMES: tuple[str, ...] = (
    "company_directory_find_email_address",
    "email_get_email_information_by_id",
    "email_search_emails",
    "email_send_email",
    "email_delete_email",
    "email_forward_email",
    "email_reply_email",
    "calendar_get_event_information_by_id",
    "calendar_search_events",
    "calendar_create_event",
    "calendar_delete_event",
    "calendar_update_event",
    "analytics_get_visitor_information_by_id",
    "analytics_create_plot",
    "analytics_total_visits_count",
    "analytics_engaged_users_count",
    "analytics_traffic_source_count",
    "analytics_get_average_session_duration",
    "project_management_get_task_information_by_id",
    "project_management_search_tasks",
    "project_management_create_task",
    "project_management_delete_task",
    "project_management_update_task",
    "customer_relationship_manager_search_customers",
    "customer_relationship_manager_update_customer",
    "customer_relationship_manager_add_customer",
    "customer_relationship_manager_delete_customer",
)


class WorkplaceTools(InboxTools, CalendarTools, AnalyticsTools, ProjectTaskTools, CustomerTools):
    """The toolkit bound to one session database: every domain's tools (see :class:`.records.SessionRecords`)."""

    def toolset(self) -> Toolset:
        """All 27 tools, bound to this object, in NeMo Gym's order."""
        return GuardedToolset(getattr(self, name) for name in TOOL_NAMES)
