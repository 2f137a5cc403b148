#!/usr/bin/env bash
# On the device machine: `torchhelp eval reproduce --investigate` one case at a time, so a call that runs out
# of time still brings back every finished case. Usage: investigate_batch.sh DEVICE OUT SLUG...
# Each case writes OUT/<slug>/investigate-<device>.json; eval/gpu_runs/combine_investigate.py joins them.
set -u
device=$1; out=$2; shift 2
for slug in "$@"; do
  python -m assistant eval reproduce --investigate --device "$device" --cases "$slug" --out "$out/$slug" > "$out/$slug.log" 2>&1
  echo "$slug exit $?" >> "$out/done.txt"
done
