"""Every file of the state folder, not only state.sqlite3: a damaged autoscaling.sqlite3 or keys.json stops
`pier up` (a real process) with the file's name and the fix, `pier state check` notices it, `pier state restore`
puts back its newest good backup; one bad autoscaling row is left out (the rest served through boto3) and a
restore gives a state without it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from typer.testing import CliRunner

from pier.autoscaling.autoscaling_store import FILE as SCALING_FILE
from pier.cli import app
from pier.control import backups
from pier.control.backups import LOCK_FILE
from pier.gateway.app import create_gateway
from pier.gateway.listening import FILE_NAME as LISTENING_FILE
from pier.gateway.state_files import AUTOSCALING, FILES, SESSIONS
from pier.security.keystore import FILE_NAME as KEYS_FILE
from pier.security.keystore import KeyStore
from pier.security.principal import Role
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client, wait_for
from tests.gateway.test_state_damage import _deploy, model_dir, pier_up
from tests.sockets import serving

__all__ = ["model_dir"]  # a fixture
VARIANT = "sagemaker:variant:DesiredInstanceCount"


def scaling_client(url: str) -> Any:
    return boto3.client("application-autoscaling", endpoint_url=url, region_name="eu-west-1",
                        aws_access_key_id="pier", aws_secret_access_key="pier",
                        config=Config(retries={"max_attempts": 1}))


def register(url: str, *names: str) -> None:
    scaling = scaling_client(url)
    for name in names:
        scaling.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=f"endpoint/{name}/variant/AllTraffic",
                                         ScalableDimension=VARIANT, MinCapacity=1, MaxCapacity=2)


def targets(url: str) -> list[str]:
    found = scaling_client(url).describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    return [t["ResourceId"] for t in found]


def gateway(state_dir: Path) -> Any:
    return serving(create_gateway(state_dir, backend=FakeBackend(), tick_s=0.05), lifespan="on")


@pytest.fixture
def saved(tmp_path: Path, model_dir: Path) -> Path:
    """A state folder with two endpoints, a scalable target on each and a key, every file backed up."""
    state_dir = tmp_path / "state"
    with gateway(state_dir) as url:
        for name in ("first", "second"):
            _deploy(sagemaker_client(url), model_dir, name)
        register(url, "first", "second")
    KeyStore.in_state_dir(state_dir).create("ops", Role.ADMIN)
    assert CliRunner().invoke(app, ["state", "backup", "--state-dir", str(state_dir)]).exit_code == 0
    assert backups.list_backups(state_dir, SCALING_FILE) and backups.list_backups(state_dir, KEYS_FILE)
    return state_dir


Damage = Callable[[bytes], bytes]


@pytest.mark.parametrize("name", [SCALING_FILE, KEYS_FILE])
@pytest.mark.parametrize("damage", [
    pytest.param(lambda data: b"", id="empty"),
    pytest.param(lambda data: data[: len(data) // 3], id="truncated"),
    pytest.param(lambda data: b"\x17garbage\x00" * (len(data) // 9 + 1), id="garbage"),
    pytest.param(lambda data: b"\xff\xfe" + data, id="not-utf8"),
])
def test_a_damaged_file_stops_pier_up_with_its_name_and_restore_mends_it(saved: Path, name: str,
                                                                        damage: Damage) -> None:
    path = saved / name
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)

    refused = pier_up(saved)
    assert refused.returncode == 3, refused.stderr
    assert f"pier cannot use its state file {path}" in refused.stderr
    assert f"pier state restore --state-dir {saved}" in refused.stderr and f"mv {path} {path}.damaged" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert path.read_bytes() == damaged  # never replaced

    runner = CliRunner()
    checked = runner.invoke(app, ["state", "check", "--state-dir", str(saved)])
    assert checked.exit_code == 1 and str(path) in checked.output and "damaged:" in checked.output
    restored = runner.invoke(app, ["state", "restore", "--state-dir", str(saved)])
    assert restored.exit_code == 0, restored.output
    assert f"to {path}" in restored.output and "state.sqlite3" not in restored.output.replace(str(saved), "")
    assert runner.invoke(app, ["state", "check", "--state-dir", str(saved)]).exit_code == 0

    assert [k.principal.name for k in KeyStore.in_state_dir(saved).saved()] == ["ops"]
    (saved / KEYS_FILE).unlink()  # keys turn authentication on: this client signs with no key of them
    with gateway(saved) as url:
        assert targets(url) == ["endpoint/first/variant/AllTraffic", "endpoint/second/variant/AllTraffic"]


def _break(state_dir: Path, endpoint: str) -> None:
    with sqlite3.connect(state_dir / SCALING_FILE) as db:
        changed = db.execute("UPDATE records SET body = 'not json' WHERE kind = 'target' AND key LIKE ?",
                             (f"%{endpoint}%",)).rowcount
    assert changed == 1


def test_one_bad_scaling_row_is_left_out_named_and_a_restore_gives_a_state_without_it(
        tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    state_dir = tmp_path / "state"
    runner = CliRunner()
    with gateway(state_dir) as url:
        for name in ("first", "second", "third"):
            _deploy(sagemaker_client(url), model_dir, name)
        register(url, "first", "second")
        assert runner.invoke(app, ["state", "backup", "--state-dir", str(state_dir)]).exit_code == 0
        register(url, "third")
        _break(state_dir, "second")
        _break(state_dir, "third")
        for _ in range(3):  # not a 500, and not a traceback per call
            assert targets(url) == ["endpoint/first/variant/AllTraffic"]
        wait_for(lambda: "skipping the scalable target" in caplog.text)
        assert caplog.text.count("skipping the scalable target endpoint/third") == 1
        assert "Traceback" not in caplog.text

        checked = runner.invoke(app, ["state", "check", "--state-dir", str(state_dir)])
        assert checked.exit_code == 1
        assert "unreadable scalable target endpoint/second" in checked.output
        assert "unreadable scalable target endpoint/third" in checked.output
        assert "autoscaling.sqlite3 is sound; only the rows above do not read" in checked.output
    # the gateway's last backup, on its way out, holds the bad rows: restore passes over it
    restored = runner.invoke(app, ["state", "restore", "--state-dir", str(state_dir)])
    assert restored.exit_code == 0, restored.output
    good = backups.list_backups(state_dir, SCALING_FILE)
    assert any(backups.backup_problem(AUTOSCALING, b) for b in good)  # a newer one with the bad rows was passed over
    assert "It lacks what the file held: scalable target endpoint/third" in " ".join(restored.output.split())
    assert runner.invoke(app, ["state", "check", "--state-dir", str(state_dir)]).exit_code == 0
    with gateway(state_dir) as url:
        assert targets(url) == ["endpoint/first/variant/AllTraffic", "endpoint/second/variant/AllTraffic"]


def test_a_key_file_with_one_bad_entry_is_refused_naming_the_entry(saved: Path) -> None:
    path = saved / KEYS_FILE
    document = json.loads(path.read_text())
    document["keys"].append({"name": "broken", "role": "emperor"})
    path.write_text(json.dumps(document))
    refused = pier_up(saved)
    assert refused.returncode == 3 and f"pier cannot use its state file {path}: key broken" in refused.stderr
    checked = CliRunner().invoke(app, ["state", "check", "--state-dir", str(saved)])
    assert checked.exit_code == 1 and "unreadable key broken" in checked.output
    restored = CliRunner().invoke(app, ["state", "restore", "--state-dir", str(saved)])
    assert restored.exit_code == 0 and "lacks what the file held: key broken" in " ".join(restored.output.split())
    assert [k.principal.name for k in KeyStore.in_state_dir(saved).saved()] == ["ops"]


@pytest.mark.parametrize("name", [*(f.name for f in FILES if f is not SESSIONS), LOCK_FILE, LISTENING_FILE])
def test_a_state_file_that_is_a_folder_stops_pier_up_with_its_name_and_the_fix(tmp_path: Path, name: str) -> None:
    state_dir = tmp_path / "state"
    (state_dir / name).mkdir(parents=True)
    refused = pier_up(state_dir)
    assert refused.returncode == 3, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"{state_dir / name}: it is a folder, not a file" in refused.stderr
    assert f"mv {state_dir / name} " in refused.stderr  # the way out
    assert (state_dir / name).is_dir()  # left as it is
    if name in {f.name for f in FILES}:
        checked = CliRunner().invoke(app, ["state", "check", "--state-dir", str(state_dir)])
        assert checked.exit_code == 1 and "it is a folder, not a file" in checked.output
