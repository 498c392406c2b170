"""HandlerService over real worker processes, on handler folders written here."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import signal
import textwrap
import time
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from pier.server.byoc.errors import HandlerError
from pier.server.byoc.pool import HandlerService

T = TypeVar("T")


def make_model(root: Path, inference: str, requirements: str | None = None) -> Path:
    """A SageMaker model folder: code/inference.py (and code/requirements.txt)."""
    code = root / "model" / "code"
    code.mkdir(parents=True)
    (code / "inference.py").write_text(textwrap.dedent(inference))
    if requirements is not None:
        (code / "requirements.txt").write_text(requirements)
    return code.parent


def serve(model_dir: Path, scenario: Callable[[HandlerService], Awaitable[T]], **options: object) -> T:
    """Start a service, run the scenario against it, always stop it."""

    async def main() -> T:
        service = HandlerService(model_dir, **options)  # type: ignore[arg-type]
        try:
            await service.start()
            return await scenario(service)
        finally:
            await service.stop()

    return asyncio.run(main())


async def invoke_json(service: HandlerService, payload: object, attributes: str | None = None) -> object:
    body = json.dumps(payload).encode()
    body, content_type = await service.invoke(body, "application/json", "application/json", attributes)
    assert content_type == "application/json"
    return json.loads(body)


FOUR_FUNCTIONS = """
    import json
    import os

    def model_fn(model_dir):
        print("loading from", model_dir)  # must not disturb the frames on stdout
        return {"dir": model_dir, "pid": os.getpid()}

    def input_fn(request_body, request_content_type):
        assert isinstance(request_body, str), type(request_body)
        return json.loads(request_body)

    def predict_fn(input_data, model):
        if input_data.get("fail"):
            raise ValueError("the payload asked to fail")
        return {"prompt": input_data["prompt"].upper(), "model_dir": model["dir"], "pid": model["pid"]}

    def output_fn(prediction, accept):
        return json.dumps(prediction), accept
