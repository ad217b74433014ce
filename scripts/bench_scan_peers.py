#!/usr/bin/env python3
"""`stowage scan` against the peers' pickle scanners, in one run, by hand.

usage: bench_scan_peers.py STOWAGE_BINARY [--peers-python PY] [--dir DIR]

Run it with a python that has torch ($TORCH_PY of scripts/torch-venv.sh).
The peers live in their own environment, made once:
    python3 -m venv /tmp/peers
    /tmp/peers/bin/pip install picklescan==1.0.5 modelaudit-picklescan

Corpora, generated in DIR (nothing is copied from a peer):
  gadgets   every gadget of crates/stowage-cli/tests/it/scan_risk.rs
            (STDLIB_GADGETS, THIRD_PARTY_GADGETS: taken from the advisories
            of docs/scan-risk.md), each a torch zip whose data.pkl calls it,
            by GLOBAL+REDUCE, STACK_GLOBAL+REDUCE, INST, OBJ and NEWOBJ in
            turn, as that test writes them: each should be flagged as code
  classes   the model and config classes of that test (CLASSES), written
            the same way: a whole-model save names such classes
  plain     state dicts written by torch.save (weights, an optimizer's
            state, numbers and strings beside them): nothing to flag
  models    whole-model saves written by torch.save (nn modules, an
            nn.TransformerEncoderLayer, a class of __main__): they import
            classes, and run no code of their own
  ps-bad,   picklescan's own test samples, regenerated: the sdist of
  ps-good   picklescan 0.0.30 (PyPI) carries the test module that writes
            them (`initialize_pickle_files`, `initialize_numpy_files`; later
            releases ship the files instead), run here with torch, with
            picklescan 0.0.30 and its test imports installed into DIR
            (`pip install --target`); a sample whose gadget today's torch
            lacks is skipped. `benign*`, `int_array*` and `object_array*`
            (object arrays of ints) are ps-good; the PNG `bad_pytorch.pt`
            is left out; every other one (`malicious*`, `GHSA-*`, …) is
            ps-bad

Scanners and what counts as flagged:
  stowage           `stowage scan FILE` exits 1 (any unsafe global)
  stowage-code      `stowage scan --fail-on code FILE` exits 1
  picklescan        `picklescan -p FILE` exits 1 (dangerous globals)
  picklescan-strict `picklescan --strict -p FILE` exits 1
  modelaudit        modelaudit_picklescan.scan_file(FILE).verdict is
                    "malicious" (as code) or "suspicious"/"malicious" (any)
A failing exit of 2 (a file that could not be read whole: stowage and
picklescan both say so) is counted apart, as "unreadable".
Each file is scanned by its own process (the picklescan CLI and
ModelAudit's Python API in a loop in one process), and the total time of
each scanner over the gadget corpus is printed with the counts.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "crates", "stowage-cli", "tests", "it", "scan_risk.rs")


def lists():
    """The test's lists of globals, by constant name."""
    text = open(TEST).read()
    out = {}
    for name in ("STDLIB_GADGETS", "THIRD_PARTY_GADGETS", "CLASSES"):
        body = re.search(rf"const {name}: &\[&str\] = &\[(.*?)\];", text, re.S).group(1)
        out[name] = re.findall(r'"([^"]+)"', body)
    return out


def split(full):
    return full.split(":", 1) if ":" in full else full.rsplit(".", 1)


def pickle_calling(full, i):
    """The pickle of scan_risk.rs's `pickle`: module.name called with 'id'."""
    module, name = split(full)
    call = i % 5 if "." not in name else 1
    glob = f"c{module}\n{name}\n".encode()
    arg = b"X\x02\x00\x00\x00id"
    if call == 0:
        p = b"\x80\x02" + glob + arg + b"\x85R"
    elif call == 1:
        p = b"\x80\x04" + b"".join(b"\x8c" + bytes([len(s)]) + s.encode() for s in (module, name))
        p += b"\x93" + arg + b"\x85R"
    elif call == 2:
        p = b"(S'id'\ni" + glob[1:]
    elif call == 3:
        p = b"(" + glob + b"S'id'\no"
    else:
        p = b"\x80\x02" + glob + b")\x81"
    return p + b"."


