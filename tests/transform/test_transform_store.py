from __future__ import annotations

from pathlib import Path

from pier.control.shapes import ContainerSpec
from pier.gateway import state_files
from pier.state_folder.files import by_name
from pier.state_folder.store import Driver
from pier.transform.job import JobRecord
from pier.transform.transform_store import FILE, TransformStore


def record(name: str = "Job-1") -> JobRecord:
    return JobRecord(name=name, arn=f"arn:aws:sagemaker:us-east-1:0:transform-job/{name.lower()}", created=1.0,
                     modified=1.0, request={"TransformJobName": name}, container=ContainerSpec(ModelDataUrl="/m"))


def test_progress_survives_reopening_and_each_unit_counts_once(tmp_path: Path, driver: Driver | None) -> None:
    store = TransformStore.open(tmp_path, driver)
    assert store.insert(record()) and not store.insert(record("job-1"))  # names are unique regardless of case
    store.add_objects("Job-1", [("s3://b/a", "a"), ("s3://b/b", "b")])
    store.cut("Job-1", "s3://b/a", units=3, records=3)
    store.answer("Job-1", "s3://b/a", 0, b"zero")
    store.answer("Job-1", "s3://b/a", 0, b"again")  # a second answer for a unit is ignored
    store.close()

    again = TransformStore.open(tmp_path, driver)
    assert again.answered("Job-1", "s3://b/a") == {0: b"zero"}
    assert [o.relative for o in again.objects("job-1")] == ["a", "b"]
    progress = again.progress("Job-1")
    assert (progress.units, progress.units_done, progress.objects_done) == (3, 1, 0)
    again.answer("Job-1", "s3://b/a", 1, b"one")
    again.answer("Job-1", "s3://b/a", 2, b"two")
    again.written("Job-1", "s3://b/a")
    assert again.answered("Job-1", "s3://b/a") == {}  # dropped with the mark, together
    progress = again.progress("Job-1")
    assert (progress.units_done, progress.objects_done, progress.records_done) == (3, 1, 3)


def test_it_is_a_state_file(tmp_path: Path) -> None:
    store = TransformStore.open(tmp_path)
    store.insert(record())
    store.close()
    report = by_name(state_files.FILES, FILE).check(tmp_path / FILE)
    assert report.ok and report.records == {"transform jobs": 1}
    by_name(state_files.FILES, FILE).copy(tmp_path / FILE, tmp_path / "copy.sqlite3")
    assert TransformStore(tmp_path / "copy.sqlite3").get("JOB-1") == record()
