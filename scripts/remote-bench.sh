#!/usr/bin/env bash
# Measures stowage on a checkpoint in a local S3 server (s3rver, from npm, on
# 127.0.0.1): `inspect --no-hash` (bytes and requests), a lazy load touching
# one tensor, and eager loads with parallel range requests against one
# sequential stream. docs/performance.md records the results.
#
# The eager loads run twice: through `wan_proxy` (an example of this crate: a
# proxy that gives each connection S3's per-connection rate and a delay per
# request, by default 90 MB/s and 30 ms), and on the bare loopback. One
# sequential stream is measured two ways: stowage with one request in flight
# and requests of up to 1 GiB (`STOWAGE_REMOTE_CONCURRENCY=1
# STOWAGE_REMOTE_MAX_REQUEST=1 GiB`), and one plain GET of the whole object
# by curl into /dev/null.
#
# Then a distributed checkpoint (DCP_DIR, default /work/scratch/remote/dcp,
# made here with torch's dcp.save when missing: 64 float32 tensors of 16 MiB,
# one process) is loaded eagerly by its folder URL, its items fetched in
# concurrent batches; one item after another, each in one request
# (`STOWAGE_REMOTE_CONCURRENCY=1 STOWAGE_REMOTE_MAX_REQUEST=17 MiB`: batches
# of one item, which is how stowage read DCP items by URL before they were
# fetched in batches); and as one sequential stream (`=1 GiB`: one batch, its
# neighbouring items coalesced into a few large requests).
#
# usage: [RUNS=3] [RATE_MB=90] [LATENCY_MS=30] [DCP_DIR=…] scripts/remote-bench.sh [FILE.pt] [TENSOR]
#   FILE.pt defaults to /work/scratch/remote/big.pt, made here with torch when
#   missing: 256 float32 tensors of 4 MiB (1 GiB), `layers.N.weight`.
# Needs npm (s3rver is installed under target/s3rver on first use), curl, and
# the venv of scripts/torch-venv.sh with boto3 (`pip install boto3`).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${STOWAGE_TORCH_PYTHON:-$HOME/.torch-venv/bin/python}"
file="${1:-/work/scratch/remote/big.pt}"
tensor="${2:-layers.100.weight}"
runs="${RUNS:-3}"
rate="${RATE_MB:-90}"
latency="${LATENCY_MS:-30}"
if [ ! -f "$file" ]; then
  mkdir -p "$(dirname "$file")"
  "$py" -c "
import torch
g = torch.Generator().manual_seed(0)
torch.save({f'layers.{i}.weight': torch.rand(1 << 20, generator=g) for i in range(256)}, '$file')"
fi
dcp="${DCP_DIR:-/work/scratch/remote/dcp}"
if [ ! -f "$dcp/.metadata" ]; then
  mkdir -p "$dcp"
  "$py" -c "
import torch, torch.distributed.checkpoint as dcp
g = torch.Generator().manual_seed(0)
sd = {f'layers.{i}.weight': torch.rand(1 << 22, generator=g) for i in range(64)}
dcp.save(sd, storage_writer=dcp.FileSystemWriter('$dcp'), no_dist=True)"
fi
cargo build --release -q -p stowage-cli
cargo build --release -q -p stowage --features remote --example remote_load --example wan_proxy
s3rver=target/s3rver/node_modules/.bin/s3rver
[ -x "$s3rver" ] || npm install --silent --prefix target/s3rver s3rver@3.7.1

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
mkdir "$work/data"
"$s3rver" -d "$work/data" -a 127.0.0.1 -p "$port" -s >"$work/s3rver.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
  sleep 0.2
done
export AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
"$py" -c "
import boto3
s3 = boto3.client('s3', endpoint_url='http://127.0.0.1:$port', aws_access_key_id='S3RVER',
                  aws_secret_access_key='S3RVER', region_name='us-east-1')
s3.create_bucket(Bucket='bench')
s3.upload_file('$file', 'bench', 'big.pt')
import os
for name in os.listdir('$dcp'):
    s3.upload_file(os.path.join('$dcp', name), 'bench', 'dcp/' + name)"
target/release/examples/wan_proxy "$port" "$rate" "$latency" >"$work/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
proxy=$(head -1 "$work/proxy.port")

url=s3://bench/big.pt
echo "== $url: $(stat -c %s "$file") bytes; s3rver on port $port, wan_proxy ($rate MB/s and $latency ms per connection) on $proxy"
eager() { target/release/examples/remote_load "$url"; }
one_get() {
  curl -s -o /dev/null -w '{"mode": "one GET (curl)", "seconds": %{time_total}, "bytes": %{size_download}}\n' \
    "$AWS_ENDPOINT_URL/bench/big.pt"
}
for where in "wan_proxy:$proxy" "loopback:$port"; do
  export AWS_ENDPOINT_URL="http://127.0.0.1:${where#*:}"
  echo "=== through ${where%%:*}"
  echo "== inspect --json --no-hash (transfer)"
  target/release/stowage inspect --json --no-hash "$url" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["transfer"])'
  echo "== lazy load, reading $tensor"
  target/release/examples/remote_load "$url" "$tensor"
  echo "== eager, parallel range requests (STOWAGE_REMOTE_CONCURRENCY=16, the default)"
  for _ in $(seq "$runs"); do eager; done
  echo "== eager, one request at a time (STOWAGE_REMOTE_CONCURRENCY=1)"
  for _ in $(seq "$runs"); do STOWAGE_REMOTE_CONCURRENCY=1 eager; done
  echo "== eager, one sequential stream (STOWAGE_REMOTE_CONCURRENCY=1, STOWAGE_REMOTE_MAX_REQUEST=1 GiB)"
  for _ in $(seq "$runs"); do STOWAGE_REMOTE_CONCURRENCY=1 STOWAGE_REMOTE_MAX_REQUEST=$((1 << 30)) eager; done
  echo "== one GET of the whole object, streamed by curl into /dev/null"
  for _ in $(seq "$runs"); do one_get; done
  echo "== DCP s3://bench/dcp/ eager, items in concurrent batches (the default)"
  for _ in $(seq "$runs"); do target/release/examples/remote_load s3://bench/dcp/; done
  echo "== DCP eager, one item after another, one request each (STOWAGE_REMOTE_CONCURRENCY=1, STOWAGE_REMOTE_MAX_REQUEST=17 MiB)"
  for _ in $(seq "$runs"); do
    STOWAGE_REMOTE_CONCURRENCY=1 STOWAGE_REMOTE_MAX_REQUEST=$((17 << 20)) \
      target/release/examples/remote_load s3://bench/dcp/
  done
  echo "== DCP eager, one sequential stream (STOWAGE_REMOTE_CONCURRENCY=1, STOWAGE_REMOTE_MAX_REQUEST=1 GiB)"
  for _ in $(seq "$runs"); do
    STOWAGE_REMOTE_CONCURRENCY=1 STOWAGE_REMOTE_MAX_REQUEST=$((1 << 30)) \
      target/release/examples/remote_load s3://bench/dcp/
  done
done
