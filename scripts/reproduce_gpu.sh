#!/usr/bin/env bash
# Reproduce the GPU eval cases on a real GPU machine and bring the captures home.
#
#   OUT=/path/to/outdir scripts/reproduce_gpu.sh cuda        # single-GPU cases
#   OUT=/path/to/outdir scripts/reproduce_gpu.sh multi_gpu   # two-GPU cases (needs >= 2 GPUs)
#
# Runs from the repository root with the machine's own python3/torch (no install needed: the
# harness only needs typer and rich, and never imports faiss or the embedding model). Each case runs
# under `torchhelp run` so the capture also holds the live probes. Captures land in
# $OUT/captured/<device>/<slug>.json with the machine's GPU model, driver and torch version;
# copy them into eval/captured/<device>/ and commit.
set -uo pipefail
cd "$(dirname "$0")/.."
device="${1:-cuda}"
out="${OUT:-/tmp/torchhelp-gpu}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/nvidia-smi-$device.csv" 2>&1
python3 -c "import torch, sys; print(torch.__version__, torch.version.cuda, sys.version.split()[0])" > "$out/torch-$device.txt" 2>&1
python3 -m assistant eval reproduce --device "$device" --with-probes --out "$out/captured" ${CASES:+--cases "$CASES"} 2>&1 | tee "$out/reproduce-$device.log"
exit "${PIPESTATUS[0]}"
