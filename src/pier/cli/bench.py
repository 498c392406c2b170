"""`pier bench`: load a server and measure it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.app import app, console

Opt = typer.Option


@app.command("bench")
def bench(
    target: Annotated[str, typer.Argument(help="A URL (any OpenAI-compatible server, a TGI or SageMaker route) "
                                               "or a pier endpoint name.")],
    concurrency: Annotated[str | None, Opt(help="Closed-loop users, a list: 1,2,4,8.")] = None,
    rate: Annotated[str | None, Opt(help="Open-loop Poisson request rates (req/s), a list: 0.5,1,2.")] = None,
    rate_schedule: Annotated[str | None, Opt(help="Load that changes over time: RATE:SECONDS Poisson segments, "
                                                  "such as 1:60,8:120,1:120; plots copies over time on a pier "
                                                  "gateway.")] = None,
    requests: Annotated[int | None, Opt(help="Requests per load level (default 32).")] = None,
    duration: Annotated[float | None, Opt(help="Seconds per load level (whichever of this and --requests "
                                               "comes first).")] = None,
    input_len: Annotated[int, Opt(min=1, help="Prompt tokens.")] = 64,
    output_len: Annotated[int, Opt(min=1, help="Output tokens (sent with ignore_eos).")] = 32,
    input_len_stddev: Annotated[float, Opt(min=0, help="Draw prompt lengths from a normal distribution.")] = 0.0,
    output_len_stddev: Annotated[float, Opt(min=0, help="Draw output lengths from a normal distribution.")] = 0.0,
    workload: Annotated[str, Opt(help="random, shared-prefix or multi-turn.")] = "random",
    shared_prefix: Annotated[int, Opt(min=0, help="Tokens of system prompt shared by all users.")] = 0,
    turns: Annotated[int, Opt(min=1, help="Turns per conversation (multi-turn).")] = 4,
    api: Annotated[str | None, Opt(help="openai-completions, openai-chat, tgi or sagemaker (default: from "
                                        "the URL).")] = None,
    payload: Annotated[str, Opt(help="Body sent through a SageMaker route: openai-chat, openai-completions, "
                                     "tgi.")] = "openai-chat",
    model: Annotated[str | None, Opt(help="Model name to send (default: the first of /v1/models).")] = None,
    compare: Annotated[str | None, Opt(help="A second server: same workload, runs interleaved, ratios.")] = None,
    repeats: Annotated[int | None, Opt(min=1, help="Runs per level (default 1, 2 with --compare).")] = None,
    warmup: Annotated[int, Opt(min=0, help="Warm-up requests before each run.")] = 2,
    timeout: Annotated[float, Opt(help="Seconds before a request counts as failed.")] = 60.0,
    seed: Annotated[int, Opt(help="Seed for prompts and lengths.")] = 0,
    prompt_format: Annotated[str, Opt(help="auto, ids (token ids) or text.")] = "auto",
    vocab: Annotated[Path | None, Opt(help="The model's GGUF, to build exact token-id prompts.")] = None,
    temperature: Annotated[float, Opt(min=0)] = 0.0,
    slo_ttft: Annotated[float | None, Opt(help="Goodput objective: TTFT in ms.")] = None,
    slo_tpot: Annotated[float | None, Opt(help="Goodput objective: TPOT in ms.")] = None,
    slo_e2el: Annotated[float | None, Opt(help="Goodput objective: end-to-end latency in ms.")] = None,
    price_per_hour: Annotated[float | None, Opt(help="Instance price, for cost per million tokens.")] = None,
    instance_type: Annotated[str | None, Opt(help="A SageMaker instance type, priced from pier's table.")] = None,
    instance_count: Annotated[int, Opt(min=1)] = 1,
    gateway: Annotated[str | None, Opt(help="Gateway URL for endpoint names (default: PIER_GATEWAY_URL, "
                                            "PIER_URL or AWS_ENDPOINT_URL).")] = None,
    api_key: Annotated[str | None, Opt(envvar="OPENAI_API_KEY", help="Bearer token, never written out.")] = None,
    inference_component: Annotated[str | None, Opt(help="SageMaker routes: the inference component to invoke "
                                                        "(InferenceComponentName).")] = None,
    ca_bundle: Annotated[Path | None, Opt(help="https:// targets: PEM file of the CA(s) to trust (default: "
                                                "AWS_CA_BUNDLE, REQUESTS_CA_BUNDLE or SSL_CERT_FILE, else the "
                                                "public CAs).")] = None,
    out: Annotated[Path | None, Opt(help="Write summary.json, requests.json and PNG plots here.")] = None,
    progress: Annotated[bool, Opt(help="Live progress display.")] = True,
) -> None:
    """Measure a server under load: TTFT, TPOT, ITL, latency, throughput, goodput, cost; JSON and plots."""
    from pydantic import ValidationError

    from pier.bench import BenchError, BenchOptions, run_bench
    from pier.bench.options import parse_numbers, parse_schedule

    try:
        # Validated (choices included) by the model, whose errors name the option at fault.
        options = BenchOptions.model_validate(dict(
            target=target, api=api, model=model, compare=compare, gateway=gateway, api_key=api_key,
            inference_component=inference_component, ca_bundle=ca_bundle,
            concurrency=parse_numbers(concurrency, int, "--concurrency") if concurrency else (),
            rates=parse_numbers(rate, float, "--rate") if rate else (),
            rate_schedule=parse_schedule(rate_schedule) if rate_schedule else (),
            requests=requests, duration_s=duration,
            warmup=warmup, repeats=repeats, timeout_s=timeout, seed=seed, workload=workload, input_len=input_len,
            input_len_stddev=input_len_stddev, output_len=output_len, output_len_stddev=output_len_stddev,
            shared_prefix=shared_prefix, turns=turns, prompt_format=prompt_format, vocab=vocab, payload=payload,
            temperature=temperature, slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot, slo_e2el_ms=slo_e2el,
            price_per_hour=price_per_hour, instance_type=instance_type, instance_count=instance_count, out=out,
            progress=progress,
        ))
        result = run_bench(options)
    except BenchError as error:
        console.print(f"[red]error:[/] {error.message}")
        raise typer.Exit(2) from None
    except ValidationError as error:
        for problem in error.errors():
            console.print(f"[red]error:[/] {'.'.join(map(str, problem['loc']))}: {problem['msg']}")
        raise typer.Exit(2) from None
    raise typer.Exit(0 if result.ok else 1)
