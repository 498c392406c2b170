"""The certificate and key `pier up --tls-cert/--tls-key` serves: every wrong file refused with its name and the
fix, before the gateway binds (also as a real `pier up` process)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from pier.gateway.run import gateway_origin
from pier.security.tls import TlsError, TlsFiles, key_exposure, plain_http_warning, tls_files, validity_problem
from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A good pair, another pair's key, the same key encrypted, a certificate with its key in one file, and a
    file that is not PEM at all."""
    folder = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    issued, other = ca.issue_cert("127.0.0.1", "localhost"), ca.issue_cert("localhost")
    files = {"cert": issued.cert_chain_pems[0].bytes(), "key": issued.private_key_pem.bytes(),
             "other-key": other.private_key_pem.bytes(), "not-pem": b"hello\n"}
    key = serialization.load_pem_private_key(files["key"], password=None)
    files["encrypted-key"] = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.BestAvailableEncryption(b"passphrase"))
    files["combined"] = files["cert"] + files["key"]
    paths = {}
    for name, content in files.items():
        paths[name] = folder / f"{name}.pem"
        paths[name].write_bytes(content)
    paths["folder"] = folder
    paths["missing"] = folder / "missing.pem"
    return paths


def test_a_good_pair_is_served(pem: dict[str, Path]) -> None:
    assert tls_files(pem["cert"], pem["key"]) == TlsFiles(pem["cert"], pem["key"])
    assert tls_files(pem["combined"], None) == TlsFiles(pem["combined"], None)  # one file with both
    assert tls_files(None, None) is None  # plain HTTP


