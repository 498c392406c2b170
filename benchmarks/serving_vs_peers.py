"""pier's model server against its peers on this machine, all driven by one client (pier bench's `run_bench`).

    python benchmarks/serving_vs_peers.py                                   # everything: ~20 min on 2 cores
    python benchmarks/serving_vs_peers.py --repeats 5 --out report.md       # more repeats, report also to a file
    python benchmarks/serving_vs_peers.py --only baseline,prefix            # some comparisons only

llama-server comes from --peers-dir or $PIER_PEERS_DIR (a folder of llama.cpp's programs, built from the sources
llama-cpp-python ships); only the baseline, prefix and wide comparisons need it.

Every server runs on loopback with 2 threads, 4096 KV cells in one unified cache and 8 parallel sequences
(the wide comparison: 8192 cells and 64 parallel sequences):
  pier            python -m pier.server.container --model M --threads 2 --parallel 8, MAX_BATCH_TOTAL_TOKENS=4096
                  (PIER_PREFIX_CACHE=false where the peer caches nothing)
  llama-server    -m M -t 2 -tb 2 -c 4096 -np 8 --kv-unified (+ --no-cache-prompt --cache-ram 0 where cache-less)
  llama_cpp.server  python -m llama_cpp.server --model M --n_threads 2 --n_ctx 4096 --interrupt_requests False
                  (serves one request at a time; without the flag a waiting request cuts the running stream short)
  gateway         python -m pier.gateway, one endpoint of one copy (as pier, prefix cache off)

Comparisons (`--only` names), each A/B/A/B: per load level, repeat 1 of every server, then repeat 2, ...; the
servers of a comparison are all up, idle while another is measured, and stopped before the next comparison:
  baseline   64-token prompts, 32 output tokens, c = 1, 4, 8, 16: pier (cache off; and on) vs llama-server (off)
  prefix     512 shared tokens + 64-token user part, 32 output, c = 8: both with their caches on
  wide       the baseline's prompts at c = 64 on servers of 64 parallel sequences and 8192 cells: pier (cache off;
             and with PIER_SEPARATE_DECODE_ROWS=false) vs llama-server (off)
  llamacpp   c = 4, pier (cache off) vs llama_cpp.server; text prompts of single-token words (it takes no ids)
  gateway    c = 4, through the gateway's /v1/completions (model = endpoint) vs straight at the copy's URL
  omp        pier alone, OMP_WAIT_POLICY unset (OpenMP spins, then sleeps) vs passive, c = 1 and 8

Each run: OpenAI completions API, streaming, token-id prompts drawn from the model's vocabulary (--vocab),
ignore_eos, temperature 0, fixed lengths, the same prompts for every server of a repeat; one discarded warm-up run
per server first. The report gives medians over repeats with the min-max spread, and pier/peer ratios both of
the medians and per repeat (paired: the machine is noisy, so only ratios measured side by side mean much).

The modules beside this script: peers.py starts and stops the servers, measure.py runs pier bench against them,
report.py writes the tables; this script sets up each comparison and runs them in turn.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import add_peers_dir, bench_model, log, parse_comparisons, peer, raise_on_sigterm
from measure import Arm, Measurer, Runs, Shape
from peers import CONTEXT, ENDPOINT, PREFIX_CONTEXT, Catalog, Fleet, completions, deploy_endpoint, running
from report import TOKS, TTFT, Check, Section, paired, ratio, render_report

SECTIONS = ("baseline", "prefix", "wide", "llamacpp", "gateway", "omp")
NEED_LLAMA_SERVER = ("baseline", "prefix", "wide")
WIDE = 64  # parallel sequences in the wide comparison: a decode step of 64 rows or more is tiled by llama.cpp


def baseline(catalog: Catalog, fleet: Fleet, measurer: Measurer, levels: list[int]) -> Section:
    off, on = catalog.pier("pier (cache off)", cache=False), catalog.pier("pier (cache on)", cache=True)
    llama = catalog.llama("llama-server (cache off)", cache=False)
    shape = Shape()
    with running(fleet, [off, on, llama]):
        arms = [Arm(s.label, completions(s)) for s in (off, on, llama)]
        runs = measurer.interleaved(arms, shape, levels)
    section = Section(
        "Random prompts: pier vs llama-server, no prompt caching",
        "Fair to a cache-less baseline: pier's prefix cache off (and, for reference, on: random "
        "prompts share nothing, so it can only cost).",
        [s.shown() for s in (off, on, llama)],
        arms,
        levels,
        shape,
        runs,
        [(off.label, llama.label), (on.label, llama.label)],
    )
    for c in (c for c in (1, 4, 8) if c in levels):
        toks, ttft = ratio(runs, off.label, llama.label, c, TOKS), ratio(runs, off.label, llama.label, c, TTFT)
        section.checks += [
            Check(f"c={c}: output tok/s ≥ 1.0x llama-server", f"{toks:.2f}x", toks >= 1.0),
            Check(f"c={c}: TTFT p50 no worse than llama-server", f"{ttft:.2f}x its TTFT", ttft <= 1.0),
        ]
    return section


def prefix(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    pier_ = catalog.pier("pier (cache on)", cache=True, ctx=PREFIX_CONTEXT)
    llama = catalog.llama("llama-server (cache on)", cache=True, ctx=PREFIX_CONTEXT)
    levels, shape = [8], Shape(shared_prefix=512)
    with running(fleet, [pier_, llama]):
        arms = [Arm(s.label, completions(s)) for s in (pier_, llama)]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, pier_.label, llama.label, 8, TOKS)
    requests = max(measurer.requests, 16)
    notes = [
        f"Both servers get {PREFIX_CONTEXT} KV cells here: llama-server holds a copy of the prefix in each slot, "
        f'and 8 x (512 + 64 + 32) = 4864 cells exceed {CONTEXT} (it fails the requests with "Context size has '
        'been exceeded"); pier holds one copy, 512 + 8 x 96 = 1280 cells.',
        f"A run is {requests} requests on a new prefix. pier computes the prefix once per run; llama-server "
        "once per slot (its first 8 requests each compute all 576 tokens; later ones in a slot reuse it), so "
        "its cost is amortized over more requests per prefix and the ratio shrinks as runs get longer.",
    ]
    return Section(
        "Shared prefix: pier's prefix cache vs llama-server's prompt cache",
        "Every request of a run starts with the same 512 tokens (a new prefix per run), then its own 64.",
        [s.shown() for s in (pier_, llama)],
        arms,
        levels,
        shape,
        runs,
        [(pier_.label, llama.label)],
        [Check("c=8: output tok/s ≥ 2x llama-server", f"{toks:.2f}x", toks >= 2.0)],
        notes,
    )


def wide(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    separate = catalog.pier("pier (cache off)", cache=False, ctx=PREFIX_CONTEXT, parallel=WIDE)
    one_pass = catalog.pier("pier, PIER_SEPARATE_DECODE_ROWS=false", cache=False, ctx=PREFIX_CONTEXT, parallel=WIDE,
                            settings=(("PIER_SEPARATE_DECODE_ROWS", "false"),))
    llama = catalog.llama("llama-server (cache off)", cache=False, ctx=PREFIX_CONTEXT, parallel=WIDE)
    levels, shape = [WIDE], Shape()
    with running(fleet, [separate, one_pass, llama]):
        arms = [Arm(s.label, completions(s)) for s in (separate, one_pass, llama)]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, separate.label, llama.label, WIDE, TOKS)
    notes = [
        f"{WIDE} parallel sequences and {PREFIX_CONTEXT} KV cells for every server ({WIDE} x 96 tokens = "
        f"{WIDE * 96} cells in use at the peak).",
        "A decode step of 64 rows or more takes llama.cpp's tiled flash attention, whose tiles of 64 rows visit "
        "every cell any of their rows sees; pier runs decode rows in passes of at most 63 (engine/passes.py). The "
        "middle server is pier with that turned off, to show what it is worth.",
    ]
    return Section(
        f"Wide: {WIDE} parallel sequences, random prompts, no prompt caching",
        "The baseline's prompts at c = 64, on servers of 64 parallel sequences.",
        [s.shown() for s in (separate, one_pass, llama)],
        arms,
        levels,
        shape,
        runs,
        [(separate.label, llama.label), (one_pass.label, llama.label)],
        [Check(f"c={WIDE}: output tok/s ≥ 1.0x llama-server", f"{toks:.2f}x", toks >= 1.0)],
        notes,
    )


def llamacpp(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    pier_, peer = catalog.pier("pier (cache off)", cache=False), catalog.llama_cpp_python("llama_cpp.server")
    levels, shape = [4], Shape(ids=False)
    with running(fleet, [pier_, peer]):
        arms = [Arm(s.label, completions(s)) for s in (pier_, peer)]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, pier_.label, peer.label, 4, TOKS)
    notes = [
        "llama_cpp.server takes no token-id prompts and has no `ignore_eos`: prompts are text of words that "
        "are one token each (checked through pier's usage; the same tokenizer), and its output tokens are "
        "counted from its stream (it sends no usage). "
        + (
            f"Every answer it gave had {shape.output_len} tokens, as asked."
            if all_full(runs, peer.label, shape)
            else f"Some of its answers ended (EOS) before {shape.output_len} tokens: its numbers are not like for like."
        )
    ]
    return Section(
        "pier vs llama-cpp-python's server",
        "One request at a time behind a lock (its design).",
        [s.shown() for s in (pier_, peer)],
        arms,
        levels,
        shape,
        runs,
        [(pier_.label, peer.label)],
        [Check("c=4: output tok/s ≥ 3x llama_cpp.server", f"{toks:.2f}x", toks >= 3.0)],
        notes,
    )


def all_full(runs: Runs, label: str, shape: Shape) -> bool:
    return all(m.output_tokens.min == shape.output_len for (arm, _), ms in runs.items() if arm == label for m in ms)


def gateway(catalog: Catalog, fleet: Fleet, measurer: Measurer, state_dir: Path) -> Section:
    gw = catalog.gateway("gateway", state_dir)
    levels, shape = [4], Shape()
    with running(fleet, [gw]):
        copy_url, copy_command = deploy_endpoint(gw, catalog.model, fleet)
        log(f"endpoint {ENDPOINT} in service; its copy at {copy_url}")
        arms = [
            Arm("through the gateway", completions(gw), model=ENDPOINT),
            Arm("the copy directly", completions(copy_url)),
        ]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, arms[0].label, arms[1].label, 4, TOKS)
    return Section(
        "Gateway overhead: one endpoint of one copy",
        f"The same copy, called through `{completions('http://GATEWAY')}` with model={ENDPOINT} or at "
        "its own URL (from `PierClient(url).copies(name)`).",
        [gw.shown(), f"# deployed by PierClient.deploy; the copy runs:\n{copy_command}"],
        arms,
        levels,
        shape,
        runs,
        [(arms[0].label, arms[1].label)],
        [Check("c=4: gateway costs ≤ 5% of throughput", f"{(1 - toks) * 100:+.1f}% ({toks:.3f}x)", toks >= 0.95)],
    )


def omp(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    spin = catalog.pier("pier, OMP_WAIT_POLICY unset", cache=False, omp=None)
    passive = catalog.pier("pier, OMP_WAIT_POLICY=passive", cache=False, omp="passive")
    levels, shape = [1, 8], Shape()
    with running(fleet, [spin, passive]):
        arms = [Arm(s.label, completions(s)) for s in (spin, passive)]
        runs = measurer.interleaved(arms, shape, levels)
    notes = [omp_finding(runs, spin.label, passive.label, c) for c in levels]
    return Section(
        "OMP_WAIT_POLICY for pier: OpenMP's default vs passive",
        "The model server runs its asyncio thread beside the engine's 2 OpenMP threads on 2 cores.",
        [s.shown() for s in (spin, passive)],
        arms,
        levels,
        shape,
        runs,
        [(passive.label, spin.label)],
        notes=notes,
    )


def omp_finding(runs: Runs, spin: str, passive: str, c: int) -> str:
    toks = ratio(runs, passive, spin, c, TOKS)
    pairs = paired(runs, passive, spin, c, TOKS)
    wins = sum(p > 1 for p in pairs)
    faster = "passive" if toks > 1 else "unset (spin)"
    return (
        f"c={c}: {faster} is faster, passive/unset output tok/s {toks:.3f}x; passive won {wins} of {len(pairs)} pairs"
    )


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    llama_server = peer("llama-server", args.peers_dir) if set(NEED_LLAMA_SERVER) & set(args.only) else None
    model = Path(args.model) if args.model else bench_model()
    catalog = Catalog(model, llama_server)
    measurer = Measurer(model, args.requests, args.repeats)
    sections: list[Section] = []
    complete = False
    with tempfile.TemporaryDirectory(prefix="pier-peers-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(logs)
        steps: dict[str, Callable[[], Section]] = {
            "baseline": lambda: baseline(catalog, fleet, measurer, args.levels),
            "prefix": lambda: prefix(catalog, fleet, measurer),
            "wide": lambda: wide(catalog, fleet, measurer),
            "llamacpp": lambda: llamacpp(catalog, fleet, measurer),
            "gateway": lambda: gateway(catalog, fleet, measurer, Path(scratch) / "gateway"),
            "omp": lambda: omp(catalog, fleet, measurer),
        }
        try:
            for name in args.only:
                log(f"--- {name}")
                begun = time.monotonic()
                sections.append(steps[name]())
                sections[-1].seconds = time.monotonic() - begun
            complete = True
        except KeyboardInterrupt:
            log("interrupted: stopping the servers")
        finally:
            fleet.stop_all()
    text = render_report(args, model, sections, measurer.problems, time.monotonic() - started, complete)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--requests", type=int, default=16, help="requests per run (at least 2 per user)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--levels", default="1,4,8,16", help="concurrency levels of the baseline comparison")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated, from {', '.join(SECTIONS)}")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    add_peers_dir(parser)
    args = parse_comparisons(parser, SECTIONS)
    raise_on_sigterm()
    run(args)


if __name__ == "__main__":
    main()
