#!/usr/bin/env python3
"""What one request costs moto's S3 server, by object size and concurrency.

Why an eager load over moto is slow whatever its concurrency
(docs/performance.md, "Why moto"): this starts moto's server on 127.0.0.1,
uploads objects of a few sizes, and times, for each object, a HEAD, a ranged
GET of 1 byte, a ranged GET of 16 MiB, one GET of the whole object, and 16
ranged 1-byte GETs sent at once from 16 threads. Each figure is the median of
--repeat runs (default 3). Prints one JSON object per object size.

usage: moto_request_cost.py [--sizes-mib 16,128,1024] [--repeat 3]
Needs the venv of scripts/torch-venv.sh with `pip install 'moto[server]'`
(no torch needed).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import statistics
import time

from moto.server import ThreadedMotoServer

BUCKET = "cost"
# moto does not check signatures, but answers 403 to requests without one.
AUTH = {"Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=0"}


def request(port, method, key, headers=None):
    """One HTTP request straight to moto (it does not check signatures);
    the body is read whole and dropped. Returns the seconds it took."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(method, f"/{BUCKET}/{key}", headers={**AUTH, **(headers or {})})
    resp = conn.getresponse()
    while resp.read(1 << 20):
        pass
    conn.close()
    assert resp.status in (200, 206), (method, key, resp.status)
    return time.perf_counter() - start


def median_of(repeat, f):
    return round(statistics.median(f() for _ in range(repeat)), 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-mib", default="16,128,1024")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("PUT", f"/{BUCKET}", headers=AUTH)
        conn.getresponse().read()
        for mib in (int(x) for x in args.sizes_mib.split(",")):
            key = f"obj-{mib}"
            size = mib << 20
            body = os.urandom(1 << 20) * mib
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            conn.request("PUT", f"/{BUCKET}/{key}", body=body, headers=AUTH)
            assert conn.getresponse().status == 200
            del body
            r = args.repeat
            one = {"Range": "bytes=0-0"}
            mid = size // 2
            part = {"Range": f"bytes={mid}-{mid + (16 << 20) - 1}"}

            def sixteen():
                start = time.perf_counter()
                with concurrent.futures.ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda _: request(port, "GET", key, one), range(16)))
                return time.perf_counter() - start

            print(json.dumps({
                "object_mib": mib,
                "head_s": median_of(r, lambda: request(port, "HEAD", key)),
                "get_1_byte_s": median_of(r, lambda: request(port, "GET", key, one)),
                "get_16_mib_s": median_of(r, lambda: request(port, "GET", key, part)) if mib >= 16 else None,
                "get_whole_s": median_of(r, lambda: request(port, "GET", key)),
                "sixteen_concurrent_1_byte_gets_s": median_of(r, sixteen),
            }), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
