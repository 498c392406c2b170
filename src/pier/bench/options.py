"""What `pier bench` is asked to do: one validated, immutable description of the whole benchmark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pier.errors import PierError

DEFAULT_INPUT_LEN = 64  # the prompt and output lengths of the fair peer comparison in design/performance.md
DEFAULT_OUTPUT_LEN = 32
DEFAULT_REQUESTS = 32  # per run, when neither a request count nor a duration is given
DEFAULT_TURNS = 4
DEFAULT_WARMUP = 2
DEFAULT_TIMEOUT_S = 60.0  # boto3's read timeout: a request slower than this fails for SageMaker clients too
REPEATS_WHEN_COMPARING = 2  # A/B/A/B: the least that shows whether a difference outlives the noise

Number = TypeVar("Number", int, float)


class BenchError(PierError):
    """The benchmark cannot run as asked; the message says what to change."""

    code = "bench_error"


class Api(StrEnum):
    OPENAI_COMPLETIONS = "openai-completions"
    OPENAI_CHAT = "openai-chat"
    TGI = "tgi"
    SAGEMAKER = "sagemaker"


class WorkloadKind(StrEnum):
    RANDOM = "random"
    SHARED_PREFIX = "shared-prefix"
    MULTI_TURN = "multi-turn"


class PromptFormat(StrEnum):
    AUTO = "auto"
    IDS = "ids"
    TEXT = "text"


Segment = tuple[float, float]  # (requests per second, seconds)


@dataclass(frozen=True)
class Level:
    """One load level: a closed-loop concurrency (users), an open-loop Poisson rate (requests/s), or a rate
    schedule (Poisson segments one after another; `value` is its length in seconds)."""

    mode: Literal["concurrency", "rate", "schedule"]
    value: float
    schedule: tuple[Segment, ...] = ()

    @property
    def label(self) -> str:
        if self.mode == "schedule":
            return "schedule " + ",".join(f"{rate:g}:{seconds:g}" for rate, seconds in self.schedule)
        return f"c={self.value:g}" if self.mode == "concurrency" else f"{self.value:g} req/s"


class BenchOptions(BaseModel):
    """Everything one `pier bench` invocation needs. Times are seconds, SLOs milliseconds (as vLLM's --goodput)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    api: Api | None = None
    model: str | None = None
    compare: str | None = None
    gateway: str | None = None
    api_key: str | None = None
    inference_component: str | None = None  # SageMaker routes: the component of an endpoint that hosts several
    ca_bundle: Path | None = None  # https:// targets: the CAs to trust (else AWS_CA_BUNDLE, SSL_CERT_FILE, ...)

    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    rate_schedule: tuple[Segment, ...] = ()
    requests: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    warmup: int = Field(default=DEFAULT_WARMUP, ge=0)
    repeats: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    seed: int = 0

    workload: WorkloadKind = WorkloadKind.RANDOM
    input_len: int = Field(default=DEFAULT_INPUT_LEN, ge=1)
    input_len_stddev: float = Field(default=0.0, ge=0)
    output_len: int = Field(default=DEFAULT_OUTPUT_LEN, ge=1)
    output_len_stddev: float = Field(default=0.0, ge=0)
    shared_prefix: int = Field(default=0, ge=0)
    turns: int = Field(default=DEFAULT_TURNS, ge=1)
    prompt_format: PromptFormat = PromptFormat.AUTO
    vocab: Path | None = None
    payload: Api = Api.OPENAI_CHAT
    temperature: float = Field(default=0.0, ge=0)

    slo_ttft_ms: float | None = Field(default=None, gt=0)
    slo_tpot_ms: float | None = Field(default=None, gt=0)
    slo_e2el_ms: float | None = Field(default=None, gt=0)

    price_per_hour: float | None = Field(default=None, gt=0)
    instance_type: str | None = None
    instance_count: int = Field(default=1, ge=1)

    out: Path | None = None
    progress: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> BenchOptions:
        for problem in self._problems():
            raise BenchError(problem)
        return self

    def _problems(self) -> list[str]:
        problems = []
        if any(c < 1 for c in self.concurrency):
            problems.append(f"--concurrency levels must be 1 or more; got {list(self.concurrency)}.")
        if any(rate < 0 or seconds <= 0 for rate, seconds in self.rate_schedule):
            problems.append("--rate-schedule segments are RATE:SECONDS, such as 1:60,8:120,1:120 (seconds above 0; "
                            "rate 0 is a pause).")
        if any(r <= 0 for r in self.rates):
            problems.append(f"--rate values must be positive requests per second; got {list(self.rates)}.")
        if self.workload is WorkloadKind.SHARED_PREFIX and self.shared_prefix == 0:
            problems.append("--workload shared-prefix needs the prefix length: add --shared-prefix N (tokens).")
        if self.inference_component is not None and not self.inference_component.strip():
            problems.append("--inference-component names a component of the endpoint; it was empty.")
        if self.payload is Api.SAGEMAKER:
            problems.append(
                "--payload is the body sent through a SageMaker route: openai-completions, openai-chat or tgi."
            )
        if self.prompt_format is PromptFormat.IDS and self.workload is WorkloadKind.MULTI_TURN:
            problems.append(
                "Token-id prompts cannot carry a conversation (replies stream back as text): "
                "use --prompt-format text with --workload multi-turn."
            )
        return problems

    @property
    def levels(self) -> list[Level]:
        """Every run's load: closed-loop concurrencies first, then open-loop rates (concurrency 1 by default)."""
        closed = self.concurrency or (() if self.rates or self.rate_schedule else (1,))
        levels = [Level("concurrency", float(c)) for c in closed] + [Level("rate", r) for r in self.rates]
        if self.rate_schedule:
            levels.append(Level("schedule", sum(s for _, s in self.rate_schedule), self.rate_schedule))
        return levels

    @property
    def request_limit(self) -> int | None:
        if self.requests is None and self.duration_s is None:
            return DEFAULT_REQUESTS
        return self.requests

    @property
    def repeat_count(self) -> int:
        if self.repeats is not None:
            return self.repeats
        return REPEATS_WHEN_COMPARING if self.compare else 1


def parse_numbers(text: str, kind: Callable[[str], Number], flag: str) -> tuple[Number, ...]:
    """A comma-separated list from the command line, such as `--concurrency 1,2,4` or `--rate 0.5,1,2`."""
    try:
        return tuple(kind(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise BenchError(f"{flag} takes comma-separated numbers such as 1,2,4; got {text!r}.") from None


def parse_schedule(text: str) -> tuple[Segment, ...]:
    """`--rate-schedule 1:60,8:120,1:120`: Poisson rate (req/s) and seconds, segment after segment."""
    segments = []
    for part in text.replace(" ", "").split(","):
        rate, _, seconds = part.partition(":")
        try:
            segments.append((float(rate), float(seconds)))
        except ValueError:
            raise BenchError(f"--rate-schedule takes RATE:SECONDS segments such as 1:60,8:120,1:120; got {part!r}."
                             ) from None
    return tuple(segments)
