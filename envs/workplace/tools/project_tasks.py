"""The project management tools: read, search, create, update and delete tasks."""

from __future__ import annotations

from typing import Any, Literal

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools.arguments import Day, Email, Page, PageSize, canonical_date, check_email, nonempty_text, one_of
from textgym.envs.workplace.tools.records import SessionRecords

TASK_FIELDS = {
    "task_name": nonempty_text,
    "assigned_to_email": check_email,
    "list_name": one_of(S.LIST_NAMES),
    "due_date": canonical_date,
    "board": one_of(S.BOARDS),
}


class ProjectTaskTools(SessionRecords):
    """The ``project_management_*`` tools."""

    def project_management_get_task_information_by_id(
        self,
        task_id: str,
        field: Literal["task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"] | None = None,
    ) -> dict[str, Any]:
        """Returns a task by its ID: one field, or the whole task when field is omitted.

        Args:
            task_id: 8-digit ID of the task.
            field: Field to return.
        """
        return self._get(S.PROJECT_TASKS, task_id, field)

    def project_management_search_tasks(
        self,
        task_name: str | None = None,
        assigned_to_email: Email | None = None,
        list_name: S.ListName | None = None,
        due_date: Day | None = None,
        board: S.Board | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches project tasks by any combination of fields, ordered by due date.

        Args:
            task_name: Words that must all appear in the task name.
            assigned_to_email: Email address of the person assigned to the task.
            list_name: List the task is in.
            due_date: Due date, YYYY-MM-DD.
            board: Board the task belongs to.
            page: Page number of results, from 1.
            page_size: Number of tasks per page.
        """
        where = self._where(S.PROJECT_TASKS)
        where.words(task_name or "")
        where.equal(assigned_to_email=assigned_to_email, list_name=list_name, board=board)
        if due_date:
            where.add("due_date = ?", canonical_date(due_date))
        return self._page(S.PROJECT_TASKS, where, page, page_size, "tasks")

    def project_management_create_task(
        self, task_name: str, assigned_to_email: Email, list_name: S.ListName, due_date: Day, board: S.Board
    ) -> dict[str, Any]:
        """Creates a new task.

        Args:
            task_name: Name of the task.
            assigned_to_email: Email address of the person assigned to the task.
            list_name: List the task goes into.
            due_date: Due date, YYYY-MM-DD.
            board: Board the task belongs to.
        """
        task_id = self._create(
            S.PROJECT_TASKS,
            {
                "task_name": nonempty_text(task_name),
                "assigned_to_email": assigned_to_email.strip(),
                "list_name": list_name,
                "due_date": canonical_date(due_date),
                "board": board,
            },
        )
        return {"status": "created", "task_id": task_id}

    def project_management_delete_task(self, task_id: str) -> dict[str, Any]:
        """Deletes a task by its ID.

        Args:
            task_id: 8-digit ID of the task.
        """
        return {"status": "deleted", "task_id": self._delete(S.PROJECT_TASKS, task_id)}

    def project_management_update_task(
        self,
        task_id: str,
        field: Literal["task_name", "assigned_to_email", "list_name", "due_date", "board"],
        new_value: str,
    ) -> dict[str, Any]:
        """Updates one field of a task.

        Args:
            task_id: 8-digit ID of the task.
            field: Field to update.
            new_value: New value (list_name one of Backlog/In Progress/In Review/Completed; board one of Back end/Front end/Design; due_date YYYY-MM-DD).
        """
        return self._update(S.PROJECT_TASKS, task_id, field, TASK_FIELDS[field](new_value))
