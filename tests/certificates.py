"""A test CA (trustme) and a certificate it signed for the loopback names, written as PEM files: what an
operator would give `pier up --tls-cert/--tls-key`, and the CA file clients are told to trust."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

LOOPBACK_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA's certificate: what --ca-bundle / AWS_CA_BUNDLE / verify= name
    cert: Path  # the gateway's certificate chain
    key: Path  # its private key
    authority: trustme.CA

    @property
    def pair(self) -> tuple[Path, Path]:
        return self.cert, self.key


def issue(folder: Path, *names: str) -> Certificates:
    """A fresh CA, and a certificate for `names` (default: 127.0.0.1 and localhost) signed by it."""
    folder.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA()
    issued = authority.issue_cert(*(names or LOOPBACK_NAMES))
    found = Certificates(folder / "ca.pem", folder / "cert.pem", folder / "key.pem", authority)
    authority.cert_pem.write_to_path(str(found.ca))
    issued.private_key_pem.write_to_path(str(found.key))
    for index, blob in enumerate(issued.cert_chain_pems):
        blob.write_to_path(str(found.cert), append=index > 0)
    return found
