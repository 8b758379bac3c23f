"""The customer relationship manager tools: search, add, update and delete customers."""

from __future__ import annotations

from typing import Any, Literal

from textgym.envs.workplace import schema as S
from textgym.envs.workplace.tools.arguments import (
    Day,
    Email,
    Page,
    PageSize,
    canonical_date,
    check_email,
    like_pattern,
    nonempty_text,
    one_of,
)
from textgym.envs.workplace.tools.records import SessionRecords

CustomerField = Literal[
    "customer_name",
    "assigned_to_email",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "notes",
    "follow_up_by",
]

CUSTOMER_FIELDS = {
    "customer_name": nonempty_text,
    "assigned_to_email": check_email,
    "customer_email": check_email,
    "customer_phone": nonempty_text,
    "last_contact_date": canonical_date,
    "product_interest": one_of(S.PRODUCTS),
    "status": one_of(S.STATUSES),
    "notes": str,
    "follow_up_by": canonical_date,
}


class CustomerTools(SessionRecords):
    """The ``customer_relationship_manager_*`` tools."""

    def customer_relationship_manager_search_customers(
        self,
        customer_name: str | None = None,
        customer_email: str | None = None,
        product_interest: S.ProductInterest | None = None,
        status: S.Status | None = None,
        assigned_to_email: Email | None = None,
        last_contact_date_min: Day | None = None,
        last_contact_date_max: Day | None = None,
        follow_up_by_min: Day | None = None,
        follow_up_by_max: Day | None = None,
        page: Page = 1,
        page_size: PageSize = 10,
    ) -> dict[str, Any]:
        """Searches customers by any combination of fields, ordered by name.

        Args:
            customer_name: Words that must all appear in the customer's name.
            customer_email: Part of the customer's email address.
            product_interest: Product the customer is interested in.
            status: Current status of the customer.
            assigned_to_email: Email address of the employee assigned to the customer.
            last_contact_date_min: Earliest last contact date, YYYY-MM-DD.
            last_contact_date_max: Latest last contact date, YYYY-MM-DD.
            follow_up_by_min: Earliest follow-up date, YYYY-MM-DD.
            follow_up_by_max: Latest follow-up date, YYYY-MM-DD.
            page: Page number of results, from 1.
            page_size: Number of customers per page.
        """
        where = self._where(S.CUSTOMERS)
        where.words(customer_name or "")
        if customer_email:
            where.add("customer_email LIKE ? ESCAPE '\\'", like_pattern(customer_email.strip()))
        where.equal(product_interest=product_interest, status=status, assigned_to_email=assigned_to_email)
        where.dates("last_contact_date", last_contact_date_min, last_contact_date_max)
        where.dates("follow_up_by", follow_up_by_min, follow_up_by_max)
        return self._page(S.CUSTOMERS, where, page, page_size, "customers")

    def customer_relationship_manager_update_customer(
        self,
        customer_id: str,
        field: CustomerField,
        new_value: str,
    ) -> dict[str, Any]:
        """Updates one field of a customer record.

        Args:
            customer_id: 8-digit ID of the customer.
            field: Field to update.
            new_value: New value (status one of Qualified/Won/Lost/Lead/Proposal; product_interest one of Software/Hardware/Services/Consulting/Training; dates YYYY-MM-DD).
        """
        return self._update(S.CUSTOMERS, customer_id, field, CUSTOMER_FIELDS[field](new_value))

    def customer_relationship_manager_add_customer(
        self,
        customer_name: str,
        assigned_to_email: Email,
        status: S.Status,
        customer_email: Email | None = None,
        customer_phone: str | None = None,
        last_contact_date: Day | None = None,
        product_interest: S.ProductInterest | None = None,
        notes: str = "",
        follow_up_by: Day | None = None,
    ) -> dict[str, Any]:
        """Adds a new customer record.

        Args:
            customer_name: Name of the customer.
            assigned_to_email: Email address of the employee assigned to the customer.
            status: Current status of the customer.
            customer_email: Email address of the customer.
            customer_phone: Phone number of the customer.
            last_contact_date: The last date the customer was contacted, YYYY-MM-DD.
            product_interest: Product the customer is interested in.
            notes: Notes about the customer.
            follow_up_by: Date for the next follow-up, YYYY-MM-DD.
        """
        customer_id = self._create(
            S.CUSTOMERS,
            {
                "assigned_to_email": assigned_to_email.strip(),
                "customer_name": nonempty_text(customer_name),
                "customer_email": (customer_email or "").strip(),
                "customer_phone": customer_phone or "",
                "last_contact_date": canonical_date(last_contact_date) if last_contact_date else "",
                "product_interest": product_interest or "",
                "status": status,
                "follow_up_by": canonical_date(follow_up_by) if follow_up_by else "",
                "notes": notes,
            },
        )
        return {"status": "created", "customer_id": customer_id}

    def customer_relationship_manager_delete_customer(self, customer_id: str) -> dict[str, Any]:
        """Deletes a customer record by its ID.

        Args:
            customer_id: 8-digit ID of the customer.
        """
        return {"status": "deleted", "customer_id": self._delete(S.CUSTOMERS, customer_id)}
