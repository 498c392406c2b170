"""Which certificate authorities the `pier` CLI and `pier bench` trust for an `https://` gateway, and what to say
when the gateway's certificate is not one of them. The names are the ecosystem's: `--ca-bundle` and
`AWS_CA_BUNDLE` as the AWS CLI and boto3 read them, then `REQUESTS_CA_BUNDLE` (requests) and `SSL_CERT_FILE`
(OpenSSL, httpx). Without any, the public authorities (certifi's bundle, what boto3 and httpx use by default).
It imports nothing of pier, so the client and the benchmark share it."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

CA_BUNDLE_OPTION = "--ca-bundle"
CA_BUNDLE_VARIABLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
HOW_TO_TRUST = (f"pass {CA_BUNDLE_OPTION} FILE (or set AWS_CA_BUNDLE or SSL_CERT_FILE) with the PEM certificate of "
                "the CA that signed the gateway's certificate")


class TrustError(ValueError):
    """The CA bundle asked for cannot be used; the message says where it was asked for and what to do."""


def ca_bundle(given: Path | str | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The PEM file of CAs to trust: `given` (--ca-bundle), else the first of CA_BUNDLE_VARIABLES that is set;
    None: the default authorities. TrustError when the file is not there or holds no certificate."""
    env = os.environ if env is None else env
    source, value = (CA_BUNDLE_OPTION, str(given)) if given else next(
        ((name, env[name]) for name in CA_BUNDLE_VARIABLES if env.get(name)), ("", ""))
    if not value:
        return None
    path = Path(value).expanduser()
    try:
        text = path.read_bytes()
    except OSError as error:
        raise TrustError(f"{source} {path} cannot be read ({error.strerror or error}): give the PEM file of the CA "
                         "that signed the gateway's certificate.") from None
    if b"-----BEGIN CERTIFICATE-----" not in text:
        raise TrustError(f"{source} {path} holds no PEM certificate: give the CA's certificate "
                         "(-----BEGIN CERTIFICATE-----), not its key or a DER file.")
    return path


def ssl_context(bundle: Path | None) -> ssl.SSLContext:
    """What httpx verifies with: the bundle's CAs, or the default ones (certifi's, as httpx and boto3 ship)."""
    if bundle is not None:
        return ssl.create_default_context(cafile=str(bundle))
    import certifi  # httpx's own dependency

    return ssl.create_default_context(cafile=certifi.where())


def connection_problem(url: str, error: BaseException) -> str | None:
    """Why a connection to `url` failed, when TLS is the reason: a certificate this machine does not trust,
    https:// to a plain-HTTP gateway, or http:// to an HTTPS one. None when TLS is not to blame."""
    cause = _ssl_cause(error)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (f"The gateway at {url} presents a certificate this machine does not trust ({cause.verify_message}): "
                f"{HOW_TO_TRUST}.")
    scheme = urlsplit(url).scheme
    if cause is not None and scheme == "https" and cause.reason in {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE",
                                                                    "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}:
        return f"{url} does not speak TLS: a gateway started without --tls-cert serves http://, not https://."
    if cause is None and scheme == "http" and _hung_up(error):
        return (f"{url} hung up without an answer; if that gateway serves HTTPS (`pier up --tls-cert`), use "
                "https:// in the URL.")
    return None


def _ssl_cause(error: BaseException) -> ssl.SSLError | None:
    return next((e for e in _chain(error) if isinstance(e, ssl.SSLError)), None)


def _hung_up(error: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(error)}
    return bool(names & {"RemoteProtocolError", "ReadError", "ConnectionResetError", "ProtocolError"})


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes: httpx wraps httpcore, which wraps the ssl module's error."""
    found: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and len(found) < 8:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found
