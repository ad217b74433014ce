#!/usr/bin/env bash
# Rank-partitioned conversion against one process (issue 40, item 8):
# `BIN convert DCP OUT --to safetensors` at the default shard size as 1
# process, then as 2 and 4 at once (`--rank`/`--world`), rank r pinned to
# core r % CORES (taskset), --no-sync, page cache warm, nothing dirty
# when a run starts (sync); prints each round's
# wall time to the last exit and the shards written.
# usage: scripts/bench_convert_world.sh BIN SOURCE.pt WORKDIR [ROUNDS]
#   SOURCE.pt is converted once into WORKDIR/dcp (4 ranks' files).
set -euo pipefail
bin=$1 src=$2 work=$3 rounds=${4:-3}
cores=$(nproc)
mkdir -p "$work"
[ -d "$work/dcp" ] || "$bin" -q convert "$src" "$work/dcp" --to dcp --ranks 4 --no-sync >/dev/null
cat "$work"/dcp/* >/dev/null  # warm the page cache
run() {  # run WORLD: the wall time of WORLD processes converting at once
  local world=$1 out="$work/out"
  rm -rf "$out"
  # Nothing of an earlier run left dirty: its writeback would land in
  # this run's time (the kernel starts it past dirty_background_ratio).
  sync
  local start end
  start=$(date +%s.%N)
  for ((r = 0; r < world; r++)); do
    local part=()
    [ "$world" -gt 1 ] && part=(--rank "$r" --world "$world")
    taskset -c $((r % cores)) "$bin" -q convert "$work/dcp" "$out" --to safetensors "${part[@]}" --no-sync >/dev/null &
  done
  wait
  end=$(date +%s.%N)
  echo "world=$world $(python3 -c "print(round($end - $start, 3))") s, $(ls "$out" | grep -c 'safetensors$') shards"
}
for ((round = 1; round <= rounds; round++)); do
  for world in 1 2 4; do
    echo "round $round: $(run "$world")"
  done
done
