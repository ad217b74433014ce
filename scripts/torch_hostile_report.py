#!/usr/bin/env python3
"""What real PyTorch does with each hostile fixture, for hostile/README.md.

usage: torch_hostile_report.py [DIR]   (default: crates/stowage/tests/fixtures/hostile)
Run it with the python that scripts/torch-venv.sh prints.

Each file is loaded with torch.load(weights_only=True) ONLY (never False: some
files would run code), in its own subprocess with an address-space limit and a
timeout, so a bomb cannot take the machine down. Prints one line per file:
`NAME: refused: <ExceptionType>: <message>` or `NAME: ACCEPTED (...)`, plus peak
memory, and ends with 'N refused, M accepted'.
"""
import glob
import json
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "crates", "stowage", "tests", "fixtures", "hostile")
LIMIT_BYTES = 24 * 2**30
TIMEOUT_S = 120

CHILD = r"""
import json, sys, warnings, resource
warnings.simplefilter("ignore")
import torch
sys.setrecursionlimit(10000)
try:
    obj = torch.load(sys.argv[1], weights_only=True, map_location="cpu")
    out = {"accepted": True, "type": type(obj).__name__}
except BaseException as e:
    boiler = ("Weights only load failed", "(1) ", "(2) ", "Please file an issue", "Check the documentation",
              "In PyTorch 2.6", "do those steps only", "Re-running")
    lines = [l.strip().removeprefix("WeightsUnpickler error:").strip() for l in str(e).splitlines()]
    lines = [l for l in lines if l]
    keep = [l for l in lines if not any(b in l for b in boiler)]
    out = {"accepted": False, "type": type(e).__name__, "message": " | ".join(keep or lines)[:600]}
out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(json.dumps(out))
"""


def limit():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def probe(path):
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True,
                           timeout=TIMEOUT_S, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"accepted": None, "type": "timeout", "message": f"no answer in {TIMEOUT_S}s"}
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"accepted": None, "type": f"crash (exit {r.returncode})", "message": r.stderr.strip()[-300:]}


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR
    refused = accepted = 0
    for path in sorted(glob.glob(os.path.join(d, "*.pt"))):
        res = probe(path)
        name = os.path.basename(path)
        peak = f" [peak {res['peak_mib']} MiB]" if "peak_mib" in res else ""
        if res["accepted"]:
            accepted += 1
            print(f"{name}: ACCEPTED (root {res['type']}){peak}")
        else:
            refused += 1
            print(f"{name}: refused: {res['type']}: {res.get('message', '')}{peak}")
    print(f"{refused} refused, {accepted} accepted")


if __name__ == "__main__":
    main()
