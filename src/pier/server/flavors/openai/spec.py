"""What the OpenAI API decides in the flavor pipeline (server/pipeline.py): a chat's or a completion's requests
(one per choice: `n`, `best_of`), their views, and the whole answer of several choices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, Protocol, TypeVar

from fastapi.responses import JSONResponse, Response

from pier.engine.request import GenerateRequest
from pier.engine.validate import CheckedRequest
from pier.errors import InvalidRequest
from pier.model.tools.reader import ToolReader
from pier.model.tools.tool_format import Grammar
from pier.model.tools.tool_spec import ToolSet
from pier.server import choices
from pier.server.flavors.openai.requests import ChatCompletionRequest, CompletionRequest, OpenAIRequest
from pier.server.flavors.openai.response_request import ResponseRequest
from pier.server.flavors.openai.response_view import ResponseView
from pier.server.flavors.openai.views import OpenAIView, chat_view, usage, without_output
from pier.server.generation import Completion
from pier.server.pipeline import View
from pier.server.served_model import ServedModel

V = TypeVar("V", bound=View)


class ChatView(View, Protocol):
    """How one chat request's output is shaped: OpenAI's (pier's /v1 routes) or TGI's Messages API (/invocations)."""

    def response(self, done: Completion) -> dict[str, Any]: ...


class ChatSpec:
    """A chat: its messages and tools through the model's chat template, shaped by `view`. Without max_tokens it
    may generate up to the model's limit (OpenAI's semantics) unless the dialect has a default of its own (TGI's
    Messages API: 100)."""

    def __init__(
        self, body: ChatCompletionRequest, *,
        view: Callable[[ServedModel, ChatCompletionRequest, ToolSet], ChatView] = chat_view,
        default_max_tokens: int | None = None,
    ) -> None:
        self.body = body
        self.view = view
        self.default_max_tokens = default_max_tokens
        self.stream = body.stream
        self.sequences = body.sequences

    @cached_property
    def tools(self) -> ToolSet:
        return self.body.tool_set()

    def refuse(self) -> None:
        self.body.refuse_unsupported()
        if self.body.n > 1 and self.view is not chat_view:
            raise InvalidRequest("n must be 1 on TGI's Messages API; use pier's /v1/chat/completions for several "
                                 "choices.", param="n")
        _ = self.tools  # a malformed tool list is refused before admission

    async def requests(self, model: ServedModel) -> list[GenerateRequest]:
        body, tool_format = self.body, model.tool_format
        prompt = await model.render_chat(
            tool_format.messages([m.for_template() for m in body.messages], self.tools, body.tool_prompt),
            add_generation_prompt=body.add_generation_prompt, tools=tool_format.template_tools(self.tools),
            extra=body.chat_template_kwargs,
        )
        max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        request = body.generate_request(model, prompt, self.default_max_tokens if max_tokens is None else max_tokens)
        request = _forcing_calls(request, tool_format.grammar(self.tools))
        if self.tools.active and model.tool_markers:
            request = replace(request, special_text=model.tool_markers)
        return choices.choice_requests(request, body.sequences)

    def views(self, model: ServedModel, checked: Sequence[CheckedRequest]) -> list[ChatView]:
        views = siblings(lambda: self.view(model, self.body, self.tools), len(checked))
        for k, shaped in enumerate(views):  # each choice's calls get ids of their own
            reader = getattr(shaped, "tools", None)
            if isinstance(reader, ToolReader):
                reader.choice = k
        return views

    def answer(
        self, views: Sequence[ChatView], checked: Sequence[CheckedRequest], done: Sequence[Completion],
    ) -> Response:
        return whole(self.body, views, done)


class ResponseSpec(ChatSpec):
    """A Responses API request: the chat it is, answered as a `response` (flavors/openai/response_view.py), its
    errors naming the Responses body's fields."""

    def __init__(self, body: ResponseRequest) -> None:
        self.response_body = body
        try:
            chat = body.chat()
        except InvalidRequest as error:
            raise body.renamed(error) from None
        super().__init__(chat, view=ResponseView.of(body))

    def refuse(self) -> None:
        try:
            super().refuse()
        except InvalidRequest as error:
            raise self.response_body.renamed(error) from None

    async def requests(self, model: ServedModel) -> list[GenerateRequest]:
        try:
            return await super().requests(model)
        except InvalidRequest as error:
            raise self.response_body.renamed(error) from None


