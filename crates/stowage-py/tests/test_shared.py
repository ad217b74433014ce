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


def test_the_issues_file_converts_to_every_format_with_its_identities(tmp_path):
    """Issue 43's file, `{"root": L40}` with `L0 = {"a": 1}`: converted to
    `.pt`, safetensors, a sharded set and a DCP, each read back, by PyTorch
    where PyTorch reads the format (`torch.load`, `dcp_to_torch_save`), with
    every level's two halves one object."""
    level = {"a": 1}
    for _ in range(40):
        level = [level, level]
    src = tmp_path / "laughs.pt"
    torch.save({"root": level}, src)
    code = (
        "import sys, torch, stowage\n"
        "from torch.distributed.checkpoint.format_utils import dcp_to_torch_save\n"
        "src, out = sys.argv[1], sys.argv[2]\n"
        "def check(x):\n"
        "    for _ in range(40):\n"
        "        assert isinstance(x, list) and x[0] is x[1], x\n"
        "        x = x[0]\n"
        "    assert x == {'a': 1}, x\n"
        "stowage.convert(src, out + '.pt')\n"
        "check(torch.load(out + '.pt', weights_only=True)['root'])\n"
        "stowage.convert(src, out + '.safetensors')\n"
        "check(stowage.load(out + '.safetensors')['root'])\n"
        "stowage.convert(src, out + '-set', to='safetensors')\n"
        "check(stowage.load(out + '-set')['root'])\n"
        "stowage.convert(src, out + '-dcp', to='dcp')\n"
        "check(stowage.load(out + '-dcp')['root'])\n"
        "dcp_to_torch_save(out + '-dcp', out + '-dcp.pt')\n"
        "check(torch.load(out + '-dcp.pt', weights_only=True)['root'])\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_a_limit_hit_says_how_to_raise_it_and_the_environment_does(tmp_path):
    """Issue 43, item 4: a load past a limit names the limit and how to
    raise it; `STOWAGE_LIMITS` sets it for every call of the package."""
    src = tmp_path / "two.pt"
    torch.save({"a": torch.ones(2), "b": torch.zeros(3)}, src)
    code = (
        "import sys, stowage\n"
        "try:\n"
        "    stowage.load(sys.argv[1])\n"
        "    print('ok')\n"
        "except stowage.StowageError as e:\n"
        "    print('refused:', e)\n"
    )

    def load(limits):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        env.pop("STOWAGE_LIMITS", None)
        if limits is not None:
            env["STOWAGE_LIMITS"] = limits
        done = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert load(None) == "ok"
    said = load("records=2")
    assert said.startswith("refused:") and "limit records" in said, said
    assert "STOWAGE_LIMITS=records=N" in said, said
    assert load("records=1000") == "ok"
