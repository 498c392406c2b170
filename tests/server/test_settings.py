"""Settings from the SageMaker / TGI container environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.engine.offload import GpuSettings
from pier.env import SettingsError
from pier.server.settings import ServerSettings


def test_defaults_are_sagemakers() -> None:
    settings = ServerSettings.from_env({})
    assert settings.port == 8080 and settings.model == "/opt/ml/model"
    assert settings.max_concurrent_requests == 128 and settings.timeout_s == 60.0
    assert settings.context_size == 4096
    assert 57 < settings.request_deadline_s < 60


def test_container_environment(tmp_path: Path) -> None:
    env = {
        "SAGEMAKER_BIND_TO_PORT": "9000",
        "HF_MODEL_ID": str(tmp_path),
        "MAX_INPUT_LENGTH": '"1024"',
        "MAX_TOTAL_TOKENS": "2048",
        "MAX_BATCH_TOTAL_TOKENS": "8192",
        "MAX_CONCURRENT_REQUESTS": "4",
        "MESSAGES_API_ENABLED": "true",
        "PIER_THREADS": "2",
        "PIER_PARALLEL": "3",
        "PIER_PREFIX_CACHE_FLOOR_CELLS": "0",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "30",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "2",
    }
    settings = ServerSettings.from_env(env)
    assert settings.port == 9000 and settings.model == str(tmp_path) and settings.model_name == str(tmp_path)
    assert (settings.max_input_tokens, settings.max_total_tokens, settings.context_size) == (1024, 2048, 8192)
    assert settings.max_concurrent_requests == 4 and settings.threads == 2 and settings.parallel == 3
    assert settings.timeout_s == 30 and settings.workers == 2 and settings.prefix_floor_cells == 0


def test_a_hub_id_is_only_a_name() -> None:
    settings = ServerSettings.from_env({"HF_MODEL_ID": "meta-llama/Llama-3-8B", "SM_MODEL_DIR": "/models/x"})
    assert settings.model == "/models/x" and settings.model_name == "meta-llama/Llama-3-8B"


def test_arguments_win_over_the_environment() -> None:
    settings = ServerSettings.from_env({"SAGEMAKER_BIND_TO_PORT": "9000"}, port=7000, threads=None)
    assert settings.port == 7000 and settings.threads is None


def test_context_follows_max_total_tokens_when_larger() -> None:
    assert ServerSettings.from_env({"MAX_TOTAL_TOKENS": "16384"}).context_size == 16384


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"MAX_TOTAL_TOKENS": "lots"}, "MAX_TOTAL_TOKENS must be an integer; got 'lots'"),
        ({"SAGEMAKER_BIND_TO_PORT": "70000"}, "between 1 and 65535"),
        ({"MAX_CONCURRENT_REQUESTS": "0"}, "at least 1"),
        ({"MESSAGES_API_ENABLED": "maybe"}, "true or false"),
        ({"SAGEMAKER_MODEL_SERVER_TIMEOUT": "soon"}, "number of seconds"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        ServerSettings.from_env(env)


@pytest.mark.parametrize(
    ("env", "mb"), [({}, 8192), ({"PIER_HOST_CACHE_MB": "512"}, 512), ({"PIER_HOST_CACHE_MB": "0"}, 0)]
)
def test_host_memory_for_evicted_prefixes_defaults_to_llama_servers_cache_ram(env: dict[str, str], mb: int) -> None:
    assert ServerSettings.from_env(env).host_cache_mb == mb


@pytest.mark.parametrize(("value", "expected"), [(None, None), ("auto", None), ("off", False), ("true", True)])
def test_flash_attention_is_llama_cpps_choice_unless_set(value: str | None, expected: bool | None) -> None:
    env = {} if value is None else {"PIER_FLASH_ATTENTION": value}
    assert ServerSettings.from_env(env).flash_attention is expected


@pytest.mark.parametrize(("env", "expected"), [({}, True), ({"PIER_SEPARATE_DECODE_ROWS": "false"}, False)])
def test_decode_rows_go_in_passes_of_their_own_unless_turned_off(env: dict[str, str], expected: bool) -> None:
    assert ServerSettings.from_env(env).separate_decode_rows is expected


@pytest.mark.parametrize(("value", "expected"), [(None, 2.0), ("3", 3.0), ("1.5", 1.5), ("off", None), ("None", None)])
def test_the_itl_bound_is_two_decode_steps_unless_set(value: str | None, expected: float | None) -> None:
    env = {} if value is None else {"PIER_ITL_BOUND": value}
    assert ServerSettings.from_env(env).itl_bound == expected


@pytest.mark.parametrize("value", ["0.5", "fast", ""])
def test_a_bad_itl_bound_says_what_it_takes(value: str) -> None:
    if not value:  # blank counts as unset
        assert ServerSettings.from_env({"PIER_ITL_BOUND": value}).itl_bound == 2.0
        return
    with pytest.raises(SettingsError, match="PIER_ITL_BOUND must be a number of decode-only steps"):
        ServerSettings.from_env({"PIER_ITL_BOUND": value})


@pytest.mark.parametrize(("value", "expected"), [(None, 0), ("0", 0), ("4", 4), ("16", 16)])
def test_speculation_is_tgis_speculate_and_off_unless_set(value: str | None, expected: int) -> None:
    assert ServerSettings.from_env({} if value is None else {"SPECULATE": value}).speculate == expected


@pytest.mark.parametrize("value", ["-1", "17", "many"])
def test_a_bad_speculate_says_what_it_takes(value: str) -> None:
    with pytest.raises(SettingsError, match="SPECULATE"):
        ServerSettings.from_env({"SPECULATE": value})


@pytest.mark.parametrize(
    ("env", "kv_type", "mb"),
    [({}, "f16", None), ({"PIER_KV_CACHE_TYPE": "Q8_0", "PIER_KV_CACHE_MB": "512"}, "q8_0", 512),
     ({"PIER_KV_CACHE_TYPE": "q4_0"}, "q4_0", None)],
)
def test_kv_cache_type_and_memory(env: dict[str, str], kv_type: str, mb: int | None) -> None:
    settings = ServerSettings.from_env(env)
    assert (settings.kv_cache_type, settings.kv_cache_mb) == (kv_type, mb)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"PIER_KV_CACHE_TYPE": "q5_1"}, "PIER_KV_CACHE_TYPE must be one of f32, f16, q8_0, q4_0; got 'q5_1'"),
        ({"PIER_KV_CACHE_MB": "512", "MAX_BATCH_TOTAL_TOKENS": "4096"}, "set only one"),
    ],
)
def test_bad_kv_cache_settings_say_how_to_fix_them(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError) as caught:
        ServerSettings.from_env(env)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, GpuSettings()),
    ({"PIER_GPUS": "0", "SM_NUM_GPUS": "4"}, GpuSettings(gpus=0)),  # what the gateway gave wins over TGI's name
    ({"SM_NUM_GPUS": "4"}, GpuSettings(gpus=4)),
    ({"NUM_SHARD": "2"}, GpuSettings(gpus=2)),
    ({"LLAMA_ARG_N_GPU_LAYERS": "20"}, GpuSettings(gpu_layers=20)),
    ({"PIER_GPU_LAYERS": "all"}, GpuSettings()),
    ({"N_GPU_LAYERS": "-1"}, GpuSettings()),
    ({"PIER_SPLIT_MODE": "ROW", "PIER_MAIN_GPU": "1", "PIER_TENSOR_SPLIT": "3,1"},
     GpuSettings(split_mode="row", main_gpu=1, tensor_split=(3.0, 1.0))),
    ({"LLAMA_ARG_TENSOR_SPLIT": "1/1"}, GpuSettings(tensor_split=(1.0, 1.0))),
])
def test_gpu_settings_take_the_ecosystems_names(env: dict[str, str], expected: GpuSettings) -> None:
    assert ServerSettings.from_env(env).gpu == expected


@pytest.mark.parametrize(("env", "fragment"), [
    ({"PIER_GPUS": "two"}, "PIER_GPUS must be an integer"),
    ({"PIER_GPU_LAYERS": "-3"}, "PIER_GPU_LAYERS must be at least 0"),
    ({"PIER_SPLIT_MODE": "tensor"}, "PIER_SPLIT_MODE must be one of none, layer, row"),
    ({"PIER_TENSOR_SPLIT": "3,x"}, "one per GPU"),
    ({"PIER_TENSOR_SPLIT": "0,0"}, "positive sum"),
])
def test_bad_gpu_settings_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        ServerSettings.from_env(env)


@pytest.mark.parametrize(("env", "from_gateway"), [({}, False), ({"PIER_COPY_SECRET": "s"}, True),
                                                   ({"PIER_COPY_SECRET": " "}, False)])
def test_a_copy_knows_at_start_whether_its_gateway_started_it(env: dict[str, str], from_gateway: bool) -> None:
    assert ServerSettings.from_env(env).from_gateway is from_gateway
