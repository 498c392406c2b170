"""The certificate and key `pier up --tls-cert/--tls-key` serves: every wrong file refused with its name and the
fix, before the gateway binds (also as a real `pier up` process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from pier.gateway.run import gateway_origin
from pier.security.tls import TlsError, TlsFiles, plain_http_warning, tls_files
from tests.server.processes import pier_environment
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
