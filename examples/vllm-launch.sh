#!/bin/sh
# Starts one vLLM server the way Haru requires it (docs/architecture.md §6.1):
#   --enable-sleep-mode      the standby keeps weights in CPU RAM (level 1) and frees the VRAM for training
#   VLLM_SERVER_DEV_MODE=1   exposes /sleep, /wake_up, /is_sleeping, which the supervisor drives
#   --served-model-name      the name clients send as `model`, and the name in the fleet layout
#   --host 127.0.0.1         the admin endpoints above must never be reachable from the network: the
#                            supervisor is the only control surface, and inference traffic reaches vLLM
#                            through the host's gateway, which forwards /v1/* only
#
# Usage: examples/vllm-launch.sh GPU_INDEX PORT SERVED_NAME MODEL [more vllm serve arguments...]
#   examples/vllm-launch.sh 0 8001 qwen-0.5b Qwen/Qwen2.5-0.5B-Instruct --gpu-memory-utilization 0.25
# Several models share one GPU by splitting --gpu-memory-utilization between them; the supervisor config
# (examples/supervisor.json) lists the same names, ports and shares (`gpuMemoryUtilization`: what a wake needs).
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

export CUDA_VISIBLE_DEVICES="$gpu_index"
export VLLM_SERVER_DEV_MODE=1
# The supervisor's secrets are not the engine's: a SkyPilot `run` starts both from one environment (the launch's
# --secret values), and whatever a process starts with stays readable in its /proc/<pid>/environ for its life.
unset HARU_SUPERVISOR_TOKEN HARU_SUPERVISOR_TOKEN_PREVIOUS HARU_SUPERVISOR_TLS_CERT_B64 HARU_SUPERVISOR_TLS_KEY_B64

exec vllm serve "$model" \
  --served-model-name "$served_name" \
  --host 127.0.0.1 \
  --port "$port" \
  --enable-sleep-mode \
  "$@"
