"""One rule for everything that walks values (issue 43): a 1.5 KB `.pt`
sharing one dict 2**40 times (41 distinct objects, as `torch.save`
memoizes them) goes through every call in bounded time, each finishing or
refusing with the limit named, never hanging."""

import os
import subprocess
import sys

import pytest
import torch


def _laughs(path):
    leaf = {"a": 1, "w": torch.arange(3.0)}
    for _ in range(40):
        leaf = [leaf, leaf]
    torch.save({"root": leaf}, path)


# Each call, run in a child process: prints "ok" or the error.
_CALLS = {
    "load keeps the DAG": "x = stowage.load(src)['root']; assert x[0] is x[1] and x[0][1] is x[1][0]",
    "inspect": "stowage.inspect(src)",
    "diff": "assert stowage.diff(src, src)['same']",
    "manifest": "stowage.manifest(src)",
    "scan": "stowage.scan(src)",
    "convert to .pt": "stowage.convert(src, out + '.pt')",
    "convert to .safetensors": "stowage.convert(src, out + '.safetensors'); x = stowage.load(out + '.safetensors')['root']; assert x[0] is x[1]",
    "convert to a set": "stowage.convert(src, out + '-set', to='safetensors')",
    "convert to dcp": "stowage.convert(src, out + '-dcp', to='dcp')",
    "save the loaded DAG": "stowage.save(stowage.load(src), out + '-saved.pt'); x = torch.load(out + '-saved.pt', weights_only=True)['root']; assert x[0] is x[1]",
    "safe_open": "f = stowage.safe_open(src, 'pt'); f.keys()",
}


@pytest.mark.parametrize("call", sorted(_CALLS))
def test_a_shared_structure_goes_through_every_call_in_bounded_time(tmp_path, call):
    src = tmp_path / "laughs.pt"
    _laughs(src)
    assert src.stat().st_size < 4096
    code = (
        "import sys, torch, stowage\n"
        f"src, out = {str(src)!r}, {str(tmp_path / 'out')!r}\n"
        "try:\n"
        f"    {_CALLS[call]}\n"
        "    print('ok')\n"
        "except stowage.StowageError as e:\n"
        "    print('refused:', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.strip().splitlines()[-1]
    # Finished, or refused naming the limit it hit.
    assert said == "ok" or ("limit" in said and "refused" in said), said
