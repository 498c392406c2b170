"""`pier bench`: load-test any LLM server (pier's SageMaker, TGI and OpenAI routes, llama-server, vLLM, ...)."""

from pier.bench.bench_run import run_bench
from pier.bench.options import Api, BenchError, BenchOptions, PromptFormat, WorkloadKind
from pier.bench.result import BenchResult

__all__ = ["Api", "BenchError", "BenchOptions", "BenchResult", "PromptFormat", "WorkloadKind", "run_bench"]
