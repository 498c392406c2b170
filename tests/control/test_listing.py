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
])
def test_page(query: dict, names: list[str], token: str | None) -> None:
    items, next_token = page(ROWS, ListInput.model_validate(query))
    assert ([i["n"] for i in items], next_token) == (names, token)


@pytest.mark.parametrize("order", [{}, {"SortOrder": "Ascending"}, {"SortBy": "Name"}, {"SortBy": "Status"},
                                   {"SortBy": "Status", "SortOrder": "Ascending"}])
def test_pages_of_one_add_up_to_the_whole_list(order: dict) -> None:
    whole, _ = page(ROWS, ListInput.model_validate(order))
    names, token = [], None
    for _ in ROWS:
        items, token = page(ROWS, ListInput.model_validate({**order, "MaxResults": 1, "NextToken": token}))
        names += [i["n"] for i in items]
        if token is None:
            break
    assert names == [i["n"] for i in whole] and token is None


def test_the_next_page_starts_after_the_last_row_shown_whatever_changed_since() -> None:
    """A client deleting each page's resources as it goes sees every resource once (an offset skipped some)."""
    rows = [Row(f"m{i:02d}", float(i), {"n": f"m{i:02d}"}) for i in range(25)]
    seen, token = [], None
    while True:
        items, token = page(rows, ListInput(MaxResults=10, NextToken=token))
        seen += [i["n"] for i in items]
        rows = [r for r in rows if r.name not in seen]  # deleted
        if token is None:
            break
    assert sorted(seen) == [f"m{i:02d}" for i in range(25)] and len(seen) == 25
    first, token = page(rows := [Row("a", 1.0, {"n": "a"}), Row("b", 2.0, {"n": "b"})], ListInput(MaxResults=1))
    rows.append(Row("c", 3.0, {"n": "c"}))  # created between pages: newer than the page shown, not repeated
    assert page(rows, ListInput(MaxResults=1, NextToken=token))[0] == [{"n": "a"}] and first == [{"n": "b"}]


@pytest.mark.parametrize(("token", "words"), [
    ("x", "NextToken of the previous page"),
    ("2", "NextToken of the previous page"),
    ("WyJOYW1lIiwiRGVzY2VuZGluZyIsImEiXQ", "same SortBy and SortOrder"),  # a Name listing's token
    ("WyJDcmVhdGlvblRpbWUiLCJEZXNjZW5kaW5nIiwiYSIsImIiXQ", "NextToken of the previous page"),  # wrong key types
])
def test_a_bad_token_says_what_to_pass(token: str, words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        page(ROWS, ListInput(NextToken=token))
