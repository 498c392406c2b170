"""The TGI flavor over a real engine on the fake runner."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pier.engine.fake import FakeRunner
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client, sse_data

pytestmark = pytest.mark.anyio

THE, QUICK, BROWN, FOX, JUMPS = 261, 262, 263, 264, 265


def scripted() -> FakeRunner:
    """After the 2-token prompt "<s> the" (BOS + one word) the greedy answer is " quick brown fox jumps"."""
    return FakeRunner(n_ctx=256, script={2: QUICK, 3: BROWN, 4: FOX, 5: JUMPS})


async def generate(client: httpx.AsyncClient, inputs: str = "hello world", **parameters: Any) -> httpx.Response:
    return await client.post("/generate", json={"inputs": inputs, "parameters": parameters})


async def test_generate_returns_only_new_text_by_default() -> None:
    async with app_client(scripted()) as client:
        response = await generate(client, "the", max_new_tokens=3)
    assert response.status_code == 200
    assert response.json() == {"generated_text": " quick brown fox"}
    assert response.headers["x-generated-tokens"] == "3" and response.headers["x-prompt-tokens"] == "2"


async def test_return_full_text_prepends_inputs() -> None:
    async with app_client(scripted()) as client:
        body = (await generate(client, "the", max_new_tokens=2, return_full_text=True)).json()
    assert body == {"generated_text": "the quick brown"}


async def test_details_list_prefill_and_tokens() -> None:
    async with app_client(scripted()) as client:
        body = (await generate(client, "the", max_new_tokens=3, details=True)).json()
    details = body["details"]
    assert details["finish_reason"] == "length" and details["generated_tokens"] == 3
    assert details["seed"] is None  # greedy
    assert [t["id"] for t in details["prefill"]] == [1, THE]
    assert [(t["id"], t["text"], t["special"]) for t in details["tokens"]] == [
        (QUICK, " quick", False),
        (BROWN, " brown", False),
        (FOX, " fox", False),
    ]
    assert all(set(t) == {"id", "text", "logprob", "special"} for t in details["tokens"])


async def test_finish_reasons_eos_and_stop_sequence() -> None:
    async with app_client(FakeRunner(n_ctx=256, eos_every=4)) as client:
        eos = (await generate(client, "the", max_new_tokens=10, details=True)).json()["details"]
    async with app_client(scripted()) as client:
        stop = (await generate(client, "the", max_new_tokens=10, stop=["fox"], details=True)).json()
    assert eos["finish_reason"] == "eos_token" and eos["tokens"][-1]["special"] is True
    assert stop["details"]["finish_reason"] == "stop_sequence" and stop["generated_text"] == " quick brown "


async def test_greedy_unless_sampling_is_asked_for(client: httpx.AsyncClient) -> None:
    greedy = [(await generate(client, max_new_tokens=8)).json()["generated_text"] for _ in range(2)]
    sampled = (await generate(client, max_new_tokens=8, do_sample=True, seed=3, details=True)).json()
    again = (await generate(client, max_new_tokens=8, do_sample=True, seed=3)).json()
    warped = (await generate(client, max_new_tokens=8, temperature=1.7, seed=3, details=True)).json()
    assert greedy[0] == greedy[1]
    assert sampled["details"]["seed"] == 3 and sampled["generated_text"] == again["generated_text"]
    assert warped["details"]["seed"] == 3  # a temperature alone turns sampling on, as in TGI


async def test_sampling_without_seed_reports_the_one_used(client: httpx.AsyncClient) -> None:
    first = (await generate(client, max_new_tokens=6, do_sample=True, details=True)).json()
    seed = first["details"]["seed"]
    assert isinstance(seed, int)
    replay = (await generate(client, max_new_tokens=6, do_sample=True, seed=seed)).json()
    assert replay["generated_text"] == first["generated_text"]


async def test_generate_stream_events_like_tgi() -> None:
    async with app_client(scripted()) as client:
        response = await client.post(
            "/generate_stream", json={"inputs": "the", "parameters": {"max_new_tokens": 3, "details": True}}
        )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.text.startswith("data:{")  # TGI writes no space after the colon
    events = [json.loads(d) for d in sse_data(response.text)]
    assert [e["token"]["id"] for e in events] == [QUICK, BROWN, FOX]
    assert [e["index"] for e in events] == [1, 2, 3]
    assert all(e["generated_text"] is None and e["details"] is None for e in events[:-1])
    assert "".join(e["token"]["text"] for e in events) == events[-1]["generated_text"] == " quick brown fox"
    assert events[-1]["details"] == {"finish_reason": "length", "generated_tokens": 3, "seed": None, "input_length": 2}


async def test_truncate_keeps_the_end_of_the_input() -> None:
    async with app_client(scripted()) as client:
        body = (await generate(client, "hello world the", max_new_tokens=1, truncate=2, details=True)).json()
    assert [t["id"] for t in body["details"]["prefill"]] == [260, THE]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"max_new_tokens": 0}, "`max_new_tokens` must be strictly positive"),
        ({"temperature": 0.0}, "`temperature` must be strictly positive"),
        ({"top_p": 1.0}, "`top_p` must be > 0.0 and < 1.0"),
        ({"top_k": 0}, "`top_k` must be strictly positive"),
        ({"repetition_penalty": 0}, "`repetition_penalty` must be strictly positive"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "`stop` supports up to 4 stop sequences. Given: 5"),
        ({"best_of": 2}, "you must use sampling when `best_of` is > 1"),
        ({"best_of": 5, "do_sample": True}, "`best_of` must be > 0 and <= 4. Given: 5"),
        ({"best_of": 2, "do_sample": True, "seed": 1}, "`seed` must not be set when `best_of` > 1"),
        ({"top_n_tokens": 6}, "`top_n_tokens` must be >= 0 and <= 5. Given: 6"),
        ({"truncate": 0}, "`truncate` must be strictly positive"),
        ({"typical_p": 0.5}, "`typical_p` is not supported"),
        (
            {"max_new_tokens": 2000},
            "`inputs` tokens + `max_new_tokens` must be <= 1024. Given: 3 `inputs` tokens and 2000 `max_new_tokens`",
        ),
        ({"max_new_tokens": "x"}, "`parameters.max_new_tokens`: Input should be a valid integer"),
        # TGI's serde takes no loose types: not 1 for true, 5 for "5", true for "yes"
        ({"max_new_tokens": True}, "`parameters.max_new_tokens`: Input should be a valid integer"),
        ({"max_new_tokens": "5"}, "`parameters.max_new_tokens`: Input should be a valid integer"),
        ({"max_new_tokens": 5.0}, "`parameters.max_new_tokens`: Input should be a valid integer"),
        ({"do_sample": "yes"}, "`parameters.do_sample`: Input should be a valid boolean"),
        ({"details": 1}, "`parameters.details`: Input should be a valid boolean"),
    ],
)
async def test_validation_errors_are_422_with_tgi_messages(
    client: httpx.AsyncClient, parameters: dict[str, Any], message: str
) -> None:
    response = await generate(client, **parameters)
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] == "validation"
    assert body["error"].startswith("Input validation error: ")
    assert message in body["error"]


async def test_empty_inputs_are_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/generate", json={"inputs": ""})
    assert response.status_code == 422 and "`inputs` cannot be empty" in response.json()["error"]


async def test_input_length_limit_message() -> None:
    async with app_client(settings=ServerSettings(max_input_tokens=4, max_total_tokens=64)) as client:
        response = await generate(client, "the quick brown fox jumps", max_new_tokens=2)
    assert response.status_code == 422
    assert response.json()["error"] == "Input validation error: `inputs` must have less than 4 tokens. Given: 6"


async def test_info_and_health(client: httpx.AsyncClient) -> None:
    info = (await client.get("/info")).json()
    assert info["model_id"] == "fake-model" and info["max_total_tokens"] == 1024
    assert info["max_input_tokens"] == 1023 and info["max_concurrent_requests"] == 128
    assert info["max_batch_total_tokens"] == 1024 and info["model_device_type"] == "cpu"
    assert (await client.get("/health")).status_code == 200
