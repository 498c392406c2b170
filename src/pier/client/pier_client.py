"""What the `pier` CLI calls to talk to a running gateway: deploy a file, list, describe, invoke, chat, read
logs, delete. Plain boto3 underneath, plus pier's own `/pier/copies` routes for what SageMaker's API has no
words for, all signed with one access key (any key works on a gateway without keys)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
from botocore.config import Config
from botocore.exceptions import ClientError, ParamValidationError

from pier.client.deploy_file import (
    NOT_A_DEPLOYMENT,
    Calls,
    DeployFile,
    calls,
    component_changed,
    deployment_refusal,
    update_input,
)
from pier.control.records import IN_PROGRESS
from pier.security.client_credentials import cli_credentials
from pier.security.client_trust import TrustError, ca_bundle, connection_problem, ssl_context
from pier.security.signing import SigV4Signer

DEFAULT_URL = "http://127.0.0.1:8080"
# SageMaker's words for a call to an endpoint of inference components that names none of them
NO_COMPONENT_NAMED = "Inference Component Name header is required"
Say = Callable[[str], None]


class PierClientError(RuntimeError):
    """Something the user asked for did not happen; the message says what to do."""


@dataclass(frozen=True)
class EndpointSummary:
    name: str
    status: str
    instance_type: str
    instances: int
    serves: str  # the model's name, or the inference components' names
    copies_ready: int
    copies_wanted: int
    failure_reason: str = ""


class PierClient:
    def __init__(self, url: str = DEFAULT_URL, *, timeout_s: float = 120.0,
                 credentials: tuple[str, str] | None = None, ca_bundle_file: Path | None = None) -> None:
        """`credentials`: an access key id and secret (`pier keys create`); default: see cli_credentials.
        `ca_bundle_file`: the CAs an https:// gateway's certificate is checked against; default: see
        client_trust.ca_bundle (AWS_CA_BUNDLE, REQUESTS_CA_BUNDLE, SSL_CERT_FILE, else the public CAs)."""
        if (problem := url_problem(url)) is not None:
            raise PierClientError(f"{url} {problem}")
        self.url = url.rstrip("/")
        key_id, secret = credentials or cli_credentials(self.url)
        try:
            bundle = ca_bundle(ca_bundle_file)
        except TrustError as error:
            raise PierClientError(str(error)) from None
        settings: dict[str, Any] = {"endpoint_url": self.url, "region_name": "us-east-1",
                                    "aws_access_key_id": key_id, "aws_secret_access_key": secret,
                                    "verify": str(bundle) if bundle is not None else None}
        config = Config(read_timeout=timeout_s, retries={"max_attempts": 3})
        self.sagemaker = boto3.client("sagemaker", **settings, config=config)
        self.runtime = boto3.client("sagemaker-runtime", **settings, config=config)
        self.http = httpx.Client(base_url=self.url, timeout=timeout_s, trust_env=False, verify=ssl_context(bundle),
                                 auth=SigV4Signer(key_id, secret))

    def ping(self) -> None:
        """Raise PierClientError unless a gateway answers at the URL (call it first for a clear message)."""
        try:
            self.http.get("/ping", timeout=5).raise_for_status()
        except httpx.HTTPError as error:
            raise PierClientError(connection_problem(self.url, error) or (
                f"No pier gateway answers at {self.url} ({type(error).__name__}): start one with `pier up`, or pass "
                "the URL of the one you run.")) from None

    # ---- deploy

    def deploy(self, file: DeployFile, base: Path, *, wait: bool = True, say: Say = lambda _: None,
               timeout_s: float = 1800.0) -> None:
        """Make the endpoint what the file says (create, or update what changed), then wait for InService."""
        todo = calls(file, base)
        if (refusal := deployment_refusal(todo)) is not None:
            raise PierClientError(refusal)
        self._retry_if_failed(todo, say)
        for model in todo.models:
            self._create_unless_exists("model", model, say)
        self._create_unless_exists("endpoint config", todo.config, say)
        self._converge_endpoint(todo, say, timeout_s)
        if wait:
            described = self._wait_endpoint(file.endpoint, say, timeout_s)
            if described["EndpointConfigName"] != todo.endpoint["EndpointConfigName"]:
                raise PierClientError(
                    f"The update of endpoint {file.endpoint} rolled back: "
                    f"{described.get('FailureReason', 'no reason given')}. It still serves "
                    f"{described['EndpointConfigName']}; `pier describe {file.endpoint}` and `pier logs` say more.")
        self._converge_components(file.endpoint, todo, say)
        if wait:
            for component in todo.components:
                self._wait_component(component["InferenceComponentName"], say, timeout_s)

    def _retry_if_failed(self, todo: Calls, say: Say) -> None:
        """A Failed endpoint asked for again with the very config it failed with is deleted, to be created anew:
        its cause may be fixed outside the file (a model file put in place), and nothing would change it else."""
        name, config = todo.endpoint["EndpointName"], todo.endpoint["EndpointConfigName"]
        current = self._describe_endpoint(name)
        if current is None or current["EndpointStatus"] != "Failed" or current["EndpointConfigName"] != config:
            return
        reason = (current.get("FailureReason") or "no reason given").splitlines()[0]  # its log lines follow it
        say(f"endpoint {name} is Failed with this same config ({reason}): deleting it to create it again")
        self.delete(name, say=say)

    def _create_unless_exists(self, kind: str, request: dict[str, Any], say: Say) -> None:
        create = {"model": self.sagemaker.create_model, "endpoint config": self.sagemaker.create_endpoint_config}
        name = request.get("ModelName") or request["EndpointConfigName"]
        try:
            create[kind](**request)
            say(f"created {kind} {name}")
        except ClientError as error:
            if "already existing" not in _message(error):
                raise

    def _converge_endpoint(self, todo: Calls, say: Say, timeout_s: float) -> None:
        name, config = todo.endpoint["EndpointName"], todo.endpoint["EndpointConfigName"]
        current = self._describe_endpoint(name)
        if current is None:
            self.sagemaker.create_endpoint(**todo.endpoint)
            say(f"creating endpoint {name}")
        elif current["EndpointConfigName"] != config:
            # SageMaker updates an endpoint that is InService or Failed: a fixed file mends a failed deploy
            self._wait(lambda: self._describe_endpoint(name) or {"EndpointStatus": "Gone"}, "EndpointStatus",
                       f"endpoint {name}", say, timeout_s, shown=update_progress)
            try:
                self.sagemaker.update_endpoint(**update_input(todo))
            except ParamValidationError as error:
                raise PierClientError(f"{NOT_A_DEPLOYMENT}{error}") from None
            say(f"updating endpoint {name} to {config}")

    def _converge_components(self, endpoint: str, todo: Calls, say: Say) -> None:
        existing = {c["InferenceComponentName"]: c for c in self._components(endpoint)}
        for wanted in todo.components:
            name = wanted["InferenceComponentName"]
            if name not in existing:
                self.sagemaker.create_inference_component(**wanted)
                say(f"creating inference component {name}")
                continue
            described = self.sagemaker.describe_inference_component(InferenceComponentName=name)
            if component_changed(described, wanted):
                self.sagemaker.update_inference_component(InferenceComponentName=name, **{
                    k: wanted[k] for k in ("Specification", "RuntimeConfig")})
                say(f"updating inference component {name}")
        for name in set(existing) - {c["InferenceComponentName"] for c in todo.components}:
            self.sagemaker.delete_inference_component(InferenceComponentName=name)
            say(f"deleting inference component {name} (not in the file)")

    def _wait_endpoint(self, name: str, say: Say, timeout_s: float) -> dict[str, Any]:
        described = self._wait(lambda: self._describe_endpoint(name) or {"EndpointStatus": "Gone"},
                               "EndpointStatus", f"endpoint {name}", say, timeout_s, shown=update_progress)
        if described["EndpointStatus"] != "InService":
            raise PierClientError(f"Endpoint {name} is {described['EndpointStatus']}: "
                                  f"{described.get('FailureReason', 'no reason given')}")
        return described

    def _wait_component(self, name: str, say: Say, timeout_s: float) -> None:
        described = self._wait(lambda: self.sagemaker.describe_inference_component(InferenceComponentName=name),
                               "InferenceComponentStatus", f"inference component {name}", say, timeout_s)
        if described["InferenceComponentStatus"] != "InService":
            raise PierClientError(f"Inference component {name} is {described['InferenceComponentStatus']}: "
                                  f"{described.get('FailureReason', 'no reason given')}")

    @staticmethod
    def _wait(describe: Callable[[], dict[str, Any]], key: str, what: str, say: Say, timeout_s: float,
              shown: Callable[[dict[str, Any]], str] | None = None) -> dict[str, Any]:
        """Until the status is no longer in progress; each change of what `shown` makes of it is said."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while True:
            described = describe()
            text = shown(described) if shown else described[key]
            if text != last:
                last = text
                say(f"{what} is {last}")
            if described[key] not in IN_PROGRESS or time.monotonic() > deadline:
                return described
            time.sleep(0.5)

    # ---- look

    def endpoints(self) -> list[EndpointSummary]:
        rows = []
        for listed in self._paged(self.sagemaker.list_endpoints, "Endpoints", SortBy="Name", SortOrder="Ascending"):
            described = self._describe_endpoint(listed["EndpointName"])
            if described is not None:
                rows.append(self._summary(described))
        return rows

    def describe(self, name: str) -> dict[str, Any]:
        """The endpoint, its inference components and its copies, or those of the component called `name`."""
        endpoint = self._describe_endpoint(name)
        if endpoint is None:
            component = self._describe_component(name)
            if component is None:
                raise PierClientError(f"No endpoint or inference component is called {name}; `pier ls` lists them.")
            return {"component": component, "copies": self.copies(name)}
        components = [self._describe_component(c["InferenceComponentName"]) for c in self._components(name)]
        return {"endpoint": endpoint, "components": [c for c in components if c], "copies": self.copies(name)}

    def check_named(self, name: str) -> None:
        """Raise PierClientError unless `name` is an endpoint or an inference component (or `ENDPOINT/COMPONENT`,
        as OpenAI's `model` may name one)."""
        endpoint, _, component = name.partition("/")
        if component:
            found = self._describe_endpoint(endpoint) is not None and self._describe_component(component) is not None
        else:
            found = self._describe_endpoint(name) is not None or self._describe_component(name) is not None
        if not found:
            raise PierClientError(f"No endpoint or inference component is called {name}; `pier ls` lists them.")

    def copies(self, name: str) -> list[dict[str, Any]]:
        """The copies serving endpoint or component `name`."""
        workloads = {name} | {c["InferenceComponentName"] for c in self._components(name)}
        rows = self.http.get("/pier/copies").raise_for_status().json()["copies"]
        return [c for c in rows if c["component"] in workloads or c["component"].startswith(f"{name}/")]

    def logs(self, name: str, lines: int = 200) -> dict[str, str]:
        """The end of each copy's log, by copy id."""
        self.check_named(name)  # else a misspelt name would read as "no copies right now"
        found = {}
        for copy in self.copies(name):
            reply = self.http.get(f"/pier/copies/{copy['copy_id']}/logs", params={"lines": lines})
            found[copy["copy_id"]] = reply.text if reply.is_success else reply.json()["message"]
        return found

    # ---- use

    def invoke(self, endpoint: str, body: bytes | str, *, content_type: str = "application/json",
               component: str | None = None) -> bytes:
        extra = {"InferenceComponentName": component} if component else {}
        with self._naming_components(endpoint, "name one with --component, e.g. --component {}"):
            reply = self.runtime.invoke_endpoint(EndpointName=endpoint, Body=body, ContentType=content_type, **extra)
        return bytes(reply["Body"].read())

    def invoke_stream(self, endpoint: str, body: bytes | str, *, content_type: str = "application/json",
                      component: str | None = None) -> Iterator[bytes]:
        extra = {"InferenceComponentName": component} if component else {}
        with self._naming_components(endpoint, "name one with --component, e.g. --component {}"):
            reply = self.runtime.invoke_endpoint_with_response_stream(
                EndpointName=endpoint, Body=body, ContentType=content_type, **extra)
        for event in reply["Body"]:
            if "PayloadPart" in event:
                yield event["PayloadPart"]["Bytes"]
            else:  # ModelStreamError / InternalStreamFailure: botocore raises those itself
                raise PierClientError(f"The stream ended with {event}")

    @contextmanager
    def _naming_components(self, endpoint: str, how: str) -> Iterator[None]:
        """SageMaker's refusal of a call that names an endpoint of inference components but none of them speaks
        of a header: said instead as the components there are and how to name one (`how`, with `{}` for one)."""
        try:
            yield
        except ClientError as error:
            if NO_COMPONENT_NAMED not in _message(error):
                raise
            raise self._components_needed(endpoint, how) from None

    def _components_needed(self, endpoint: str, how: str) -> PierClientError:
        names = [c["InferenceComponentName"] for c in self._components(endpoint)] or ["NAME"]
        return PierClientError(f"Endpoint {endpoint} hosts inference components ({', '.join(names)}): "
                               f"{how.format(names[0])}.")

    def chat(self, model: str, messages: list[dict[str, str]], *, max_tokens: int = 512,
             **parameters: Any) -> Iterator[str]:
        """The assistant's reply as it is generated; `model` names an endpoint or an inference component."""
        body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True, **parameters}
        with self.http.stream("POST", "/v1/chat/completions", json=body) as reply:
            if not reply.is_success:
                reply.read()
                if NO_COMPONENT_NAMED in reply.text:
                    raise self._components_needed(model, "talk to one by its name, e.g. `pier chat {}`")
                raise PierClientError(_openai_message(reply.text))
            for line in reply.iter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line.removeprefix("data:"))
                if "error" in event:
                    raise PierClientError(event["error"].get("message", str(event["error"])))
                for choice in event.get("choices", []):
                    yield choice.get("delta", {}).get("content") or ""

    # ---- delete

    def delete(self, name: str, *, wait: bool = True, say: Say = lambda _: None, timeout_s: float = 600.0) -> None:
        """The endpoint's components, the endpoint, then its config and the models nothing else uses."""
        endpoint = self._describe_endpoint(name)
        if endpoint is None:
            raise PierClientError(f"No endpoint is called {name}; `pier ls` lists them.")
        models = self._models_of(endpoint)
        for component in self._components(name):
            self.sagemaker.delete_inference_component(InferenceComponentName=component["InferenceComponentName"])
            say(f"deleting inference component {component['InferenceComponentName']}")
        deadline = time.monotonic() + timeout_s
        while self._components(name) and time.monotonic() < deadline:  # SageMaker refuses the endpoint until then
            time.sleep(0.5)
        self.sagemaker.delete_endpoint(EndpointName=name)
        say(f"deleting endpoint {name}")
        if wait:
            self.sagemaker.get_waiter("endpoint_deleted").wait(
                EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": int(timeout_s)})
            self._delete_unused(endpoint["EndpointConfigName"], models, say)

    def _models_of(self, endpoint: dict[str, Any]) -> set[str]:
        models = {v.get("ModelName") for v in self._variants(endpoint["EndpointConfigName"])}
        for component in self._components(endpoint["EndpointName"]):
            described = self._describe_component(component["InferenceComponentName"]) or {}
            models.add(described.get("Specification", {}).get("ModelName"))
        return {m for m in models if m}

    def _delete_unused(self, config: str, models: set[str], say: Say) -> None:
        configs_in_use = {e["EndpointConfigName"] for e in map(self._describe_endpoint, self._endpoint_names()) if e}
        if config not in configs_in_use:
            self._ignore_missing(lambda: self.sagemaker.delete_endpoint_config(EndpointConfigName=config))
            say(f"deleted endpoint config {config}")
        in_use = {v.get("ModelName") for c in configs_in_use for v in self._variants(c)}
        for listed in self._paged(self.sagemaker.list_inference_components, "InferenceComponents"):
            described = self._describe_component(listed["InferenceComponentName"]) or {}
            in_use.add(described.get("Specification", {}).get("ModelName"))
        for model in models - in_use:
            self._ignore_missing(functools.partial(self.sagemaker.delete_model, ModelName=model))
            say(f"deleted model {model}")

    # ---- helpers

    def _describe_endpoint(self, name: str) -> dict[str, Any] | None:
        return self._or_none(lambda: self.sagemaker.describe_endpoint(EndpointName=name))

    def _describe_component(self, name: str) -> dict[str, Any] | None:
        return self._or_none(lambda: self.sagemaker.describe_inference_component(InferenceComponentName=name))

    def _variants(self, config: str) -> list[dict[str, Any]]:
        described = self._or_none(lambda: self.sagemaker.describe_endpoint_config(EndpointConfigName=config))
        return list((described or {}).get("ProductionVariants", []))

    def _components(self, endpoint: str) -> list[dict[str, Any]]:
        return list(self._paged(self.sagemaker.list_inference_components, "InferenceComponents",
                                EndpointNameEquals=endpoint, SortBy="Name", SortOrder="Ascending"))

    def _endpoint_names(self) -> list[str]:
        return [e["EndpointName"] for e in self._paged(self.sagemaker.list_endpoints, "Endpoints")]

    def _summary(self, described: dict[str, Any]) -> EndpointSummary:
        [variant, *_] = described["ProductionVariants"]
        config = (self._variants(described["EndpointConfigName"]) or [{}])[0]
        components = [self._describe_component(c["InferenceComponentName"])
                      for c in self._components(described["EndpointName"])]
        if components:
            ready = sum(c["RuntimeConfig"]["CurrentCopyCount"] for c in components if c)
            wanted = sum(c["RuntimeConfig"]["DesiredCopyCount"] for c in components if c)
            serves = ", ".join(c["InferenceComponentName"] for c in components if c)
        else:
            ready, wanted = variant.get("CurrentInstanceCount", 0), variant.get("DesiredInstanceCount", 0)
            serves = config.get("ModelName") or "-"
        return EndpointSummary(
            described["EndpointName"], described["EndpointStatus"], config.get("InstanceType", "?"),
            variant.get("DesiredInstanceCount", 0), serves, ready, wanted, described.get("FailureReason", ""))

    @staticmethod
    def _paged(method: Callable[..., dict[str, Any]], key: str, **query: Any) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = method(**query, **({"NextToken": token} if token else {}))
            yield from page[key]
            token = page.get("NextToken")
            if not token:
                return

    @staticmethod
    def _or_none(call: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            return call()
        except ClientError as error:
            if "Could not find" in _message(error):
                return None
            raise

    @staticmethod
    def _ignore_missing(call: Callable[[], Any]) -> None:
        try:
            call()
        except ClientError as error:
            if "Could not find" not in _message(error):
                raise


def url_problem(url: str) -> str | None:
    """What is wrong with `url` as a gateway's address, if anything: botocore refuses one without a scheme with a
    bare ValueError, and a path (the OpenAI base URL, `.../v1`) would make every call miss its route."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not a gateway's address: give http://HOST:PORT (https:// for one started with --tls-cert)."
    if parts.path.strip("/") or parts.query:
        return f"has a path: give the gateway's address without a path ({parts.scheme}://{parts.netloc})."
    return None


def refusal(error: ClientError) -> str:
    """A refused SageMaker call in one line: which call, SageMaker's error code, and its message (the fix)."""
    code = error.response.get("Error", {}).get("Code", "Error")
    return f"{error.operation_name} refused: {code}: {_message(error)}"


def _message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


def _openai_message(text: str) -> str:
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text


def update_progress(described: dict[str, Any]) -> str:
    """An endpoint's status with where its update stands (DescribeEndpoint's PendingDeploymentSummary): the new
    config, the phase (creating, canary baking, ...) and the share of the traffic moved to it."""
    status = str(described["EndpointStatus"])
    pending = described.get("PendingDeploymentSummary")
    if not pending:
        return status
    variants = pending.get("ProductionVariants", [])
    phases = sorted({s["StatusMessage"] for v in variants for s in v.get("VariantStatus", [])
                     if s.get("StatusMessage")})
    wanted = sum(v.get("DesiredWeight", 0.0) for v in variants)
    moved = sum(v.get("CurrentWeight", 0.0) for v in variants) / wanted if wanted else 0.0
    return (f"{status}: to {pending['EndpointConfigName']}, {', '.join(phases) or 'starting'}, "
            f"{moved:.0%} of its traffic moved")