"""


@pytest.mark.e2e
def test_four_function_handler(tmp_path: Path) -> None:
    model_dir = make_model(tmp_path, FOUR_FUNCTIONS)

    async def scenario(service: HandlerService) -> None:
        assert service.ready
        answer = await invoke_json(service, {"prompt": "hi"})
        assert answer == {"prompt": "HI", "model_dir": str(model_dir), "pid": answer["pid"]}  # type: ignore[index]
        assert answer["pid"] != os.getpid()  # type: ignore[index]

    serve(model_dir, scenario)


@pytest.mark.e2e
def test_a_raising_handler_names_the_exception_and_keeps_serving(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> None:
        with pytest.raises(HandlerError) as caught:
            await invoke_json(service, {"prompt": "x", "fail": True})
        assert caught.value.status == 500
        assert caught.value.message.startswith("predict_fn raised ValueError: the payload asked to fail")
        assert await invoke_json(service, {"prompt": "again"}) is not None
        assert service.ready

    serve(make_model(tmp_path, FOUR_FUNCTIONS), scenario)


@pytest.mark.e2e
def test_transform_fn_handler_with_context(tmp_path: Path) -> None:
    inference = """
        def model_fn(model_dir, context):
            return context.system_properties["model_dir"]

        def transform_fn(model, request_body, content_type, accept, context):
            attributes = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")
            text = f"{model}|{request_body!r}|{content_type}|{accept}|{attributes}"
            return text.encode(), "text/plain"
    """
    model_dir = make_model(tmp_path, inference)

    async def scenario(service: HandlerService) -> tuple[bytes, str]:
        return await service.invoke(b"\x01\x02", "application/octet-stream", "*/*", "trace=7")

    body, content_type = serve(model_dir, scenario)
    assert content_type == "text/plain"
    # */* reaches the handler as the default accept, as in the toolkit.
    assert body == f"{model_dir}|b'\\x01\\x02'|application/octet-stream|application/json|trace=7".encode()


@pytest.mark.e2e
def test_defaults_only_handler_decodes_predicts_and_encodes(tmp_path: Path) -> None:
    inference = """
        def model_fn(model_dir):
            return lambda data: data * 10
    """

    async def scenario(service: HandlerService) -> list[tuple[bytes, str]]:
        return [
            await service.invoke(b"[1, 2]", "application/json", "*/*"),
            await service.invoke(b"1,2\n3,4", "text/csv", "text/csv"),
        ]

    assert serve(make_model(tmp_path, inference), scenario) == [
        (b"[10, 20]", "application/json"), (b"10,20\n30,40\n", "text/csv"),
    ]


@pytest.mark.e2e
def test_unsupported_types_are_415_and_406(tmp_path: Path) -> None:
    inference = """
        def model_fn(model_dir):
            return lambda data: data
    """

    async def scenario(service: HandlerService) -> None:
        with pytest.raises(HandlerError) as content_type:
            await service.invoke(b"hello", "text/plain", "*/*")
        assert content_type.value.status == 415
        assert "application/json, text/csv, application/x-npy" in content_type.value.message
        with pytest.raises(HandlerError) as accept:
            await service.invoke(b"[1]", "application/json", "image/png")
        assert accept.value.status == 406
        assert "image/png" in accept.value.message

    serve(make_model(tmp_path, inference), scenario)


@pytest.mark.e2e
def test_context_taking_pipeline(tmp_path: Path) -> None:
    inference = """
        import json

        def model_fn(model_dir, context=None):
            return {"gpu": context.system_properties["gpu_id"]}

        def input_fn(body, content_type, context):
            return {"body": json.loads(body), "request_id": context.get_request_id(0)}

        def predict_fn(data, model, context):
            return {**data, **model, "attributes": context.custom_attributes}

        def output_fn(prediction, accept, context):
            accept_header = context.request_processor[0].get_request_properties().get("accept")
            return json.dumps({**prediction, "accept": accept_header})
    """

    async def scenario(service: HandlerService) -> object:
        return await invoke_json(service, [1], attributes="user=ana")

    answer = serve(make_model(tmp_path, inference), scenario)
    assert isinstance(answer, dict)
    assert len(answer.pop("request_id")) == 32
    assert answer == {"body": [1], "gpu": None, "attributes": "user=ana", "accept": "application/json"}


@pytest.mark.e2e
def test_a_failing_model_fn_fails_start_with_its_exception(tmp_path: Path) -> None:
    inference = """
        def model_fn(model_dir):
            raise FileNotFoundError("no .gguf in " + model_dir)
    """
    service = HandlerService(make_model(tmp_path, inference))
    with pytest.raises(HandlerError) as caught:
        asyncio.run(service.start())
    assert "model_fn raised FileNotFoundError: no .gguf in" in caught.value.message
    assert not service.ready


@pytest.mark.e2e
def test_a_missing_import_says_to_add_it_to_requirements(tmp_path: Path) -> None:
    service = HandlerService(make_model(tmp_path, "import pier_no_such_module\n"))
    with pytest.raises(HandlerError) as caught:
        asyncio.run(service.start())
    assert "No module named 'pier_no_such_module'" in caught.value.message
    assert "add pier_no_such_module to code/requirements.txt" in caught.value.message



# --- requirements.txt -----------------------------------------------------------------------------


def write_wheel(folder: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel: installs offline, without a build backend."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": source,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


WHEEL = "pier_handler_test_pkg-1.0-py3-none-any.whl"
USES_PACKAGE = """
    import pier_handler_test_pkg

    def model_fn(model_dir):
        return pier_handler_test_pkg.VALUE

    def predict_fn(data, model):
        return {"value": model, "from": pier_handler_test_pkg.__file__}
"""


@pytest.mark.e2e
def test_requirements_install_in_isolation_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # nothing may come from the network
    # numpy is already in pier's environment: pip leaves it there, as in a SageMaker container.
    model_dir = make_model(tmp_path, USES_PACKAGE, requirements=f"numpy\n./{WHEEL}\n")
    write_wheel(model_dir / "code", "pier_handler_test_pkg", "1.0", "VALUE = 42\n")
    env_dir = tmp_path / "env"

    async def scenario(service: HandlerService) -> object:
        return await invoke_json(service, [])

    answer = serve(model_dir, scenario, cache_dir=env_dir)
    assert isinstance(answer, dict) and answer["value"] == 42
    assert answer["from"].startswith(str(env_dir))
    assert not list(env_dir.glob("lib/python*/site-packages/numpy"))
    with pytest.raises(ModuleNotFoundError):
        __import__("pier_handler_test_pkg")  # pier's own environment is untouched

    (env_dir / "kept").write_text("an unchanged requirements.txt must not reinstall")
    serve(model_dir, scenario, cache_dir=env_dir)
    assert (env_dir / "kept").exists()

    (model_dir / "code" / "requirements.txt").write_text(f"# changed\n./{WHEEL}\n")
    serve(model_dir, scenario, cache_dir=env_dir)
    assert not (env_dir / "kept").exists()


@pytest.mark.e2e
def test_requirements_that_cannot_install_fail_start_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             ) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip gives up at once instead of searching an index
    model_dir = make_model(tmp_path, USES_PACKAGE, requirements="numpy\npier-no-such-package==9.9\n")
    service = HandlerService(model_dir, cache_dir=tmp_path / "env")
    started = time.monotonic()
    with pytest.raises(HandlerError) as caught:
        asyncio.run(service.start())
    message = caught.value.message
    assert "requirements.txt failed at pier-no-such-package==9.9" in message
    assert "No matching distribution found for pier-no-such-package==9.9" in message
    assert time.monotonic() - started < 60
    assert not service.ready


# --- workers --------------------------------------------------------------------------------------

SLEEPY = """
    import json
    import os
    import time

    def model_fn(model_dir):
        return None

    def predict_fn(data, model):
        time.sleep(data.get("sleep", 0))
        return {"pid": os.getpid(), "workers": os.environ["SAGEMAKER_MODEL_SERVER_WORKERS"]}
