#!/usr/bin/env bash
# pier on a many-core CPU host against llama-server (issue 26): the table of benchmarks/many_cores.py, llama.cpp's
# own kernel bound (llama-batched-bench), the whole-host layout (benchmarks/layout.py) and the bursts' scheduling
# bounds, each to its own report, each started only when the time left allows it.
#
# Prepare the offline host's bundle here (pier, its wheels, llama_cpp and llama-server built from the same sources):
#   ../shared/tools/device-bundle.sh && bash benchmarks/cpu_device.sh --add-batched-bench
# There, from the project's root:  OUT=/some/folder bash benchmarks/cpu_device.sh [STEPS] [SECONDS]
#   STEPS: comma-separated from table,mt64,kernel,layout,tune,profile,bursts (default: all but tune; run in the
#   order given); SECONDS: the budget (default 540). THREADS (default: every core) is what every server gets; ALSO,
#   space-separated NAME=VALUE settings, adds pier arms to the table (e.g. ALSO="PIER_ITL_BOUND=2").
set -uo pipefail
bundle=.device
if [ "${1:-}" = "--add-batched-bench" ]; then  # here: llama-batched-bench beside the bundle's llama-server
  bin=$(bash ../shared/tools/build-llama-server.sh 0.3.36 "${PIER_PEERS_DIR:-$HOME/.cache/pier-peers}")
  mkdir -p $bundle/batched && cp -a "$bin"/llama-batched-bench "$bin"/libllama-batched-bench-impl.so $bundle/peer/
  printf '#!/usr/bin/env bash\nd="$(dirname "$0")/../peer"\nLD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/llama-batched-bench" "$@"\n' \
    > $bundle/batched/llama-batched-bench
  chmod +x $bundle/batched/llama-batched-bench
  exit 0
fi
steps=",${1:-table,mt64,kernel,layout,profile,bursts},"
budget=${2:-540}
out=${OUT:-/tmp/pier-cpu}
threads=${THREADS:-$(nproc)}
mkdir -p "$out"
if [ -z "${NO_BUNDLE_ENV:-}" ]; then  # NO_BUNDLE_ENV=1: a host where pier is installed (a dry run here)
  source $bundle/env.sh || exit 1
  export PYTHONPATH=$PWD/src:$PYTHONPATH  # this checkout's pier, not the bundle's copy of it
  export PIER_BENCH_MODEL_CACHE=/tmp/pier-models PATH=/tmp/site/bin:$PATH  # py-spy, when the bundle has it
  server=$PWD/$bundle/peer/run-llama-server
else
  server=$(bash ../shared/tools/build-llama-server.sh 0.3.36 "${PIER_PEERS_DIR:-$HOME/.cache/pier-peers}")/llama-server
