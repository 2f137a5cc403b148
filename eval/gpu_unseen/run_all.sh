#!/usr/bin/env bash
# Run every program in eval/gpu_unseen/programs on a GPU machine, one after another.
# Usage (from the repo root): bash eval/gpu_unseen/run_all.sh [id ...]
#   With ids, only those programs run. SHARD=k/n (e.g. SHARD=1/2) runs every n-th program
#   starting at k, so a full pass can be split over several device commands (<10 min each).
# Writes $OUT/gpu_unseen/<id>.log (stdout+stderr) and <id>.rc, then tars to $OUT/gpu_unseen.tgz.
set -u
ROOT="$(pwd)"
HERE="$ROOT/eval/gpu_unseen"
OUT="${OUT:-/tmp/out}"
DEST="$OUT/gpu_unseen"
mkdir -p "$DEST"
WORK="$(mktemp -d)"          # programs write temp files here, not into the repo

nvidia-smi > "$DEST/_nvidia_smi.txt" 2>&1
python3 -c "import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.device_count())" > "$DEST/_env.txt" 2>&1

python3 - "$HERE/labels.jsonl" "${SHARD:-1/1}" "$@" > "$WORK/_plan.tsv" <<'PY'
import json, shlex, sys
k, n = map(int, sys.argv[2].split("/"))
only = set(sys.argv[3:])
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for i, d in enumerate(rows):
    if only and d["id"] not in only:
        continue
    if not only and i % n != k - 1:
        continue
    env = " ".join(f"{name}={shlex.quote(str(val))}" for name, val in (d.get("env") or {}).items())
    print(f"{d['id']}\t{d.get('nproc', 1)}\t{env}")
PY

port=29500
while IFS=$'\t' read -r id nproc envs; do
    prog="$HERE/programs/$id.py"
    log="$DEST/$id.log"
    echo "=== $id (nproc=$nproc env=[$envs])"
    start=$(date +%s)
    if [ "$nproc" = "2" ]; then
        port=$((port + 1))
        ( cd "$WORK" && env $envs timeout 90 torchrun --nproc_per_node=2 --master_port="$port" "$prog" ) > "$log" 2>&1
    else
        ( cd "$WORK" && env $envs timeout 90 python3 "$prog" ) > "$log" 2>&1
    fi
    rc=$?
    echo "$rc" > "$DEST/$id.rc"
    echo "    rc=$rc in $(( $(date +%s) - start ))s"
    # make sure nothing we started is left holding the GPU
    sleep 1
done < "$WORK/_plan.tsv"

rm -rf "$WORK"
tar czf "$OUT/gpu_unseen.tgz" -C "$OUT" gpu_unseen && rm -rf "$DEST"
echo "wrote $OUT/gpu_unseen.tgz"
