"""What TGI's generate API decides in the flavor pipeline (server/pipeline.py): TGI's sampling rules (greedy
unless `do_sample` or a warper is set; a sampled request without a seed gets a random one, reported in
`details.seed`), `best_of`'s sequences, and the whole answer with TGI's headers."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import replace

from fastapi.responses import JSONResponse, Response

from pier.engine.request import GenerateRequest, SamplingParams
from pier.engine.validate import CheckedRequest
from pier.errors import InvalidRequest
from pier.server import choices
from pier.server.flavors.tgi.requests import DEFAULT_MAX_NEW_TOKENS, MAX_BEST_OF, GenerateRequestBody
from pier.server.flavors.tgi.views import GenerateView, check_header, timing_headers
from pier.server.generation import Completion
from pier.server.served_model import SEED_MODULUS, ServedModel


class GenerateSpec:
    """One TGI generation. /invocations answers a list and returns the full text by default, as TGI's
    SageMaker route does for text-generation models; /generate answers an object without the prompt."""

    def __init__(self, body: GenerateRequestBody, *, stream: bool, full_text_default: bool, as_list: bool) -> None:
        self.body = body
        self.stream = stream
        self.full_text_default = full_text_default
        self.as_list = as_list
        self.best_of = body.parameters.best_of or 1
        self.sequences = self.best_of if 0 < self.best_of <= MAX_BEST_OF else 1  # else refused in requests()
        self._request: GenerateRequest | None = None
        self._seed: int | None = None

    def refuse(self) -> None:
        if self.best_of > 1 and self.stream:
            raise InvalidRequest("`best_of` != 1 is not supported when streaming tokens")

    async def requests(self, model: ServedModel) -> list[GenerateRequest]:
        self.body.parameters.validate_for(model)
        if not self.body.inputs:
            raise InvalidRequest("`inputs` cannot be empty")
        self._request, self._seed = await _generate_request(model, self.body)
        return choices.choice_requests(self._request, self.best_of)

    def views(self, model: ServedModel, checked: Sequence[CheckedRequest]) -> list[GenerateView]:
        """One view for all of best_of's sequences: the answer is the best one's, the others ride in `details`."""
        assert self._request is not None, "views are made for the requests made"
        params = self.body.parameters
        full_text = params.return_full_text if params.return_full_text is not None else self.full_text_default
        view = GenerateView(
            model, self._request, seed=self._seed, prefix=self.body.inputs if full_text else "",
            details=params.details, prefill=params.details or params.decoder_input_details,
            top_n=params.top_n_tokens or 0,
        )
        if self._seed is not None:  # as run: a continuation keeps the seed of the copy that began it
            view.seed = checked[0].request.sampling.seed
        return [view]

    def answer(
        self, views: Sequence[GenerateView], checked: Sequence[CheckedRequest], done: Sequence[Completion],
    ) -> Response:
        view, params = views[0], self.body.parameters
        if len(done) == 1:
            best = done[0]
            answer = view.response(best)
        else:
            order = choices.ranked(done)
            best = done[order[0]]
            answer = view.response(best, seed=checked[order[0]].request.sampling.seed)
            if params.details:
                answer["details"]["best_of_sequences"] = [
                    view.sequence(done[i], checked[i].request.sampling.seed) for i in order[1:]]
        return JSONResponse([answer] if self.as_list else answer,
                            headers=timing_headers(best) | check_header(params.structure.check, best))


async def _generate_request(model: ServedModel, body: GenerateRequestBody) -> tuple[GenerateRequest, int | None]:
    params = body.parameters
    prompt = await model.tokenize(body.inputs, add_bos=None if body.add_special_tokens else False)
    if params.truncate is not None:
        prompt = prompt[-params.truncate:]  # TGI keeps the end of an over-long input
    requested = DEFAULT_MAX_NEW_TOKENS if params.max_new_tokens is None else params.max_new_tokens
    max_new = model.max_new_tokens(len(prompt), requested)
    seed = None
    if params.sampling_enabled:
        seed = params.seed % SEED_MODULUS if params.seed is not None else random.randrange(SEED_MODULUS)
        top_k = min(params.top_k or 0, model.n_vocab)
        sampling = SamplingParams(
            temperature=params.temperature or 1.0, top_k=top_k, top_p=params.top_p or 1.0, seed=seed,
            repetition_penalty=params.repetition_penalty or 1.0,
            frequency_penalty=params.frequency_penalty or 0.0,
        )
    else:
        sampling = SamplingParams(
            temperature=0.0, repetition_penalty=params.repetition_penalty or 1.0,
            frequency_penalty=params.frequency_penalty or 0.0,
        )
    sampling = replace(sampling, grammar=params.structure.grammar)
    # Log-probabilities cost a softmax per token: computed when the answer shows them (details, top_n_tokens,
    # decoder_input_details) or best_of ranks by them.
    wants = params.details or bool(params.top_n_tokens) or (params.best_of or 1) > 1
    request = GenerateRequest(
        request_id=uuid.uuid4().hex, prompt=prompt, sampling=sampling, max_tokens=max_new,
        stop=params.stop_sequences, add_bos=False, logprobs=(params.top_n_tokens or 0) if wants else None,
        prompt_logprobs=0 if params.decoder_input_details else None,
    )
    return request, seed
