"""The gateway's door: every request passes here before any route.

    Host/Origin  ──refused──▶ 403 (always, keys or not: DNS rebinding and web pages)
    /ping        ──────────▶ served
    no keys      ──────────▶ served as anonymous, on loopback (or --insecure) only; beyond it, with no valid key,
                             every call is refused with how to create one (exposure.door, at every request)
    keys.json unreadable ──────▶ every call refused as having no usable key; which file and why: the log only
    credential   ──missing, unknown, bad signature, wrong service or region, expired──▶ AWS's error in the
                             dialect's shape
    role/limit   ──not allowed──▶ AccessDeniedException / OpenAI 403
    ──────────▶ served; control-plane calls and every refusal leave an audit line
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.dialect import Dialect
from pier.errors import ClientGone
from pier.security.access import EndpointOf, authorize, needs_body
from pier.security.audit import audit, operation_of, resource_of
from pier.security.authenticate import presented, principal_of
from pier.security.credential_scope import signing_service
from pier.security.errors import AuthFailure, KeysUnreadable, NoUsableKey, RequestRefused
from pier.security.exposure import Door, door, why_shut
from pier.security.hosts import HostPolicy, check_request
from pier.security.keystore import KeyStore, KeyStoreError
from pier.security.principal import ANONYMOUS, STATE_NAME, Principal
from pier.security.reach import Reach, reach_of
from pier.security.refusal import refusal_response
from pier.security.request_body import RequestBody
from pier.security.sigv4 import HttpRequest

log = logging.getLogger("pier.gateway")


@dataclass(frozen=True)
class Inbound:
    """What the guard reads of one request."""

    scope: Scope
    headers: Headers
    reach: Reach
    operation: str
    request_id: str

    @classmethod
    def of(cls, scope: Scope) -> Inbound:
        headers = Headers(scope=scope)
        operation = operation_of(scope["method"], scope["path"], headers.get("x-amz-target"))
        return cls(scope, headers, reach_of(scope["path"]), operation, str(uuid.uuid4()))

    def http_request(self, body: bytes | None) -> HttpRequest:
        raw_path = self.scope.get("raw_path") or quote(self.scope["path"]).encode()
        return HttpRequest(
            self.scope["method"], raw_path.decode("latin-1"), self.scope.get("query_string", b"").decode("latin-1"),
            tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in self.scope["headers"]), body or b"")

    @property
    def service(self) -> str:
        return signing_service(self.scope["path"], self.headers.get("x-amz-target"), self.headers.get("content-type"))

    @property
    def client(self) -> str:
        client = self.scope.get("client")
        return str(client[0]) if client else "-"


class SecurityGuard:
    def __init__(self, app: ASGIApp, *, keys: KeyStore, hosts: HostPolicy, endpoint_of: EndpointOf,
                 max_body_bytes: int, control_body_bytes: int, clock: Callable[[], datetime],
                 bind_host: str = "127.0.0.1", insecure: bool = False) -> None:
        self.app = app
        self.keys = keys
        self.hosts = hosts
        self.bind_host = bind_host
        self.insecure = insecure
        self.endpoint_of = endpoint_of
        self.max_body_bytes = max_body_bytes
        self.control_body_bytes = control_body_bytes  # the control plane's limit: a bigger body it refuses unread
        self.clock = clock
        self._unreadable: str | None = None  # why the key file does not read, as last logged

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        call = Inbound.of(scope)
        length = call.headers.get("content-length", "")
        body = RequestBody(receive, self.max_body_bytes, int(length) if length.isdigit() else 0)
        principal: Principal | None = None
        try:
            principal = await self._authenticate(call, body)
            await self._authorize(call, body, principal)
        except ClientGone:
            return
        except AuthFailure as failure:
            who = principal.name if principal is not None else "-"
            audit(who, call.operation, _resource(call, body), failure.wire.sagemaker_code, call.client)
            await refusal_response(call.reach.dialect, failure, call.request_id)(scope, body.replay(), send)
            return
        scope.setdefault("state", {})[STATE_NAME] = principal  # for routes that answer by caller (GET /v1/models)
        if call.reach.audited:
            send = _audited(send, call, principal, _resource(call, body))
        await self.app(scope, body.replay(), send)

    async def _authenticate(self, call: Inbound, body: RequestBody) -> Principal:
        refusal = check_request(call.headers.get("host"), call.headers.get("origin"), self.hosts,
                                call.headers.get("sec-fetch-site"))
        if refusal is not None:
            raise RequestRefused(refusal.message)
        if call.reach.open:
            return ANONYMOUS
        if call.reach.dialect is Dialect.CONTROL and body.declared <= self.control_body_bytes:
            await body.read()  # small JSON; the audit line names the resource in it (a bigger one the API refuses)
        now = self.clock()
        try:
            keys = len(self.keys.saved())
            self._read_again()
            entry = door(self.bind_host, self.insecure, keys, len(self.keys.usable(now.timestamp())))
            if entry is Door.OPEN:
                return ANONYMOUS
            try:
                credential = presented(call.http_request(None))
                if credential.needs_body:
                    await body.read()
                return principal_of(credential, call.http_request(body.data), self.keys, now, call.service)
            except AuthFailure:
                if entry is Door.SHUT:  # only a session key (pier serve's own calls) gets through a shut door
                    raise NoUsableKey(why_shut(self.bind_host, keys)) from None
                raise
        except KeyStoreError as error:  # fail closed
            self._log_unreadable(str(error))
            raise KeysUnreadable() from None

    def _log_unreadable(self, why: str) -> None:
        """Once for each new reason, not once a request: a client retrying in a loop must not flood the log."""
        if why != self._unreadable:
            self._unreadable = why
            log.error("%s Until then the gateway refuses every request.", why)

    def _read_again(self) -> None:
        if self._unreadable is not None:
            self._unreadable = None
            log.warning("%s reads again: the gateway takes requests signed with its keys.", self.keys.path)

    async def _authorize(self, call: Inbound, body: RequestBody, principal: Principal) -> None:
        if needs_body(principal, call.reach):
            await body.read()
        authorize(principal, call.reach, call.operation, body.data, self.endpoint_of)


def _resource(call: Inbound, body: RequestBody) -> str:
    if call.reach.open:
        return "-"
    if call.reach.endpoint is not None:
        return call.reach.endpoint
    if call.reach.dialect is Dialect.CONTROL:
        return resource_of(body.data)
    return call.scope["path"] if call.reach.dialect is Dialect.PIER else "-"


def _audited(send: Send, call: Inbound, principal: Principal, resource: str) -> Send:
    async def send_and_audit(message: Message) -> None:
        if message["type"] == "http.response.start":
            audit(principal.name, call.operation, resource, str(message["status"]), call.client)
        await send(message)

    return send_and_audit
