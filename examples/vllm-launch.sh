#!/bin/sh
# Starts one vLLM server the way Haru requires it (DESIGN.md §6):
#   --enable-sleep-mode      the standby keeps weights in CPU RAM (level 1) and frees the VRAM for training
#   VLLM_SERVER_DEV_MODE=1   exposes /sleep, /wake_up, /is_sleeping, which the supervisor drives
#   --served-model-name      the name clients send as `model`, and the name in the fleet layout
#   --host 127.0.0.1         the admin endpoints above must never be reachable from the network: the
#                            supervisor is the only control surface, and inference traffic reaches vLLM
#                            through the host's gateway, which forwards /v1/* only
#
# Usage: examples/vllm-launch.sh GPU_INDEX PORT SERVED_NAME MODEL [more vllm serve arguments...]
#   examples/vllm-launch.sh 0 8001 qwen-0.5b Qwen/Qwen2.5-0.5B-Instruct --gpu-memory-utilization 0.25
#
# The server keeps running in the background; the script exits 0 once its /health answers, and 1 when it
# exits first or is not ready within VLLM_READY_TIMEOUT_S (default 1800 s: a large model's download and
# load), killing it then. Several models share one GPU by splitting --gpu-memory-utilization between them,
# and must start one after another: vLLM measures the GPU's memory while it loads and profiles, so two
# loading at once on one GPU misread each other's allocations and one of them fails. Chain a GPU's servers with `&&`, and run the
# chains of different GPUs side by side:
#   (examples/vllm-launch.sh 0 8001 a A && examples/vllm-launch.sh 0 8002 b B) &
#   examples/vllm-launch.sh 1 8003 c C &
# The supervisor config (examples/supervisor.json) lists the same names and ports.
set -eu

if [ "$#" -lt 4 ]; then
  echo "usage: $0 GPU_INDEX PORT SERVED_NAME MODEL [vllm serve arguments...]" >&2
  exit 2
fi
gpu_index=$1
port=$2
served_name=$3
model=$4
shift 4
timeout_s=${VLLM_READY_TIMEOUT_S:-1800}
poll_s=${VLLM_READY_POLL_S:-2}

export CUDA_VISIBLE_DEVICES="$gpu_index"
export VLLM_SERVER_DEV_MODE=1

vllm serve "$model" \
  --served-model-name "$served_name" \
  --host 127.0.0.1 \
  --port "$port" \
  --enable-sleep-mode \
  "$@" &
pid=$!

# vLLM's /health answers 200 once the engine is up. Python is there wherever vLLM is.
healthy() {
  python3 -c 'import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
except Exception:
    sys.exit(1)' "http://127.0.0.1:$port/health"
}

deadline=$(($(date +%s) + timeout_s))
while :; do
  if ! kill -0 "$pid" 2>/dev/null; then
    code=0
    wait "$pid" || code=$?
    echo "vllm-launch: $served_name (GPU $gpu_index, port $port) exited with $code before it was ready" >&2
    exit 1
  fi
  if healthy; then
    echo "vllm-launch: $served_name ready on 127.0.0.1:$port (GPU $gpu_index, pid $pid)"
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    kill "$pid" 2>/dev/null || true
    echo "vllm-launch: $served_name (GPU $gpu_index, port $port) not ready after ${timeout_s} s; stopped it" >&2
    exit 1
  fi
  sleep "$poll_s"
done
