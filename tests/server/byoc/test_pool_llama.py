"""Seeds-style inference.py handlers (llama_cpp.Llama on a GGUF in model_dir) run unchanged on a real GGUF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pier.server.byoc.pool import HandlerService
from tests.server.byoc.test_pool import make_model, serve

# Shaped like the Graviton seed's code/inference.py: the worker count sizes n_threads, input_fn and
# output_fn take context, and predict_fn sends the payload (a list of messages) to the chat API.
SEED_CHAT = """
    import json
    import logging
    import os
    from llama_cpp import Llama
    from multiprocessing import cpu_count

    worker_count = os.environ.get('SAGEMAKER_MODEL_SERVER_WORKERS', cpu_count())
    model_file = os.environ.get('MODEL_FILE_GGUF', 'tiny.gguf')

    def input_fn(request_body, request_content_type, context):
        return json.loads(request_body)

    def model_fn(model_dir):
        model = Llama(
            model_path=f"{model_dir}/{model_file}",
            verbose=False,
            n_threads=max(1, cpu_count() // int(worker_count)),
        )
        logging.info("Loaded model successfully")
        return model

    def predict_fn(input_data, model, context):
        response = model.create_chat_completion(messages=input_data, max_tokens=8, temperature=0)
        return response

    def output_fn(prediction, response_content_type, context):
        return json.dumps(prediction)
"""

# The prompt-and-parameters shape: the JSON payload's prompt and params go straight to Llama.__call__.
SEED_PROMPT = """
    import glob
    import json
    import os
    from llama_cpp import Llama

    def model_fn(model_dir):
        gguf = sorted(glob.glob(os.path.join(model_dir, "*.gguf")))[0]
        return Llama(model_path=os.path.join(model_dir, os.path.basename(gguf)), n_ctx=512, n_threads=1,
                     verbose=False)

    def input_fn(request_body, request_content_type):
        return json.loads(request_body)

    def predict_fn(data, model):
        completion = model(data["prompt"], **data.get("params", {}))
        return {"generated_text": completion["choices"][0]["text"], "usage": completion["usage"],
                "finish_reason": completion["choices"][0]["finish_reason"]}

    def output_fn(prediction, accept):
        return json.dumps(prediction), "application/json"
"""


def gguf_model(tmp_path: Path, inference: str, gguf: Path) -> Path:
    model_dir = make_model(tmp_path, inference)
    (model_dir / "tiny.gguf").symlink_to(gguf)
    return model_dir


@pytest.mark.e2e
def test_seed_chat_handler_runs_unchanged(tmp_path: Path, tiny_gguf: Path) -> None:
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Say hello"}]

    async def scenario(service: HandlerService) -> list[tuple[bytes, str]]:
        body = json.dumps(messages).encode()
        return [await service.invoke(body, "application/json", "application/json") for _ in range(2)]

    (first, content_type), (second, _) = serve(gguf_model(tmp_path, SEED_CHAT, tiny_gguf), scenario)
    assert content_type == "application/json"
    answer = json.loads(first)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] == 8
    assert json.loads(second)["choices"] == answer["choices"]  # temperature 0: the same words again


@pytest.mark.e2e
def test_seed_prompt_handler_runs_unchanged(tmp_path: Path, tiny_gguf: Path) -> None:
    payload = {"prompt": "The weather today is", "params": {"max_tokens": 6, "temperature": 0}}

    async def scenario(service: HandlerService) -> bytes:
        body, _ = await service.invoke(json.dumps(payload).encode(), "application/json", "*/*")
        return body

    answer = json.loads(serve(gguf_model(tmp_path, SEED_PROMPT, tiny_gguf), scenario))
    assert answer["generated_text"]
    assert answer["usage"]["completion_tokens"] == 6
    assert answer["finish_reason"] == "length"
