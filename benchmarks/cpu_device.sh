#!/usr/bin/env bash
# pier on a many-core CPU host against llama-server (issue 26): the table of benchmarks/many_cores.py, llama.cpp's
# own kernel bound (llama-batched-bench), the whole-host layout (benchmarks/layout.py) and the bursts' scheduling
# bounds, each to its own report, each started only when the time left allows it.
#
# Prepare the offline host's bundle here (pier, its wheels, llama_cpp and llama-server built from the same sources):
#   ../shared/tools/device-bundle.sh && bash benchmarks/cpu_device.sh --add-batched-bench
# There, from the project's root:  OUT=/some/folder bash benchmarks/cpu_device.sh [STEPS] [SECONDS]
#   STEPS: comma-separated from table,kernel,layout,bursts (default: all, in that order); SECONDS: the budget
#   (default 540). THREADS (default: every core) is what every server gets; ALSO, space-separated NAME=VALUE
#   settings, adds pier arms to the table (e.g. ALSO="PIER_ITL_BOUND=2").
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
steps=",${1:-table,kernel,layout,bursts},"
budget=${2:-540}
out=${OUT:-/tmp/pier-cpu}
threads=${THREADS:-$(nproc)}
mkdir -p "$out"
source $bundle/env.sh || exit 1
export PYTHONPATH=$PWD/src:$PYTHONPATH  # this checkout's pier, not the bundle's copy of it
export PIER_BENCH_MODEL_CACHE=/tmp/pier-models
left() { echo $((budget - SECONDS)); }
wants() { [[ $steps == *",$1,"* ]] && [ "$(left)" -ge "$2" ] || { echo "== skip $1 ($(left) s left)"; return 1; }; }
server=$PWD/$bundle/peer/run-llama-server
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|^Flags" | cut -c1-200
echo "threads $threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from common import bench_model; bench_model()" || exit 1
echo "== model built at $SECONDS s"
also=(); for setting in ${ALSO:-}; do also+=(--also "$setting"); done
if wants table 120; then
  echo "== table ($(left) s left)"
  timeout $(( $(left) - 60 )) python3 benchmarks/many_cores.py --llama-server "$server" --threads "$threads" \
    --only "${ROWS:-mt16,mt64,c32,c8,prefix}" --repeats "${REPEATS:-2}" --requests 32 "${also[@]}" ${TABLE_FLAGS:-} \
    --out "$out/table.md" --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -60
fi
if wants kernel 40; then
  echo "== kernel ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 benchmarks/engine_vs_batched_bench.py --peers-dir $bundle/batched \
    --batches 8,32 --pp 64 --tg 64 --ctx 8192 --threads "$threads" --repeats 1 2>&1 | tail -8 | tee "$out/kernel.md"
fi
if wants layout 90 && [ -f benchmarks/layout.py ]; then
  echo "== layout ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 benchmarks/layout.py --llama-server "$server" --cores "$threads" \
    ${LAYOUT_FLAGS:---layouts 4x4,2x8 --levels 32 --workloads random,multi-turn} --out "$out/layout.md" \
    --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -40
fi
if wants bursts 90; then
  echo "== bursts ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 benchmarks/bursts.py --llama-server "$server" --threads "$threads" \
    ${BURSTS_FLAGS:---capacity-requests 24 --levels 0.8 --seconds 30} --out "$out/bursts.md" \
    --logs /tmp/pier-cpu-logs 2>&1 | grep -v "^$" | tail -30
fi
grep -l -i "traceback" /tmp/pier-cpu-logs/* 2>/dev/null | head -3 | xargs -r tail -n 12
echo "== done at $SECONDS s"
