#!/usr/bin/env bash
# pier on a GPU host, measured against llama-server (issue 25): builds llama.cpp with CUDA from the sources that
# llama-cpp-python ships, points pier's llama_cpp at that build, runs the GPU tests, then the comparisons of
# benchmarks/gpu_vs_llama_server.py, each to its own report.
#
# Prepare the offline host's bundle here (pier, its wheels, llama.cpp's sources):  ../shared/tools/device-bundle.sh --cuda
# There, from the project's root:  OUT=/some/folder bash benchmarks/gpu_device.sh [STEPS] [SECONDS]
#   STEPS: comma-separated from build,levels,greedy,prefix,tests (default: all, in that order). Each step starts only
#   when the SECONDS budget (default 570) leaves room for it, and a build or model already there is kept, so a second
#   run on the same host goes on where the first stopped.
set -uo pipefail
steps=",${1:-build,levels,greedy,prefix,tests},"
budget=${2:-570}
out=${OUT:-/tmp/pier-gpu}
mkdir -p "$out"
source .device/env.sh || exit 1
export PYTHONPATH=$PWD/src:$PYTHONPATH  # this checkout's pier, not the bundle's copy of it
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64
llama=/tmp/llama_cpp_python-0.3.36/vendor/llama.cpp
bin=$llama/build/bin
export PIER_BENCH_MODEL_CACHE=/tmp/pier-models LLAMA_CPP_LIB_PATH=$bin
left() { echo $((budget - SECONDS)); }
wants() { [[ $steps == *",$1,"* ]] && [ "$(left)" -ge "$2" ] || { echo "== skip $1 ($(left) s left)"; return 1; }; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# the benchmark model builds on the CPU while llama.cpp compiles
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from gpu_vs_llama_server import bench_model_7b; bench_model_7b()" \
  > "$out/model.log" 2>&1 &
if wants build 60 && [ ! -x "$bin/llama-server" ]; then
  echo "== build ($(left) s left)"
  [ -d "$llama" ] || tar -xzf .device/llama-src.tar.gz -C /tmp
  (cd "$llama" && cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
   cmake --build build -j16 --target llama-server >> "$out/build.log" 2>&1) || { tail -30 "$out/build.log"; exit 1; }
  echo "built in $SECONDS s"
fi
[ -x "$bin/llama-server" ] || { echo "no CUDA llama-server in $bin"; exit 1; }
python3 -c "import llama_cpp; from pier.engine.devices import gpus; print('pier sees', [g.shown() for g in gpus()])"
wait  # the model
for step in levels greedy prefix; do
  need=$([ $step = levels ] && echo 70 || echo 35)
  if wants $step $need; then
    echo "== $step ($(left) s left)"
    timeout $(( $(left) - 5 )) python3 benchmarks/gpu_vs_llama_server.py --peers-dir "$bin" --only $step \
      --requests 8 --repeats ${REPEATS:-2} ${BENCH_FLAGS:-} --out "$out/gpu-$step.md" --logs /tmp/pier-gpu-logs 2>&1 | grep -v "^$" | tail -40
  fi
done
# a server that failed says why in its log
grep -l -i "error\|traceback" /tmp/pier-gpu-logs/* 2>/dev/null | head -3 | xargs -r tail -n 12
if wants tests 60; then
  echo "== tests ($(left) s left)"
  timeout $(( $(left) - 5 )) python3 -m pytest -q -p no:cacheprovider tests/server/test_gpu_e2e.py \
    tests/test_gpus.py tests/engine/test_devices.py tests/engine/test_offload.py \
    2>&1 | tail -15
fi
echo "== done at $SECONDS s"
