#!/usr/bin/env bash
# Measures stowage on a checkpoint in a local S3 server (moto, on 127.0.0.1):
# `inspect --no-hash` (bytes and requests), a lazy load touching one tensor,
# and eager loads with parallel range requests vs one request at a time vs
# few large requests (STOWAGE_REMOTE_MAX_REQUEST), against one streamed GET
# of the whole object; then the same eager loads over plain HTTP.
# docs/performance.md records the results; scripts/moto_request_cost.py
# explains moto's figures.
#
# usage: [RUNS=3] [MOTO_RUNS=1] [STOWAGE_BIN=…] scripts/remote-bench.sh [FILE.pt] [TENSOR]
#   FILE.pt defaults to /work/scratch/remote/big.pt, made here with torch when
#   missing: 256 float32 tensors of 4 MiB (1 GiB), `layers.N.weight`.
#   RUNS: runs of each HTTP measurement (and of moto's quick ones); MOTO_RUNS:
#   runs of each eager load over moto (about a second per request each).
# Needs the venv of scripts/torch-venv.sh with `pip install 'moto[server]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${STOWAGE_TORCH_PYTHON:-$HOME/.torch-venv/bin/python}"
file="${1:-/work/scratch/remote/big.pt}"
tensor="${2:-layers.100.weight}"
if [ ! -f "$file" ]; then
  mkdir -p "$(dirname "$file")"
  "$py" -c "
import torch
g = torch.Generator().manual_seed(0)
torch.save({f'layers.{i}.weight': torch.rand(1 << 20, generator=g) for i in range(256)}, '$file')"
fi
# STOWAGE_BIN: a stowage binary already built (only `inspect`'s request
# counts come from it, which do not depend on the build).
bin="${STOWAGE_BIN:-target/release/stowage}"
[ -n "${STOWAGE_BIN:-}" ] || cargo build --release -q -p stowage-cli
cargo build --release -q -p stowage --features remote --example remote_load
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The server stops when this script's end of its stdin closes.
exec 3> >("$py" 2>/dev/null -c "
import sys
from moto.server import ThreadedMotoServer
s = ThreadedMotoServer(ip_address='127.0.0.1', port=$port, verbose=False)
s.start(); sys.stdin.read(); s.stop()")
export AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_ALLOW_HTTP=true \
  AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
for _ in $(seq 100); do
  "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
  sleep 0.2
done
"$py" -c "
import boto3
s3 = boto3.client('s3', endpoint_url='$AWS_ENDPOINT_URL', aws_access_key_id='testing',
                  aws_secret_access_key='testing', region_name='us-east-1')
s3.create_bucket(Bucket='bench')
s3.upload_file('$file', 'bench', 'big.pt')"
url=s3://bench/big.pt
echo "== $url: $(stat -c %s "$file") bytes"
echo "== inspect --json --no-hash (transfer)"
"$bin" inspect --json --no-hash "$url" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["transfer"])'
echo "== lazy load, reading $tensor"
target/release/examples/remote_load "$url" "$tensor"
runs="${RUNS:-3}"
moto_runs="${MOTO_RUNS:-1}"
for c in 16 1; do
  echo "== eager load over S3, STOWAGE_REMOTE_CONCURRENCY=$c ($moto_runs runs)"
  for _ in $(seq "$moto_runs"); do
    STOWAGE_REMOTE_CONCURRENCY=$c target/release/examples/remote_load "$url"
  done
done
echo "== eager load over S3, STOWAGE_REMOTE_MAX_REQUEST=1 GiB: few large requests ($runs runs)"
for _ in $(seq "$runs"); do
  STOWAGE_REMOTE_MAX_REQUEST=$((1 << 30)) target/release/examples/remote_load "$url"
done
echo "== the same object over HTTP (scripts/range_server.py), eager, three runs each"
exec 4> >("$py" scripts/range_server.py "$(dirname "$file")" > "$(dirname "$file")/.port")
sleep 2
http="http://127.0.0.1:$(head -1 "$(dirname "$file")/.port")/$(basename "$file")"
for c in 16 1; do
  for _ in $(seq "$runs"); do
    STOWAGE_REMOTE_CONCURRENCY=$c target/release/examples/remote_load "$http"
  done
done
echo "== one GET of the whole object over HTTP, streamed by curl, for reference"
for _ in $(seq "$runs"); do curl -s -o /dev/null -w '{"seconds": %{time_total}, "bytes": %{size_download}}\n' "$http"; done
exec 4>&-
echo "== one GET of the whole object, streamed (boto3), for reference ($runs runs)"
for _ in $(seq "$runs"); do "$py" -c "
import boto3, time
s3 = boto3.client('s3', endpoint_url='$AWS_ENDPOINT_URL', aws_access_key_id='testing',
                  aws_secret_access_key='testing', region_name='us-east-1')
t = time.time(); body = s3.get_object(Bucket='bench', Key='big.pt')['Body']
n = 0
while True:
    b = body.read(16 << 20)
    if not b: break
    n += len(b)
print({'bytes': n, 'seconds': round(time.time() - t, 3)})"; done
exec 3>&-
