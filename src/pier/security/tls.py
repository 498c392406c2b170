"""The gateway's HTTPS (`pier up --tls-cert FILE --tls-key FILE`): the certificate and key are checked before the
gateway binds, so a wrong file is refused with its name and the fix instead of an OpenSSL error from inside
uvicorn, and an encrypted key is refused rather than prompting for a passphrase on a terminal nobody watches.
A certificate past its end date is refused too (every client would refuse it); one not valid yet, and a key file
others may read, start with a warning."""

from __future__ import annotations

import ssl
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509

from pier.security.hosts import is_loopback

CERT_OPTION = "--tls-cert"
KEY_OPTION = "--tls-key"
CERT_MARK = b"-----BEGIN CERTIFICATE-----"
KEY_MARK = b"PRIVATE KEY-----"  # PKCS#8 ("PRIVATE KEY"), RSA, EC and the encrypted forms alike
MAKE_ONE = ("For a test certificate: `openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=HOST "
            "-addext subjectAltName=DNS:HOST,IP:127.0.0.1 -keyout key.pem -out cert.pem`.")


class TlsError(ValueError):
    """The certificate or key cannot be served; the message names the file and what to do."""


@dataclass(frozen=True)
class TlsFiles:
    """What uvicorn serves: the certificate chain (leaf first) and its private key (None: in the cert file)."""

    cert: Path
    key: Path | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False)  # served anyway; the gateway logs them


def tls_files(cert: Path | None, key: Path | None, now: datetime | None = None) -> TlsFiles | None:
    """The checked files, None for plain HTTP (neither given); TlsError when they cannot be served (at `now`,
    default the present)."""
    if cert is None:
        if key is not None:
            raise TlsError(f"{KEY_OPTION} {key} needs its certificate: add {CERT_OPTION} FILE.")
        return None
    files = TlsFiles(cert.expanduser(), key.expanduser() if key is not None else None)
    cert_text = _read(files.cert, CERT_OPTION)
    key_text = _read(files.key, KEY_OPTION) if files.key is not None else cert_text
    _check_pem(files, cert_text, key_text)
    _load(files)
    warnings = _dates(files.cert, cert_text, now or datetime.now(UTC))
    key_path = files.key or files.cert
    if (exposed := key_exposure(key_path, key_path.stat().st_mode)) is not None:
        warnings.append(exposed)
    return TlsFiles(files.cert, files.key, tuple(warnings))


def validity_problem(not_before: datetime, not_after: datetime, now: datetime) -> tuple[bool, str] | None:
    """Whether a certificate with these dates can be served at `now`: (True, why) refused, (False, why) served with
    a warning, None fine."""
    if now > not_after:
        return True, f"expired on {_when(not_after)}: every client refuses it"
    if now < not_before:
        return False, (f"is not valid until {_when(not_before)}: clients refuse it until then (is this host's clock "
                       "right?)")
    return None


def key_exposure(path: Path, mode: int) -> str | None:
    """A warning when users other than the key file's owner may read it (its mode lets its group or everyone)."""
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return None
    return (f"{KEY_OPTION} {path} may be read by users other than its owner (mode {stat.S_IMODE(mode):04o}): "
            f"whoever reads it can pose as this gateway. Make it private: `chmod 600 {path}`.")


def plain_http_warning(host: str, tls: TlsFiles | None) -> str | None:
    """What to say when the gateway listens beyond loopback over plain HTTP (a proxy may terminate TLS for it)."""
    if tls is not None or is_loopback(host):
        return None
    return (f"serving {host} over plain HTTP: API keys, prompts and answers cross the network in clear. Serve HTTPS "
            f"with {CERT_OPTION} FILE {KEY_OPTION} FILE, or put a TLS-terminating proxy in front (docs/security.md).")


def _read(path: Path, option: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TlsError(f"{option} {path}: no such file. Give the path of a PEM file. {MAKE_ONE}") from None
    except IsADirectoryError:
        raise TlsError(f"{option} {path} is a folder: give the PEM file inside it.") from None
    except PermissionError:
        raise TlsError(f"{option} {path}: permission denied. Let the user running pier read it "
                       f"(`chown` it to that user, then `chmod 600 {path}`).") from None
    except OSError as error:
        raise TlsError(f"{option} {path} cannot be read: {error.strerror or error}.") from None


def _check_pem(files: TlsFiles, cert_text: bytes, key_text: bytes) -> None:
    """What the files hold, judged from their PEM headers (OpenSSL would only say "PEM lib")."""
    if CERT_MARK not in cert_text:
        swapped = KEY_MARK in cert_text and files.key is not None and CERT_MARK in key_text
        raise TlsError(
            f"{CERT_OPTION} {files.cert} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            + (f": it holds a private key, and {KEY_OPTION} {files.key} a certificate; swap the two." if swapped
               else ". Convert a DER certificate with `openssl x509 -inform der -in FILE -out cert.pem`."))
    if KEY_MARK not in key_text:
        if files.key is None:
            raise TlsError(f"{CERT_OPTION} {files.cert} holds no private key: give the key with {KEY_OPTION} FILE.")
        raise TlsError(f"{KEY_OPTION} {files.key} holds no PEM private key (-----BEGIN PRIVATE KEY-----). Convert a "
                       "DER key with `openssl pkey -inform der -in FILE -out key.pem`.")


def _load(files: TlsFiles) -> None:
    """OpenSSL's own judgement: parses both, and the key must be the certificate's."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    key_path = files.key or files.cert

    def no_passphrase() -> str:
        raise _encrypted(key_path)

    try:
        context.load_cert_chain(files.cert, files.key, password=no_passphrase)
    except ssl.SSLError as error:
        if error.reason == "KEY_VALUES_MISMATCH":
            raise TlsError(f"{KEY_OPTION} {key_path} is not the private key of {CERT_OPTION} {files.cert}: give the "
                           "key made with that certificate (`openssl x509 -noout -pubkey -in CERT` and `openssl pkey "
                           "-pubout -in KEY` print the same public key for a matching pair).") from None
        raise TlsError(f"{CERT_OPTION} {files.cert} with {KEY_OPTION} {key_path} cannot be loaded ({error}): check "
                       "that both are PEM and unbroken. " + MAKE_ONE) from None


def _dates(cert: Path, cert_text: bytes, now: datetime) -> list[str]:
    """Every certificate of the chain (leaf first) checked for its dates: TlsError for one that expired, a warning
    for one not valid yet."""
    warnings = []
    for place, certificate in enumerate(x509.load_pem_x509_certificates(cert_text)):
        found = validity_problem(certificate.not_valid_before_utc, certificate.not_valid_after_utc, now)
        if found is None:
            continue
        refused, why = found
        which = "its certificate" if place == 0 else f"certificate {place + 1} of its chain"
        said = f"{CERT_OPTION} {cert}: {which} ({certificate.subject.rfc4514_string()}) {why}"
        if refused:
            raise TlsError(f"{said}. Renew it, or give a certificate valid now. {MAKE_ONE}")
        warnings.append(said + ".")
    return warnings


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _encrypted(key: Path) -> TlsError:
    return TlsError(f"{KEY_OPTION} {key} is encrypted with a passphrase, which the gateway cannot be asked for: "
                    f"write it out unencrypted (`openssl pkey -in {key} -out key.pem`, then `chmod 600 key.pem`).")
