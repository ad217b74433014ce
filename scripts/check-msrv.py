#!/usr/bin/env python3
"""Checks that the workspace's `rust-version` is true: no package the build
resolves on this platform (loom's model-check tree, under `--cfg loom`, aside)
declares a newer minimum Rust than the workspace does. Run by `.ci/run`.

usage: check-msrv.py   (from the repository root; needs cargo and Cargo.lock)
"""
import json
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split(".")[:2])


meta = json.loads(
    subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--locked",
         "--filter-platform", "x86_64-unknown-linux-gnu"]
    )
)
resolved = {node["id"] for node in meta["resolve"]["nodes"]}
members = set(meta["workspace_members"])
declared = {version(p["rust_version"]) for p in meta["packages"] if p["id"] in members}
if len(declared) != 1:
    sys.exit(f"check-msrv: the workspace members declare {sorted(declared)}, expected one rust-version")
(ours,) = declared
newer = sorted(
    (version(p["rust_version"]), p["name"], p["version"])
    for p in meta["packages"]
    if p["id"] in resolved and p["id"] not in members and p.get("rust_version")
    and version(p["rust_version"]) > ours
)
if newer:
    for need, name, ver in newer:
        print(f"check-msrv: {name} {ver} needs Rust {need[0]}.{need[1]}", file=sys.stderr)
    sys.exit(f"check-msrv: rust-version {ours[0]}.{ours[1]} is false; raise it to "
             f"{newer[-1][0][0]}.{newer[-1][0][1]}")
highest = max(
    (version(p["rust_version"]) for p in meta["packages"]
     if p["id"] in resolved and p.get("rust_version")),
    default=ours,
)
print(f"check-msrv: rust-version {ours[0]}.{ours[1]}; the dependencies need at most "
      f"{highest[0]}.{highest[1]}")
