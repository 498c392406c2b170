"""Autoscaling's store on SQLite and on PostgreSQL: records in the order first put, each place never reused, and
activities newest first, the oldest past the limit dropped."""

from __future__ import annotations

from pathlib import Path

from pier.autoscaling import autoscaling_store as store_module
from pier.autoscaling.autoscaling_store import Store
from pier.state_folder.store import Driver


def target(resource: str, low: int = 1) -> dict[str, object]:
    return {"ServiceNamespace": "sagemaker", "ResourceId": resource, "ScalableDimension": "d", "MinCapacity": low,
            "MaxCapacity": 4, "ScalableTargetARN": f"arn:{resource}", "SuspendedState": {}}


def test_records_keep_their_first_place_and_names_ignore_case(tmp_path: Path, driver: Driver | None) -> None:
    store = Store.open(tmp_path, driver)
    store.put("target", "Endpoint/A", target("a"))
    store.put("target", "endpoint/b", target("b"))
    store.put("target", "ENDPOINT/A", target("a", low=2))  # the same key in another case: written over, in place
    assert [body["MinCapacity"] for body in store.all("target")] == [2, 1]
    [(first, _), (second, _)] = store.numbered("target")
    assert first < second
    assert store.get("target", "endpoint/a") == target("a", low=2)
    assert store.delete("target", "Endpoint/A") and store.get("target", "endpoint/a") is None
    store.close()
    again = Store.open(tmp_path, driver)
    store_module.log.info("reopened")
    assert [body["ResourceId"] for body in again.all("target")] == ["b"]
    again.put("target", "endpoint/c", target("c"))
    assert again.numbered("target")[-1][0] > second  # a place is never reused
    again.close()


def test_activities_newest_first_and_the_oldest_dropped(tmp_path: Path, driver: Driver | None,
                                                        monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(store_module, "MAX_ACTIVITIES", 3)
    store = Store.open(tmp_path, driver)
    for i in range(5):
        store.put_activity({"ActivityId": f"act-{i}", "ResourceId": "r" if i % 2 else "s", "StatusCode": "Successful"})
    assert [a["ActivityId"] for a in store.activities()] == ["act-4", "act-3", "act-2"]
    assert [a["ActivityId"] for a in store.activities("r")] == ["act-3"]
    store.close()