def torch_zip(path, data_pkl):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in (("data.pkl", data_pkl), (".format_version", b"1"),
                           ("byteorder", b"little"), ("version", b"3\n")):
            z.writestr(f"archive/{name}", data)


class MyModel:  # pickled as __main__.MyModel by a whole-model save
    pass


def make(dir):
    import torch
    from torch import nn

    corpora = {}
    for kind, names in (("gadgets", lists()["STDLIB_GADGETS"] + lists()["THIRD_PARTY_GADGETS"]),
                        ("classes", lists()["CLASSES"])):
        d = os.path.join(dir, kind)
        os.makedirs(d, exist_ok=True)
        corpora[kind] = []
        for i, full in enumerate(names):
            path = os.path.join(d, f"{i:03}.pt")
            torch_zip(path, pickle_calling(full, i))
            corpora[kind].append(path)
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    opt = torch.optim.Adam(lin.parameters())
    lin(torch.randn(2, 4)).sum().backward()
    opt.step()
    plain = {
        "linear.pt": lin.state_dict(),
        "mlp.pt": nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).state_dict(),
        "lstm.pt": nn.LSTM(4, 4).state_dict(),
        "optimizer.pt": {"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                         "name": "run-1", "lr": 1e-3},
        "tensors.pt": {f"t{i}": torch.randn(16) for i in range(32)},
    }
    m = MyModel()
    m.weight = torch.ones(2)
    models = {
        "sequential.pt": nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)),
        "lstm_model.pt": nn.LSTM(4, 4),
        "conv.pt": nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.MaxPool2d(2)),
        "encoder_layer.pt": nn.TransformerEncoderLayer(8, 2, 16),
        "main_class.pt": m,
    }
    corpora["ps-bad"], corpora["ps-good"] = picklescan_samples(dir)
    for kind, objs in (("plain", plain), ("models", models)):
        d = os.path.join(dir, kind)
        os.makedirs(d, exist_ok=True)
        corpora[kind] = []
        for name, obj in objs.items():
            path = os.path.join(d, name)
            torch.save(obj, path)
            corpora[kind].append(path)
    return corpora


GENERATE = r"""
import os, re, sys, types
site, test = sys.argv[1], sys.argv[2]
sys.path[:0] = [site]
src = open(test).read()
# The module writes its samples when imported: load it without those calls,
# make each sample's writer skip one that fails, then make them.
calls = re.findall(r"(?m)^(initialize_\w+)\(\)\s*$", src)
src = re.sub(r"(?m)^(initialize_\w+\(\))\s*$", r"# \1", src)
t = types.ModuleType("test_scanner")
t.__file__ = os.path.abspath(test)
exec(compile(src, t.__file__, "exec"), t.__dict__)
def tolerant(write):
    def w(path, *a, **k):
        try:
            write(path, *a, **k)
        except Exception as e:
            print(f"skipped {os.path.basename(path)}: {type(e).__name__}: {e}", file=sys.stderr)
            for d in ("data", "data2"):
                p = os.path.join(t._root_path, d, os.path.basename(path))
                if os.path.exists(p):
                    os.remove(p)
    return w
t.initialize_pickle_file = tolerant(t.initialize_pickle_file)
t.initialize_pickle_file_from_reduce = tolerant(t.initialize_pickle_file_from_reduce)
for d in ("data", "data2"):
    os.makedirs(os.path.join(t._root_path, d), exist_ok=True)
for c in calls:
    getattr(t, c)()
"""


