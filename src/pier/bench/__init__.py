"""`pier bench`: load-test any LLM server (pier's SageMaker, TGI and OpenAI routes, llama-server, vLLM, ...)."""

from pier.bench.options import Api, BenchError, BenchOptions, PromptFormat, WorkloadKind
from pier.bench.result import BenchResult
from pier.bench.runner import run_bench

__all__ = ["Api", "BenchError", "BenchOptions", "BenchResult", "PromptFormat", "WorkloadKind", "run_bench"]
