#!/bin/sh
# `setup` of a SkyPilot-launched Haru domain (examples/production.layout.json). SkyPilot runs it in the
# task's workdir, the Haru checkout it synced to ~/sky_workdir, on every launch. It installs:
#   Node >= 20.18.1   when the image has none or an older one: Node $HARU_NODE_VERSION (default 22.12.0)
#                     from nodejs.org into ~/.haru/node (the layout's `run` puts ~/.haru/node/bin on PATH)
#   Haru's runtime    `npm ci --omit=dev`: the supervisor runs from this checkout (bin/haru.js)
#   vLLM              with the LoRA trainer's libraries, when the image has no `vllm`
# Everything else the host needs comes from the image (a GPU driver, python3, curl, tar with xz).
set -eu

node_version=${HARU_NODE_VERSION:-22.12.0}
node_dir="$HOME/.haru/node"
export PATH="$node_dir/bin:$PATH"

node_ok() {
  command -v node >/dev/null 2>&1 && node -e '
const [major, minor] = process.versions.node.split(".").map(Number);
process.exit(major > 20 || (major === 20 && minor >= 18) ? 0 : 1);'
}

if ! node_ok; then
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *)
      echo "sky-setup: no Node build for $(uname -m)" >&2
      exit 1
      ;;
  esac
  echo "sky-setup: installing Node $node_version into $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir"
  curl -fsSL "https://nodejs.org/dist/v$node_version/node-v$node_version-linux-$arch.tar.xz" |
    tar -xJ -C "$node_dir" --strip-components=1
fi
echo "sky-setup: node $(node --version)"

# The Temporal CLI (a postinstall download) is for workers and development, not for a GPU host.
HARU_SKIP_TEMPORAL_INSTALL=1 npm ci --omit=dev --prefer-offline --no-audit --no-fund

if ! command -v vllm >/dev/null 2>&1; then
  python3 -m pip install 'vllm>=0.10' 'torch>=2.4' 'transformers>=4.45' 'peft>=0.13'
fi
echo "sky-setup: vllm at $(command -v vllm)"
