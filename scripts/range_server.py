#!/usr/bin/env python3
"""A small HTTP server with Range support for stowage's remote tests.

Serves the files of a folder on 127.0.0.1 only (HEAD and GET, with single
`Range: bytes=a-b` requests answered 206), and plays faults by path prefix:

  /forbidden/NAME   403 for every request
  /slow/NAME        HEAD answers at once; GET waits --slow seconds first
  /short/NAME       GET sends half the bytes it declares, then closes
  /norange/NAME     Range ignored: 200 and the whole file, without ETag or
                    Accept-Ranges, as `python -m http.server` answers
  /NAME             the file, as is

With --hold SECONDS every ranged GET waits that long before it answers,
so that requests a client sends concurrently overlap at the server; GET
/_stats answers {"max_in_flight": N}, the most GETs waiting at once (held,
before their answers start) since the last /_stats, and starts counting
again.

With --stop-after N the process exits at once after answering its Nth
request, dropping open connections (a server that goes away in the middle
of a load). It prints its port on stdout once
listening, then serves until killed, stdin closes, or --stop-after is reached.

Usage: range_server.py ROOT [--stop-after N] [--slow SECONDS] [--hold SECONDS]
"""

import argparse
import http.server
import json
import os
import re
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--slow", type=float, default=30.0)
    ap.add_argument("--hold", type=float, default=0.0)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    served = {"n": 0, "in_flight": 0, "max_in_flight": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def count(self):
            with lock:
                served["n"] += 1
                return served["n"]

        def stop_if_done(self, n):
            # The whole process goes, open connections with it, as a crashed
            # server would.
            if args.stop_after and n >= args.stop_after:
                self.wfile.flush()
                os._exit(0)

        def target(self):
            path = self.path.split("?", 1)[0].lstrip("/")
            mode = ""
            for m in ("forbidden", "slow", "short", "norange"):
                if path.startswith(m + "/"):
                    mode, path = m, path[len(m) + 1:]
            full = os.path.realpath(os.path.join(root, path))
            if not full.startswith(root + os.sep) or not os.path.isfile(full):
                return mode, None
            return mode, full

        def answer(self, body):
            n = self.count()
            self.respond(body)
            self.stop_if_done(n)

        def respond(self, body):
            mode, full = self.target()
            if mode == "forbidden":
                self.send_error(403)
                return
            if full is None:
                self.send_error(404)
                return
            size = os.path.getsize(full)
            start, end = 0, size - 1
            status = 200
            rng = None if mode == "norange" else self.headers.get("Range")
            if rng:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
                if not m:
                    self.send_error(416)
                    return
                a, b = m.group(1), m.group(2)
                if a == "":
                    start, end = max(size - int(b), 0), size - 1
                else:
                    start = int(a)
                    end = min(int(b), size - 1) if b else size - 1
                if start >= size or start > end:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            if body and mode == "slow":
                time.sleep(args.slow)
            n = end - start + 1
            self.send_response(status)
            self.send_header("Content-Length", str(n))
            self.send_header("Last-Modified", "Tue, 01 Dec 2026 00:00:00 GMT")
            if mode != "norange":
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", f'"{size}"')
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if not body:
                return
            with open(full, "rb") as f:
                f.seek(start)
                data = f.read(n)
            if mode == "short":
                self.wfile.write(data[: n // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data)

        def do_HEAD(self):
            self.answer(False)

        def do_GET(self):
            if self.path == "/_stats":
                with lock:
                    body = json.dumps({"max_in_flight": served["max_in_flight"]}).encode()
                    served["max_in_flight"] = 0
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            with lock:
                served["in_flight"] += 1
                served["max_in_flight"] = max(served["max_in_flight"], served["in_flight"])
            # A request is in flight until its answer starts: counted down
            # before a byte of it is sent, so that a client that sends its
            # next request as soon as one is answered is never seen with
            # both (the count used to go down after the answer, so a
            # thread scheduled late showed one request too many).
            try:
                if args.hold and self.headers.get("Range"):
                    time.sleep(args.hold)
            finally:
                with lock:
                    served["in_flight"] -= 1
            self.answer(True)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    # Stop when the parent goes away (stdin closes), so no server outlives its test.
    threading.Thread(
        target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True
    ).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