def picklescan_samples(dir):
    """picklescan's test samples, regenerated by its 0.0.30 test module."""
    import shutil
    import tarfile

    work = os.path.join(dir, "picklescan-0.0.30")
    site = os.path.join(work, "site")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if not os.path.exists(site):
        subprocess.run(pip + ["install", "--quiet", "--target", site, "picklescan==0.0.30", "py7zr",
                              "aiohttp", "requests", "pytest"], check=True)
    tests = os.path.join(work, "tests")
    if not os.path.exists(tests):
        subprocess.run(pip + ["download", "--quiet", "--no-deps", "--no-binary", ":all:",
                              "picklescan==0.0.30", "-d", work], check=True)
        with tarfile.open(os.path.join(work, "picklescan-0.0.30.tar.gz")) as tar:
            member = tar.getmember("picklescan-0.0.30/tests/test_scanner.py")
            os.makedirs(tests)
            with tar.extractfile(member) as src, open(os.path.join(tests, "test_scanner.py"), "wb") as dst:
                shutil.copyfileobj(src, dst)
        subprocess.run([sys.executable, "-c", GENERATE, site, os.path.join(tests, "test_scanner.py")],
                       check=True, cwd=tests)
    good, bad = [], []
    for d in ("data", "data2"):
        for name in sorted(os.listdir(os.path.join(tests, d))):
            path = os.path.join(tests, d, name)
            if name == "bad_pytorch.pt":
                continue
            (good if name.startswith(("benign", "int_array", "object_array")) else bad).append(path)
    return bad, good


MODELAUDIT = """
import json, sys
from modelaudit_picklescan import scan_file
for line in sys.stdin:
    r = scan_file(line.strip())
    print(json.dumps(str(r.verdict.value)), flush=True)
"""


def run_modelaudit(py, files):
    t = time.perf_counter()
    out = subprocess.run([py, "-c", MODELAUDIT], input="\n".join(files) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines()], time.perf_counter() - t


def exit_codes(cmd, files):
    t = time.perf_counter()
    codes = [subprocess.run(cmd + [f], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
             for f in files]
    return codes, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stowage")
    ap.add_argument("--peers-python", default="/tmp/peers/bin/python")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    dir = a.dir or tempfile.mkdtemp(prefix="stowage-scan-peers-")
    corpora = make(dir)
    picklescan = os.path.join(os.path.dirname(a.peers_python), "picklescan")
    scanners = {
        "stowage": lambda fs: exit_codes([a.stowage, "scan"], fs),
        "stowage --fail-on code": lambda fs: exit_codes([a.stowage, "scan", "--fail-on", "code"], fs),
        "picklescan": lambda fs: exit_codes([picklescan, "-p"], fs),
        "picklescan --strict": lambda fs: exit_codes([picklescan, "--strict", "-p"], fs),
        "modelaudit (malicious)": lambda fs: run_modelaudit(a.peers_python, fs),
        "modelaudit (any)": None,
    }
    kinds = ("gadgets", "classes", "plain", "models", "ps-bad", "ps-good")
    print(f"corpora in {dir}: " + ", ".join(f"{k} {len(corpora[k])}" for k in kinds))
    print("flagged/files, and (+N unreadable) where some exited 2")
    print(f"{'scanner':24}" + "".join(f"{k:>16}" for k in kinds) + f"{'gadget time':>13}")
    audit = {}
    for name, scan in scanners.items():
        row, seconds = [], None
        for kind in kinds:
            files = corpora[kind]
            unreadable = 0
            if name.startswith("modelaudit"):
                if kind not in audit:
                    audit[kind] = run_modelaudit(a.peers_python, files)
                verdicts, t = audit[kind]
                want = ("malicious",) if name.endswith("(malicious)") else ("malicious", "suspicious")
                flagged = sum(v in want for v in verdicts)
            else:
                codes, t = scan(files)
                flagged = sum(c == 1 for c in codes)
                unreadable = sum(c == 2 for c in codes)
            seconds = t if kind == "gadgets" else seconds
            row.append(f"{flagged}/{len(files)}" + (f" (+{unreadable})" if unreadable else ""))
        print(f"{name:24}" + "".join(f"{c:>16}" for c in row) + f"{seconds:12.2f}s")


if __name__ == "__main__":
    main()