class CompletionSpec:
    """A text completion: its one prompt, as text or token ids."""

    def __init__(self, body: CompletionRequest) -> None:
        self.body = body
        self.stream = body.stream
        self.sequences = body.sequences
        self._given: str | list[int] = ""
        self._prompt: list[int] = []

    def refuse(self) -> None:
        self.body.refuse_unsupported()

    async def requests(self, model: ServedModel) -> list[GenerateRequest]:
        body = self.body
        self._given = given = body.single_prompt()
        # Token ids are used exactly as given (no BOS), as llama-server and vLLM do.
        self._prompt = await model.tokenize(given) if isinstance(given, str) else list(given)
        request = body.generate_request(model, self._prompt, 1 if body.prompt_only else body.max_tokens)
        return choices.choice_requests(request, body.sequences)

    def views(self, model: ServedModel, checked: Sequence[CheckedRequest]) -> list[OpenAIView]:
        body = self.body
        piece = model.engine.runner.piece if body.logprobs is not None else None
        check = body.schema_check()
        echo = ""
        if body.echo:  # given token ids are read only now that the check found them in the vocabulary
            echo = self._given if isinstance(self._given, str) else model.detokenize(self._prompt)

        def make() -> OpenAIView:
            return OpenAIView(body.model or model.name, chat=False, include_usage=body.include_usage, echo=echo,
                              piece=piece, prompt=self._prompt, check=check, prompt_only=body.prompt_only)

        return siblings(make, len(checked))

    def answer(
        self, views: Sequence[OpenAIView], checked: Sequence[CheckedRequest], done: Sequence[Completion],
    ) -> Response:
        return whole(self.body, views, [without_output(d) for d in done] if self.body.prompt_only else done)


def siblings(make: Callable[[], V], n: int) -> list[V]:
    """One view per choice, all with the first one's id and creation time."""
    views = [make()]
    for _ in range(n - 1):
        sibling = make()
        sibling.head = views[0].head
        views.append(sibling)
    return views


def whole(body: OpenAIRequest, views: Sequence[ChatView], done: Sequence[Completion]) -> Response:
    """The answer: one choice, or the `n` best of several (best_of) merged into one."""
    if len(done) == 1:
        return JSONResponse(views[0].response(done[0]))
    best = choices.ranked(done)[: body.n] if body.sequences > body.n else range(body.n)
    return JSONResponse(_merged([views[i].response(done[i]) for i in best], done))


def _merged(answers: list[dict[str, Any]], done: Sequence[Completion]) -> dict[str, Any]:
    """Several choices as one answer; usage counts every sequence generated (best_of's too), as OpenAI bills."""
    merged = dict(answers[0])
    merged["choices"] = [{**answer["choices"][0], "index": i} for i, answer in enumerate(answers)]
    merged["usage"] = usage(done[0].prompt_tokens, sum(len(d.token_ids) for d in done))
    return merged


def _forcing_calls(request: GenerateRequest, grammar: Grammar | None) -> GenerateRequest:
    """The request under its calls' grammar: forced from the first token, or lazy (`auto`, see ToolFormat)."""
    if grammar is None:
        return request
    if request.sampling.grammar is not None:
        if grammar.triggers:  # auto beside response_format: the format's grammar rules, calls are only parsed
            return request
        raise InvalidRequest("A forced tool_choice cannot be combined with response_format: send one of them.",
                             param="tool_choice")
    sampling = replace(request.sampling, grammar=grammar.text, grammar_triggers=grammar.triggers)
    return replace(request, sampling=sampling)
