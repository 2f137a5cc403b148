#!/usr/bin/env bash
# Run the GPU eval cases (case.toml device = "cuda" or "multi_gpu") and keep what they print.
#
# Usage (from the repo root, on a machine with 1-2 NVIDIA GPUs):
#   OUT=/some/dir scripts/reproduce_gpu.sh [slug ...]
#
# For every selected case it writes into "$OUT/":
#   <slug>.log   stdout+stderr of the run
#   <slug>.rc    exit code (124/137 = killed by timeout)
# plus nvidia-smi.csv, torch-version.txt and summary.tsv (slug, device, rc, seconds,
# whether expect_exception matched the log). cuda cases see one GPU (CUDA_VISIBLE_DEVICES=0
# unless already set); multi_gpu cases are skipped on machines with fewer than 2 GPUs.
# NVLink multicast stays off for every run.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-eval/captured/gpu-raw}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1
"$PY" -c "import torch;print(torch.__version__, torch.version.cuda)" > "$OUT/torch-version.txt" 2>&1
ngpu=$("$PY" -c "import torch;print(torch.cuda.device_count())" 2>/dev/null || echo 0)
summary="$OUT/summary.tsv"
printf 'slug\tdevice\trc\tseconds\tmatched\n' > "$summary"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

for dir in eval/cases/*/; do
  dir=${dir%/}
  slug=$(basename "$dir")
  [ -f "$dir/case.toml" ] && [ -f "$dir/repro.py" ] || continue
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF "$slug"; then continue; fi

  # case.toml -> shell variables (device, timeout_s, launcher, envs[])
  vars=$("$PY" - "$dir/case.toml" <<'PYEOF'
import shlex, sys, tomllib
with open(sys.argv[1], "rb") as f:
    c = tomllib.load(f)
dev = c.get("device", "cpu")
print("device=" + shlex.quote(dev))
print("timeout_s=%d" % int(c.get("timeout", 120 if dev == "multi_gpu" else 60)))
print("launcher=" + shlex.quote(c.get("launcher", "python")))
print("envs=(" + " ".join(shlex.quote(f"{k}={v}") for k, v in c.get("env", {}).items()) + ")")
PYEOF
) || { echo "bad case.toml: $slug"; continue; }
  eval "$vars"

  case "$device" in cuda|multi_gpu) ;; *) continue ;; esac
  if [ "$device" = multi_gpu ] && [ "$ngpu" -lt 2 ]; then
    echo "skip $slug: needs 2 GPUs, found $ngpu"; continue
  fi

  if [ "$launcher" = torchrun ]; then
    cmd=("$PY" -m torch.distributed.run --standalone --nproc_per_node=2 repro.py)
  else
    cmd=("$PY" repro.py)
  fi
  vis=()
  [ "$device" = cuda ] && vis=("CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}")

  echo "=== $slug ($device, $launcher, timeout ${timeout_s}s)"
  start=$(date +%s)
  (cd "$dir" && env ${vis[@]+"${vis[@]}"} ${envs[@]+"${envs[@]}"} \
      timeout -k 15 "$timeout_s" "${cmd[@]}") > "$OUT/$slug.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  echo "$rc" > "$OUT/$slug.rc"
  matched=$("$PY" - "$dir/case.toml" "$OUT/$slug.log" <<'PYEOF'
import re, sys, tomllib
with open(sys.argv[1], "rb") as f:
    pat = tomllib.load(f).get("expect_exception", "")
log = open(sys.argv[2], errors="replace").read()
print("yes" if pat and re.search(pat, log) else "no")
PYEOF
)
  printf '%s\t%s\t%s\t%s\t%s\n' "$slug" "$device" "$rc" "$secs" "$matched" >> "$summary"
  echo "    rc=$rc ${secs}s matched=$matched"
done
echo "results in $OUT"
