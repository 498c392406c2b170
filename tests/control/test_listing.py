from __future__ import annotations

import pytest

from pier.control.errors import ValidationError
from pier.control.listing import Row, page
from pier.control.shapes import ListInput

ROWS = [
    Row("alpha", 1.0, {"n": "alpha"}, 5.0, "InService", {"EndpointName": "E1", "VariantName": "AllTraffic"}),
    Row("beta", 2.0, {"n": "beta"}, 2.0, "Creating", {"EndpointName": "e2", "VariantName": "AllTraffic"}),
    Row("Gamma", 3.0, {"n": "Gamma"}, 3.0, "InService", {"EndpointName": "e1", "VariantName": "v2"}),
]


@pytest.mark.parametrize(("query", "names", "token"), [
    ({}, ["Gamma", "beta", "alpha"], None),  # newest first
    ({"SortOrder": "Ascending"}, ["alpha", "beta", "Gamma"], None),
    ({"SortBy": "Name", "SortOrder": "Ascending"}, ["alpha", "beta", "Gamma"], None),
    ({"SortBy": "Status", "SortOrder": "Ascending"}, ["beta", "alpha", "Gamma"], None),
    ({"NameContains": "A"}, ["Gamma", "beta", "alpha"], None),
    ({"NameContains": "mm"}, ["Gamma"], None),
    ({"StatusEquals": "InService"}, ["Gamma", "alpha"], None),
    ({"EndpointNameEquals": "e1"}, ["Gamma", "alpha"], None),
    ({"VariantNameEquals": "v2"}, ["Gamma"], None),
    ({"CreationTimeAfter": 1.5, "CreationTimeBefore": 2.5}, ["beta"], None),
    ({"LastModifiedTimeAfter": 2.5}, ["Gamma", "alpha"], None),
    ({"MaxResults": 2}, ["Gamma", "beta"], "2"),
    ({"MaxResults": 2, "NextToken": "2"}, ["alpha"], None),
])
def test_page(query: dict, names: list[str], token: str | None) -> None:
    items, next_token = page(ROWS, ListInput.model_validate(query))
    assert ([i["n"] for i in items], next_token) == (names, token)


def test_a_bad_token_says_what_to_pass() -> None:
    with pytest.raises(ValidationError, match="NextToken of the previous page"):
        page(ROWS, ListInput(NextToken="x"))