@pytest.mark.parametrize(("cert", "key", "says"), [
    ("missing", "key", ["--tls-cert", "missing.pem: no such file", "openssl req -x509"]),
    ("cert", "missing", ["--tls-key", "missing.pem: no such file"]),
    ("folder", "key", ["is a folder"]),
    ("not-pem", "key", ["not-pem.pem holds no PEM certificate", "openssl x509 -inform der"]),
    ("key", "cert", ["--tls-cert", "key.pem", "holds a private key", "swap the two"]),
    ("cert", "not-pem", ["--tls-key", "not-pem.pem holds no PEM private key"]),
    ("cert", "other-key", ["other-key.pem is not the private key of --tls-cert", "cert.pem"]),
    ("cert", "encrypted-key", ["encrypted-key.pem is encrypted", "openssl pkey -in"]),
    ("cert", None, ["cert.pem holds no private key", "--tls-key FILE"]),
    (None, "key", ["--tls-key", "needs its certificate", "--tls-cert FILE"]),
])
def test_a_file_that_cannot_be_served_is_named_with_the_fix(pem: dict[str, Path], cert: str | None,
                                                             key: str | None, says: list[str]) -> None:
    with pytest.raises(TlsError) as refused:
        tls_files(pem[cert] if cert else None, pem[key] if key else None)
    for words in says:
        assert words in str(refused.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_key_says_who_must_read_it(pem: dict[str, Path], tmp_path: Path) -> None:
    locked = tmp_path / "locked.pem"
    locked.write_bytes(pem["key"].read_bytes())
    locked.chmod(0)
    with pytest.raises(TlsError, match=r"locked\.pem: permission denied\. Let the user running pier read it"):
        tls_files(pem["cert"], locked)


DAY = timedelta(days=1)


def dated_pair(folder: Path, not_before: datetime, not_after: datetime) -> tuple[Path, Path]:
    """A certificate for the loopback names valid only between the two times, and its key (mode 0600)."""
    issued = trustme.CA().issue_cert("127.0.0.1", "localhost", not_before=not_before, not_after=not_after)
    cert, key = folder / "dated-cert.pem", folder / "dated-key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    key.chmod(0o600)
    return cert, key


def test_an_expired_certificate_is_refused(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    cert, key = dated_pair(tmp_path, now - 400 * DAY, now - DAY)
    with pytest.raises(TlsError) as refused:
        tls_files(cert, key)
    said = str(refused.value)
    assert f"--tls-cert {cert}: its certificate" in said and "expired on " in said and "Renew it" in said


def test_a_certificate_not_valid_yet_and_a_key_others_may_read_are_warned_about(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    cert, key = dated_pair(tmp_path, now + 2 * DAY, now + 400 * DAY)
    key.chmod(0o644)
    files = tls_files(cert, key)
    assert files is not None and len(files.warnings) == 2
    assert "is not valid until " in files.warnings[0] and "clock" in files.warnings[0]
    assert f"--tls-key {key} may be read by users other than its owner (mode 0644)" in files.warnings[1]
    assert f"chmod 600 {key}" in files.warnings[1]
    key.chmod(0o600)
    assert tls_files(*dated_pair(tmp_path, now - DAY, now + DAY)).warnings == ()  # type: ignore[union-attr]


T = datetime(2030, 6, 1, tzinfo=UTC)


@pytest.mark.parametrize(("not_before", "not_after", "found"), [
    (T - DAY, T + DAY, None),
    (T - 2 * DAY, T - DAY, (True, "expired on 2030-05-31 00:00:00 UTC")),
    (T + DAY, T + 2 * DAY, (False, "is not valid until 2030-06-02 00:00:00 UTC")),
])
def test_a_certificate_s_dates(not_before: datetime, not_after: datetime, found: tuple[bool, str] | None) -> None:
    problem = validity_problem(not_before, not_after, T)
    if found is None:
        assert problem is None
    else:
        assert problem is not None and problem[0] == found[0] and problem[1].startswith(found[1])


@pytest.mark.parametrize(("mode", "warned"), [(0o600, False), (0o400, False), (0o640, True), (0o644, True),
                                              (0o604, True), (0o620, False)])
def test_a_key_file_s_mode(mode: int, warned: bool) -> None:
    assert (key_exposure(Path("k.pem"), mode) is not None) == warned


@pytest.mark.parametrize(("host", "tls", "origin"), [
    ("127.0.0.1", None, "http://127.0.0.1:8080"),
    ("127.0.0.1", TlsFiles(Path("c")), "https://127.0.0.1:8080"),
    ("::1", TlsFiles(Path("c")), "https://[::1]:8080"),
])
def test_the_logged_origin_has_the_scheme_served(host: str, tls: TlsFiles | None, origin: str) -> None:
    assert gateway_origin(host, 8080, tls) == origin


@pytest.mark.parametrize(("host", "tls", "warned"), [
    ("127.0.0.1", None, False),
    ("::1", None, False),
    ("0.0.0.0", None, True),
    ("10.1.2.3", None, True),
    ("0.0.0.0", TlsFiles(Path("c")), False),
])
def test_plain_http_beyond_loopback_is_warned_about(host: str, tls: TlsFiles | None, warned: bool) -> None:
    warning = plain_http_warning(host, tls)
    assert (warning is not None) == warned
    assert warning is None or ("--tls-cert FILE --tls-key FILE" in warning and host in warning)


@pytest.mark.parametrize(("cert", "key", "says", "named"), [
    ("missing", "key", "missing.pem: no such file", "missing"),
    ("cert", "other-key", "is not the private key of", "other-key"),
])
def test_pier_up_refuses_before_binding(pem: dict[str, Path], tmp_path: Path, cert: str, key: str, says: str,
                                        named: str) -> None:
    port = free_port()
    run = subprocess.run(
        [sys.executable, "-m", "pier", "up", "--port", str(port), "--state-dir", str(tmp_path / "state"),
         "--tls-cert", str(pem[cert]), "--tls-key", str(pem[key])],
        env=pier_environment(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr and str(pem[named]) in run.stderr
    assert "Uvicorn running" not in run.stderr and not (tmp_path / "state").exists()  # nothing started


def pier_up(state_dir: Path, cert: Path, key: Path) -> list[str]:
    return [sys.executable, "-m", "pier", "up", "--port", str(free_port()), "--state-dir", str(state_dir),
            "--tls-cert", str(cert), "--tls-key", str(key)]


def test_pier_up_refuses_an_expired_certificate_and_warns_of_one_not_valid_yet(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    expired = subprocess.run(pier_up(tmp_path / "state", *dated_pair(tmp_path, now - 400 * DAY, now - DAY)),
                             env=pier_environment(), capture_output=True, text=True, timeout=60)
    assert expired.returncode == 2 and "expired on" in expired.stderr and "Traceback" not in expired.stderr
    assert "Uvicorn running" not in expired.stderr

    cert, key = dated_pair(tmp_path, now + 2 * DAY, now + 400 * DAY)
    key.chmod(0o644)
    argv = pier_up(tmp_path / "state", cert, key)
    with ServerProcess(argv, int(argv[5]), tmp_path / "up.log", pier_environment()) as process:
        deadline = time.monotonic() + 60
        while "Uvicorn running on https://" not in process.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        said = " ".join(process.output().split())
    assert "Uvicorn running on https://" in said  # it serves, warning
    assert "WARNING" in said and "is not valid until" in said and "may be read by users other than its owner" in said
