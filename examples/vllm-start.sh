#!/bin/sh
# Starts one vLLM server with examples/vllm-launch.sh in the background and returns once it serves: exit 0
# when its /health answers, 1 when it exits first or is not ready within VLLM_READY_TIMEOUT_S (default 1800 s:
# a large model's download and load; it is stopped then). Readiness is decided by deploy/bin/wait-http.js, as
# under systemd and in the GPU-host image.
#
# A GPU's servers must start one after another: vLLM measures the GPU's memory while it loads and profiles,
# so two loading at once on one GPU misread each other's allocations and one of them fails. Chain a GPU's
# servers with `&&`, and run the chains of different GPUs side by side (what a SkyPilot `run` does):
#   (examples/vllm-start.sh 0 8001 a A && examples/vllm-start.sh 0 8002 b B) &
#   examples/vllm-start.sh 1 8003 c C &
#
# Usage: examples/vllm-start.sh GPU_INDEX PORT SERVED_NAME MODEL [more vllm serve arguments...]
set -eu

if [ "$#" -lt 4 ]; then
  echo "usage: $0 GPU_INDEX PORT SERVED_NAME MODEL [vllm serve arguments...]" >&2
  exit 2
fi
here=$(dirname "$0")
gpu_index=$1
port=$2
served_name=$3
timeout_s=${VLLM_READY_TIMEOUT_S:-1800}

"$here/vllm-launch.sh" "$@" &
pid=$!
waited=0
node "$here/../deploy/bin/wait-http.js" --pid "$pid" "http://127.0.0.1:$port/health" "$timeout_s" || waited=$?
case $waited in
  0)
    echo "vllm-start: $served_name ready on 127.0.0.1:$port (GPU $gpu_index, pid $pid)"
    exit 0
    ;;
  3)
    code=0
    wait "$pid" || code=$?
    echo "vllm-start: $served_name (GPU $gpu_index, port $port) exited with $code before it was ready" >&2
    exit 1
    ;;
  *)
    kill "$pid" 2>/dev/null || true
    echo "vllm-start: $served_name (GPU $gpu_index, port $port) not ready after ${timeout_s} s; stopped it" >&2
    exit 1
    ;;
esac