fi
left() { echo $((budget - SECONDS)); }
cap() { local l=$(( $(left) - $1 )); echo $(( l < $2 ? l : $2 )); }  # seconds for a step: what is left less $1, at most $2
wants() { [[ $steps == *",$1,"* ]] && [ "$(left)" -ge "$2" ] || { echo "== skip $1 ($(left) s left)"; return 1; }; }
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|^Flags" | cut -c1-200
echo "threads $threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from common import bench_model; bench_model()" || exit 1
echo "== model built at $SECONDS s"
also=(); for setting in ${ALSO:-}; do also+=(--also "$setting"); done
step_table() {
  wants table 120 || return 0
  echo "== table ($(left) s left)"
  timeout "$(cap 60 "${TABLE_SECONDS:-270}")" python3 benchmarks/many_cores.py --llama-server "$server" --threads "$threads" \
    --only "${ROWS:-mt16,c32,c8,prefix,mtsys}" --repeats "${REPEATS:-2}" --requests 32 "${also[@]}" ${TABLE_FLAGS:-} \
    --out "$out/table.md" --logs /tmp/pier-cpu-logs 2>&1 | grep -E "^\[|^\| (pier|llama)" | tail -60
}
step_mt64() {  # the longest row: pier and llama-server alone, once
  wants mt64 60 || return 0
  echo "== mt64 ($(left) s left)"
  timeout "$(cap 40 "${MT64_SECONDS:-110}")" python3 benchmarks/many_cores.py --llama-server "$server" --threads "$threads" \
    --only mt64 --repeats "${REPEATS_MT64:-1}" --out "$out/table-mt64.md" --logs /tmp/pier-cpu-logs 2>&1 \
    | grep -E "^\[|^\| (pier|llama)" | tail -20
}
step_kernel() {
  wants kernel 40 || return 0
  echo "== kernel ($(left) s left)"
  timeout "$(cap 5 60)" python3 benchmarks/engine_vs_batched_bench.py --peers-dir $bundle/batched \
    --batches 8,32 --pp 64 --tg 64 --ctx 8192 --threads "$threads" --repeats 1 > "$out/kernel.md" 2>&1
  tail -8 "$out/kernel.md"
}
step_layout() {
  wants layout 90 && [ -f benchmarks/layout.py ] || return 0
  echo "== layout ($(left) s left)"
  timeout "$(cap 5 "${LAYOUT_SECONDS:-120}")" python3 benchmarks/layout.py --llama-server "$server" --cores "$threads" \
    ${LAYOUT_FLAGS:---layouts 4x4,2x8 --levels 32 --workloads random,multi-turn} --out "$out/layout.md" \
    --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -40
}
step_tune() {  # pier tune's own layout for the multi-turn load, then that layout against llama-server
  wants tune 150 || return 0
  echo "== tune ($(left) s left)"
  model=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from common import bench_model; print(bench_model())")
  local search; search=$(cap 150 "${TUNE_SECONDS:-200}")  # the search's budget; a trial begun before its end ends
  timeout $(( search + 60 )) python3 -m pier tune "$model" --instance-type local \
    --slo "${TUNE_SLO:-ttft_p99<3s}" --workload multi-turn --input-len 64 --output-len 32 --concurrency 32 \
    --parallel 8 --kv-types f16 \
    --requests 64 --repeats 1 \
    --budget "${search}s" --out "$out/tune" 2>&1 | grep -v "^$" | tail -25
  winner=$(python3 -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1]))['components'][0]; \
print(f\"{c['copies']}x{int(c['cpus'])}\")" "$out/tune/deploy.yaml" 2>/dev/null)
  echo "tune's layout: ${winner:-none}"
  if [ "$(left)" -ge 60 ]; then
    timeout "$(cap 5 "${LAYOUT_SECONDS:-150}")" python3 benchmarks/layout.py --llama-server "$server" --cores "$threads" \
      --layouts "${winner:-4x4,8x2}" --levels 32 --ttft-p99 3 --workloads multi-turn,random --out "$out/layout-tuned.md" \
      --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -30
  fi
}
step_profile() {  # where a copy's time goes under the multi-turn load
  wants profile 45 && command -v py-spy > /dev/null || return 0
  echo "== profile ($(left) s left)"
  model=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from common import bench_model; print(bench_model())")
  MAX_BATCH_TOTAL_TOKENS=4096 timeout 60 py-spy record -r 250 --threads --nonblocking -f raw -o "$out/profile.txt" \
    -d 25 -- python3 -m pier.server.container --model "$model" --port 18090 --host 127.0.0.1 --threads "$threads" \
    --parallel 8 > /tmp/pier-cpu-profile.log 2>&1 &
  for _ in $(seq 60); do curl -sf 127.0.0.1:18090/ping > /dev/null && break; sleep 0.5; done
  timeout 30 python3 -c "import sys, asyncio; sys.path.insert(0, 'benchmarks'); from multi_turn import choose_words, \
one_run; from peers import Server; s = Server('pier', (), 18090, '/ping'); t = asyncio.run(choose_words(s)); \
[print(f'{asyncio.run(one_run(s, t, 16, str(i), 8))[0].output_throughput:.0f} tok/s') for i in range(3)]"
  wait
}
step_bursts() {
  wants bursts 120 || return 0  # 0.5: mixed load (slots to spare); 0.8 queued on 16 cores in the second lease
  echo "== bursts ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 benchmarks/bursts.py --llama-server "$server" --threads "$threads" \
    ${BURSTS_FLAGS:---capacity-requests 24 --levels 0.5,0.8 --seconds 25} --out "$out/bursts.md" \
    --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -30
}
for step in ${steps//,/ }; do "step_$step"; done
grep -l -i "traceback" /tmp/pier-cpu-logs/* 2>/dev/null | head -3 | xargs -r tail -n 12
echo "== done at $SECONDS s"
