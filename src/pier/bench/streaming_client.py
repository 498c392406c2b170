"""Streaming clients, one per API flavor. Each writes a Prompt as its API's request body and reads the answer's
events into a RequestRecord; whatever goes wrong (no server, an HTTP error, an error event, a stream cut short,
a timeout) ends as an error code on the record, never as an exception.

A token's time is when the bytes carrying it arrived. Only chunks that carry generated text (or, in TGI, a
token) count as tokens: vLLM's client takes any chunk with a `choices` entry, but chat servers (pier among
them) send a role-only chunk before prefill is done, which would make every TTFT look instant.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from pier.bench import eventstream_decoder
from pier.bench.conversations import Prompt
from pier.bench.options import Api, BenchError
from pier.bench.request_record import RequestFailed, RequestRecord
from pier.bench.sse_decoder import SseDecoder
from pier.bench.subject import Subject
from pier.bench.vocabulary import Content
from pier.security.client_trust import connection_problem

INFERENCE_COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"  # InvokeEndpoint's InferenceComponentName
ERROR_TEXT_LIMIT = 300  # characters of an error body kept in the per-request results


@dataclass(frozen=True)
class ClientSettings:
    model: str | None
    temperature: float
    timeout_s: float
    api_key: str | None = None
    inference_component: str | None = None  # sent as SageMaker's header on SageMaker routes only


@dataclass
class Stream:
    """One answer as it arrives; `now` is when the bytes being read arrived (seconds after the request)."""

    record: RequestRecord
    now: float = 0.0
    finished: bool = False
    usage_output: int | None = None
    usage_input: int | None = None

    def token(self, text: str) -> None:
        self.record.token_times.append(self.now)
        self.record.text += text


class Decoder(Protocol):
    def feed(self, chunk: bytes) -> list[str]: ...

    def close(self) -> list[str]: ...


class StreamingClient(ABC):
    accepts_token_ids = False

    def __init__(self, http: httpx.AsyncClient, target: Subject, settings: ClientSettings) -> None:
        self.http = http
        self.target = target
        self.settings = settings

    @abstractmethod
    def body(self, prompt: Prompt) -> dict[str, Any]: ...

    @abstractmethod
    def read_event(self, data: str, stream: Stream) -> None: ...

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    async def send(self, prompt: Prompt, record: RequestRecord) -> RequestRecord:
        stream = Stream(record)
        record.start = time.perf_counter()
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                await self._exchange(prompt, stream)
        except RequestFailed as failure:
            record.fail(failure.code, failure.message)
        except (TimeoutError, httpx.TimeoutException):
            record.fail(
                "timeout", f"no complete answer within {self.settings.timeout_s:g} s; raise --timeout or lower the load"
            )
        except httpx.ConnectError as error:
            record.fail("connection_error", connection_problem(self.target.url, error) or (
                f"cannot connect to {self.target.url} ({error}): is the server running, and are the host and port "
                "right?"))
        except (httpx.RemoteProtocolError, httpx.ReadError) as error:
            record.fail("stream_cut", f"the connection broke mid-answer ({error or type(error).__name__})")
        except httpx.HTTPError as error:
            record.fail(type(error).__name__, str(error))
        record.end = time.perf_counter() - record.start
        _settle(record, stream, prompt)
        return record

    async def _exchange(self, prompt: Prompt, stream: Stream) -> None:
        response = await self._answer(prompt)
        try:
            if response.is_error:
                await response.aread()
                raise RequestFailed(str(response.status_code), error_text(response))
            decoder = _decoder(response)
            async for chunk in response.aiter_bytes():
                stream.now = time.perf_counter() - stream.record.start
                for data in decoder.feed(chunk):
                    self.read_event(data, stream)
            for data in decoder.close():
                self.read_event(data, stream)
        finally:
            await response.aclose()

    async def _answer(self, prompt: Prompt) -> httpx.Response:
        """The response, once its status and headers arrived. A pooled keep-alive connection that the server
        closed just as the request went out fails before any answer (llama-server's HTTP library closes them
        after a few requests, or when idle); nothing was answered, so the request goes once more on a fresh
        connection, as urllib3 and browsers do, instead of counting the server's housekeeping as its error."""
        request = self.http.build_request("POST", self.target.url, json=self.body(prompt), headers=self.headers())
        closed = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
        try:
            return await self.http.send(request, stream=True)
        except closed:
            pass
        try:
            return await self.http.send(request, stream=True)
        except closed as error:
            raise RequestFailed(
                "connection_closed", f"the server closed the connection without answering, twice ({error})"
            ) from None

    def _sampling(self, prompt: Prompt) -> dict[str, Any]:
        """What every OpenAI-shaped body carries: a fixed output length (`ignore_eos`) and the server's usage."""
        fields: dict[str, Any] = {
            "max_tokens": prompt.max_tokens,
            "temperature": self.settings.temperature,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.settings.model:
            fields["model"] = self.settings.model
        return fields


class _OpenAIClient(StreamingClient):
    @abstractmethod
    def choice_text(self, choice: dict[str, Any]) -> str: ...

    def read_event(self, data: str, stream: Stream) -> None:
        if data.strip() == "[DONE]":
            stream.finished = True
            return
        event = json_event(data)
        if isinstance(usage := event.get("usage"), dict):
            stream.usage_output = _count(usage.get("completion_tokens"))
            stream.usage_input = _count(usage.get("prompt_tokens"))
        for choice in event.get("choices") or []:
            if text := self.choice_text(choice):
                stream.token(text)
            if choice.get("finish_reason"):
                stream.finished = True


class OpenAICompletionsClient(_OpenAIClient):
    accepts_token_ids = True

    def body(self, prompt: Prompt) -> dict[str, Any]:
        return {"prompt": render_completion(prompt), **self._sampling(prompt)}

    def choice_text(self, choice: dict[str, Any]) -> str:
        return str(choice.get("text") or "")


class OpenAIChatClient(_OpenAIClient):
    def body(self, prompt: Prompt) -> dict[str, Any]:
        return {"messages": render_messages(prompt), **self._sampling(prompt)}

    def choice_text(self, choice: dict[str, Any]) -> str:
        delta = choice.get("delta")
        return str(delta.get("content") or "") if isinstance(delta, dict) else ""


class TgiClient(StreamingClient):
    """TGI's /generate_stream: one event per token, the last with `details`. TGI has no `ignore_eos`, so an
    answer may end early at EOS; the count then comes from `details.generated_tokens`."""

    def body(self, prompt: Prompt) -> dict[str, Any]:
        parameters: dict[str, Any] = {"max_new_tokens": prompt.max_tokens, "details": True}
        if self.settings.temperature > 0:
            parameters |= {"do_sample": True, "temperature": self.settings.temperature}
        return {"inputs": render_text(prompt), "parameters": parameters}

    def read_event(self, data: str, stream: Stream) -> None:
        event = json_event(data)
        if isinstance(token := event.get("token"), dict):
            stream.token("" if token.get("special") else str(token.get("text") or ""))
        if isinstance(details := event.get("details"), dict):
            stream.usage_output = _count(details.get("generated_tokens"))
            stream.usage_input = _count(details.get("input_length"))  # pier's addition; TGI sends none
        if event.get("generated_text") is not None:
            stream.finished = True


class SageMakerClient(StreamingClient):
    """SageMaker's runtime routes: a container's /invocations (server-sent events) or an endpoint's
    /invocations-response-stream (the same events inside AWS event-stream frames). The body is another
    flavor's, chosen with --payload, plus `"stream": true`."""

    def __init__(self, inner: StreamingClient) -> None:
        super().__init__(inner.http, inner.target, inner.settings)
        self.inner = inner
        self.accepts_token_ids = inner.accepts_token_ids

    def body(self, prompt: Prompt) -> dict[str, Any]:
        return {**self.inner.body(prompt), "stream": True}

    def read_event(self, data: str, stream: Stream) -> None:
        self.inner.read_event(data, stream)

    def headers(self) -> dict[str, str]:
        accept = "X-Amzn-SageMaker-Accept" if self.target.url.endswith("-response-stream") else "Accept"
        headers = {**super().headers(), accept: "text/event-stream"}
        if self.settings.inference_component:
            headers[INFERENCE_COMPONENT_HEADER] = self.settings.inference_component
        return headers


_FLAVORS: dict[Api, type[StreamingClient]] = {
    Api.OPENAI_COMPLETIONS: OpenAICompletionsClient,
    Api.OPENAI_CHAT: OpenAIChatClient,
    Api.TGI: TgiClient,
}


def make_client(http: httpx.AsyncClient, target: Subject, settings: ClientSettings, payload: Api) -> StreamingClient:
    if target.api is Api.SAGEMAKER:
        return SageMakerClient(_FLAVORS[payload](http, target, settings))
    return _FLAVORS[target.api](http, target, settings)


# -- bodies ------------------------------------------------------------------------------------------------


def render_completion(prompt: Prompt) -> str | list[int]:
    """Token ids stay ids (exact length, no BOS added by the server); anything else becomes one text."""
    parts = _parts(prompt)
    ids = [part for part in parts if isinstance(part, tuple)]
    if len(ids) == len(parts):
        return [token for part in ids for token in part]
    return render_text(prompt)


def render_text(prompt: Prompt) -> str:
    return " ".join(_text(part).strip() for part in _parts(prompt))


def render_messages(prompt: Prompt) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": _text(prompt.system)}] if prompt.system is not None else []
    for exchange in prompt.history:
        messages += [
            {"role": "user", "content": _text(exchange.user)},
            {"role": "assistant", "content": exchange.reply},
        ]
    return [*messages, {"role": "user", "content": _text(prompt.user)}]


def _parts(prompt: Prompt) -> list[Content]:
    parts: list[Content] = [] if prompt.system is None else [prompt.system]
    for exchange in prompt.history:
        parts += [exchange.user, exchange.reply]
    return [*parts, prompt.user]


def _text(content: Content) -> str:
    if isinstance(content, tuple):
        raise BenchError("Token-id prompts only fit the OpenAI completions API: use --prompt-format text.")
    return content


# -- reading answers ---------------------------------------------------------------------------------------


def json_event(data: str) -> dict[str, Any]:
    """One event's JSON; an error event (OpenAI's or TGI's shape) raises with the server's own code."""
    try:
        event = json.loads(data)
    except ValueError:
        raise RequestFailed("bad_event", f"an event was not JSON: {data[:ERROR_TEXT_LIMIT]!r}") from None
    if not isinstance(event, dict):
        raise RequestFailed("bad_event", f"an event was not a JSON object: {data[:ERROR_TEXT_LIMIT]!r}")
    if (error := event.get("error")) is not None:
        if isinstance(error, dict):
            code, message = error.get("code") or error.get("type"), error.get("message")
        else:
            code, message = event.get("error_type"), error
        raise RequestFailed(f"event:{code or 'error'}", str(message))
    return event


def error_text(response: httpx.Response) -> str:
    """The message of an error response in any flavor's shape (OpenAI, TGI, SageMaker), else its start."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:ERROR_TEXT_LIMIT]
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error or body.get("message")
        if message:
            return str(message)[:ERROR_TEXT_LIMIT]
    return response.text[:ERROR_TEXT_LIMIT]


class _FramedSse:
    def __init__(self) -> None:
        self.frames = eventstream_decoder.EventStreamDecoder()
        self.sse = SseDecoder()

    def feed(self, chunk: bytes) -> list[str]:
        return self.sse.feed(self.frames.feed(chunk))

    def close(self) -> list[str]:
        return self.sse.close()


def _decoder(response: httpx.Response) -> Decoder:
    content_type = response.headers.get("content-type", "")
    if content_type.startswith(eventstream_decoder.CONTENT_TYPE):
        return _FramedSse()
    if content_type.startswith("application/json"):
        raise RequestFailed(
            "not_streamed", "the server answered with one JSON body, not a stream: point TARGET at a streaming route"
        )
    return SseDecoder()


def _settle(record: RequestRecord, stream: Stream, prompt: Prompt) -> None:
    """Token counts from the server when it reported them, else counted; a stream must finish with a token."""
    if record.ok and not stream.finished:
        record.fail("stream_cut", "the stream ended before the server marked the answer finished")
    if record.ok and not record.token_times:
        record.fail("no_tokens", "the answer finished without a single token")
    if stream.usage_output is not None:
        record.output_tokens, record.output_tokens_source = stream.usage_output, "usage"
    else:
        record.output_tokens, record.output_tokens_source = len(record.token_times), "chunks"
    if stream.usage_input is not None:
        record.input_tokens, record.input_tokens_source = stream.usage_input, "usage"
    else:
        record.input_tokens, record.input_tokens_source = prompt.planned_input_tokens, "planned"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
