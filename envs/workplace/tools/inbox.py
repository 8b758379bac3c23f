"""The company directory and email tools: find addresses, read, search, send, forward, reply, delete."""

from __future__ import annotations

from typing import Any, Literal

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools.arguments import Day, Email, Page, PageSize
from textgym.envs.workplace.tools.records import SessionRecords


class InboxTools(SessionRecords):
    """The ``company_directory_*`` and ``email_*`` tools."""

    def _send(self, recipient: str, subject: str, body: str) -> dict[str, Any]:
        email_id = self._create(
            S.EMAILS,
            {
                "inbox/outbox": "outbox",
                "sender": S.USER_EMAIL,
                "recipient": recipient.strip(),
                "subject": subject,
                "sent_datetime": S.NOW_TEXT,
                "body": body,
            },
        )
        return {"status": "sent", "email_id": email_id, "recipient": recipient.strip(), "subject": subject}

    def company_directory_find_email_address(self, name: str = "") -> list[str]:
        """Finds all email addresses in the company directory matching a name (case-insensitive).

        Args:
            name: Name or partial name to search for; every word must match the person's name or address.
        """
        where = self._where(S.DIRECTORY)
        where.words(name)
        return [r["email_address"] for r in self.rows.read(S.DIRECTORY, where, 0, None)[1]]

    def email_get_email_information_by_id(
        self,
        email_id: str,
        field: (
            Literal[
                "email_id",
                "inbox/outbox",
                "sender/recipient",
                "sender",
                "recipient",
                "subject",
                "sent_datetime",
                "body",
            ]
            | None
        ) = None,
    ) -> dict[str, Any]:
        """Retrieves the details of an email by its ID: one field, or the whole email when field is omitted.

        Args:
            email_id: Unique 8-digit ID of the email.
            field: Field to return; 'sender/recipient' is the other party of the email.
        """
        record = self._get(S.EMAILS, email_id, None)
        record["sender/recipient"] = record["sender"] if record["inbox/outbox"] == "inbox" else record["recipient"]
        return record if field is None else {field: record[field]}

    def email_search_emails(
        self,
        query: str = "",
        date_min: Day | None = None,
        date_max: Day | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches emails, newest first; an email matches when every word of the query appears in its subject, body, sender or recipient.

        Args:
            query: Words to search for (empty matches every email).
            date_min: Earliest sent date, inclusive, as YYYY-MM-DD.
            date_max: Latest sent date, inclusive, as YYYY-MM-DD.
            page: Page number of results, from 1.
            page_size: Number of emails per page.
        """
        where = self._where(S.EMAILS)
        where.words(query)
        where.dates("substr(sent_datetime, 1, 10)", date_min, date_max)
        return self._page(S.EMAILS, where, page, page_size, "emails")

    def email_send_email(self, recipient: Email, subject: str, body: str) -> dict[str, Any]:
        """Sends an email to the specified recipient.

        Args:
            recipient: Email address of the recipient.
            subject: Subject line of the email.
            body: Body content of the email.
        """
        return self._send(recipient, subject, body)

    def email_delete_email(self, email_id: str) -> dict[str, Any]:
        """Deletes an email by its ID.

        Args:
            email_id: Unique 8-digit ID of the email to delete.
        """
        return {"status": "deleted", "email_id": self._delete(S.EMAILS, email_id)}

    def email_forward_email(self, email_id: str, recipient: Email) -> dict[str, Any]:
        """Forwards an email (subject prefixed with 'FW: ', same body) to the specified recipient.

        Args:
            email_id: Unique 8-digit ID of the email to forward.
            recipient: Email address of the recipient.
        """
        original = self._get(S.EMAILS, email_id, None)
        return self._send(recipient, "FW: " + original["subject"], original["body"])

    def email_reply_email(self, email_id: str, body: str) -> dict[str, Any]:
        """Replies to an email by its ID: sends the body to the other party with the subject prefixed 'RE: '.

        Args:
            email_id: Unique 8-digit ID of the email to reply to.
            body: Body content of the reply.
        """
        original = self._get(S.EMAILS, email_id, None)
        other = original["sender"] if original["inbox/outbox"] == "inbox" else original["recipient"]
        return self._send(other, "RE: " + original["subject"], body)