"""


@pytest.mark.e2e
def test_two_workers_serve_concurrently(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> tuple[list[object], float]:
        started = time.monotonic()
        answers = await asyncio.gather(*(invoke_json(service, {"sleep": 1.0}) for _ in range(2)))
        return answers, time.monotonic() - started

    answers, elapsed = serve(make_model(tmp_path, SLEEPY), scenario, workers=2)
    assert elapsed < 1.9, "the two requests ran one after the other"
    assert {a["pid"] for a in answers} == {answers[0]["pid"], answers[1]["pid"]}  # type: ignore[index]
    assert answers[0]["pid"] != answers[1]["pid"]  # type: ignore[index]
    assert answers[0]["workers"] == "2"  # type: ignore[index]


@pytest.mark.e2e
def test_a_worker_killed_mid_request_is_replaced(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> None:
        first = await invoke_json(service, {})
        victim = first["pid"]  # type: ignore[index]
        pending = asyncio.ensure_future(invoke_json(service, {"sleep": 5}))
        await asyncio.sleep(0.5)
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(HandlerError) as caught:
            await pending
        assert caught.value.status == 500
        assert "was killed by SIGKILL" in caught.value.message
        # The next request waits for the replacement instead of failing.
        after = await invoke_json(service, {})
        assert after["pid"] != victim  # type: ignore[index]
        assert service.ready

    serve(make_model(tmp_path, SLEEPY), scenario, timeout_s=30)


@pytest.mark.e2e
def test_a_worker_that_dies_idle_is_replaced_before_the_next_request(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> None:
        victim = (await invoke_json(service, {}))["pid"]  # type: ignore[index]
        os.kill(victim, signal.SIGKILL)
        while service.ready:  # until the server has seen it die (a new worker takes ~0.3 s to load)
            await asyncio.sleep(0.01)
        assert (await invoke_json(service, {}))["pid"] != victim  # type: ignore[index]
        assert service.ready

    serve(make_model(tmp_path, SLEEPY), scenario)


@pytest.mark.e2e
def test_a_hung_handler_times_out_and_its_worker_is_replaced(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> None:
        hung = (await invoke_json(service, {}))["pid"]  # type: ignore[index]
        started = time.monotonic()
        with pytest.raises(HandlerError) as caught:
            await invoke_json(service, {"sleep": 60})
        assert time.monotonic() - started < 3
        assert caught.value.status == 504
        assert "did not answer within 1 s (SAGEMAKER_MODEL_SERVER_TIMEOUT)" in caught.value.message
        assert (await invoke_json(service, {}))["pid"] != hung  # type: ignore[index]

    serve(make_model(tmp_path, SLEEPY), scenario, timeout_s=1)


@pytest.mark.e2e
def test_a_caller_that_goes_away_does_not_break_the_worker(tmp_path: Path) -> None:
    async def scenario(service: HandlerService) -> object:
        abandoned = asyncio.ensure_future(invoke_json(service, {"sleep": 0.5}))
        await asyncio.sleep(0.1)
        abandoned.cancel()
        return await invoke_json(service, {})

    assert serve(make_model(tmp_path, SLEEPY), scenario) is not None


@pytest.mark.e2e
def test_stop_lets_the_request_in_flight_finish(tmp_path: Path) -> None:
    async def main() -> None:
        service = HandlerService(make_model(tmp_path, SLEEPY))
        await service.start()
        in_flight = asyncio.ensure_future(invoke_json(service, {"sleep": 0.5}))
        await asyncio.sleep(0.1)
        await service.stop()
        assert in_flight.done() and in_flight.result() is not None
        assert not service.ready
        with pytest.raises(HandlerError) as caught:
            await invoke_json(service, {})
        assert caught.value.status == 503

    asyncio.run(main())


@pytest.mark.e2e
def test_invoke_before_start_is_503(tmp_path: Path) -> None:
    service = HandlerService(make_model(tmp_path, SLEEPY))
    with pytest.raises(HandlerError) as caught:
        asyncio.run(service.invoke(b"{}", "application/json", "*/*"))
    assert caught.value.status == 503


# --- finding the handler --------------------------------------------------------------------------


def test_a_folder_without_code_has_no_handler(tmp_path: Path) -> None:
    service = HandlerService(tmp_path)
    with pytest.raises(HandlerError, match=r"has no code/inference\.py"):
        asyncio.run(service.start())


