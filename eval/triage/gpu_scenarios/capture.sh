#!/bin/bash
# Capture real multi-rank failure logs: each scenario in its own folder under $OUT/triage_gpu.
set -u
N=${N:-2}
DEST=/tmp/triage_gpu
mkdir -p "$DEST"
cd "$(dirname "$0")"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv; python -c 'import torch;print(torch.__version__, torch.version.cuda)'; } > "$DEST/ENV.txt" 2>&1
run() {  # name mode
  local name=$1 mode=$2 dir="$DEST/$1-$2"
  mkdir -p "$dir"
  echo "# captured: $mode $name nproc=$N $(date -u +%FT%TZ)" > "$dir/CMD.txt"
  case $mode in
    torchrun) timeout 150 torchrun --standalone --nproc_per_node=$N scenario.py $name > "$dir/stdout.log" 2>&1 ;;
    tee) timeout 150 torchrun --standalone --nproc_per_node=$N --log-dir "$dir/torchelastic" --tee 3 scenario.py $name > "$dir/stdout.log" 2>&1 ;;
    spawn) timeout 150 python scenario.py $name --spawn $N > "$dir/stdout.log" 2>&1 ;;
  esac
  echo "exit=$?" >> "$dir/CMD.txt"
}
for s in ${SCENARIOS:-one_rank_value_error one_rank_oom one_rank_device_assert one_rank_shape one_rank_sigkill one_rank_segfault hang_mismatched_collectives all_ranks_import_error all_ranks_config_key caught_retry_then_success}; do
  run $s torchrun
done
[ -n "${EXTRA:-}" ] && run one_rank_value_error tee
[ -n "${EXTRA:-}" ] && run one_rank_oom tee
[ -n "${EXTRA:-}" ] && run one_rank_value_error spawn
[ -n "${EXTRA:-}" ] && run one_rank_sigkill spawn
tar czf "${OUT:-/tmp}/triage_gpu_${PART:-a}.tgz" -C /tmp triage_gpu; ls -R "$DEST" | head -60; tail -n 3 "$DEST"/*/CMD.txt
