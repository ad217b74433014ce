"""stowage.manifest: one state dict, one manifest, in every form PyTorch and
safetensors write it, equal to what ten lines of PyTorch compute
(docs/manifest.md)."""

import hashlib
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch
import safetensors.torch

import stowage

import _torchrun


# The reproduction docs/manifest.md gives, verbatim.
def tensor_sha256(t: torch.Tensor) -> str:
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    return hashlib.sha256(t.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def root_sha256(state_dict: dict) -> str:
    lines = sorted((k, str(v.dtype).removeprefix("torch."), ",".join(map(str, v.shape)), tensor_sha256(v))
                   for k, v in state_dict.items())
    return hashlib.sha256("".join("\t".join(l) + "\n" for l in lines).encode()).hexdigest()


def state_dict():
    g = torch.Generator().manual_seed(0)
    return {
        "embed.weight": torch.randn(16, 8, generator=g),
        "layers.0.weight": torch.randn(8, 8, generator=g),
        "layers.0.bias": torch.randn(8, generator=g).to(torch.bfloat16),
        "layers.1.weight": torch.randn(8, 8, generator=g).to(torch.float16),
        "steps": torch.arange(12, dtype=torch.int64).reshape(3, 4),
        "mask": torch.tensor([True, False, True]),
        "scale": torch.tensor(0.5),
    }


_DCP_WORKER = """
import sys
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

sys.path.insert(0, sys.argv[2])
from test_manifest import state_dict

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
dim = int(sys.argv[3])
sd = {k: distribute_tensor(v, mesh, [Shard(min(dim, v.dim() - 1))]) if v.dim() and v.shape[min(dim, v.dim() - 1)] >= dist.get_world_size() else v
      for k, v in state_dict().items()}
dcp.save(sd, checkpoint_id=sys.argv[1])
# Every rank done before any leaves: a rank that exits while another still
# talks to it aborts in gloo's teardown.
dist.barrier()
dist.destroy_process_group()
"""


def dcp_by_torchrun(tmp_path, world, dim):
    out = tmp_path / f"dcp{world}"
    worker = tmp_path / "dcp_worker.py"
    worker.write_text(_DCP_WORKER)
    _torchrun.torchrun(world, worker, out, os.path.dirname(__file__), dim,
                       before_retry=lambda: shutil.rmtree(out, ignore_errors=True))
    return out


def test_every_form_has_the_manifest_pytorch_computes(tmp_path):
    sd = state_dict()
    forms = {}
    torch.save(sd, tmp_path / "zip.pt")
    forms["zip"] = tmp_path / "zip.pt"
    torch.save(sd, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    forms["legacy"] = tmp_path / "legacy.pt"
    safetensors.torch.save_file(sd, tmp_path / "model.safetensors")
    forms["safetensors"] = tmp_path / "model.safetensors"
    stowage.convert(tmp_path / "zip.pt", tmp_path / "set", to="safetensors", max_shard_size="600B")
    forms["sharded"] = tmp_path / "set"
    import torch.distributed.checkpoint as dcp

    dcp.save(sd, checkpoint_id=tmp_path / "dcp1", no_dist=True)
    forms["dcp world 1"] = tmp_path / "dcp1"
    forms["dcp world 2, rows"] = dcp_by_torchrun(tmp_path, 2, 0)
    forms["dcp world 4, columns"] = dcp_by_torchrun(tmp_path, 4, 1)
    manifests = {name: stowage.manifest(path) for name, path in forms.items()}
    first = manifests["zip"]
    assert first["root_sha256"] == root_sha256(sd)
    assert {t["name"]: t["sha256"] for t in first["tensors"]} == {k: tensor_sha256(v) for k, v in sd.items()}
    assert [t["name"] for t in first["tensors"]] == sorted(sd)
    assert first["tensors"][0] == {"dtype": "float32", "name": "embed.weight", "shape": [16, 8],
                                   "sha256": tensor_sha256(sd["embed.weight"])}
    for name, m in manifests.items():
        assert m["tensors"] == first["tensors"], name
        assert m["root_sha256"] == first["root_sha256"], name


def test_convert_writes_the_manifest_pytorch_computes_of_its_output(tmp_path):
    # A state dict PyTorch wrote, with a transposed view (read back, and
    # said so) beside tensors hashed as they are written.
    sd = state_dict()
    torch.save(sd, tmp_path / "zip.pt")
    outputs = {
        "out.pt": {},
        "out.safetensors": {},
        "set": {"to": "safetensors", "max_shard_size": "600B"},
        "dcp": {"to": "dcp", "ranks": 3},
    }
    for name, options in outputs.items():
        said = stowage.convert(tmp_path / "zip.pt", tmp_path / name, manifest=tmp_path / f"{name}.json", **options)
        assert "back from the output" not in said, (name, said)
        with open(tmp_path / f"{name}.json") as f:
            written = json.load(f)
        assert written == stowage.manifest(tmp_path / name), name
        assert written["root_sha256"] == root_sha256(sd), name
    viewed = dict(sd, transposed=sd["layers.0.weight"].t())
    torch.save(viewed, tmp_path / "views.pt")
    said = stowage.convert(tmp_path / "views.pt", tmp_path / "views_out.pt", manifest=tmp_path / "v.json")
    assert said.rstrip().endswith(": transposed"), said
    with open(tmp_path / "v.json") as f:
        assert json.load(f)["root_sha256"] == root_sha256(viewed)


def test_a_changed_byte_or_a_swapped_pair_changes_the_manifest(tmp_path):
    sd = state_dict()
    torch.save(sd, tmp_path / "a.pt")
    before = stowage.manifest(tmp_path / "a.pt")
    # One flipped bit in one tensor: that tensor's digest, and the root.
    changed = dict(sd)
    w = sd["layers.0.weight"].clone()
    w.view(torch.int32)[3, 5] ^= 1
    changed["layers.0.weight"] = w
    torch.save(changed, tmp_path / "b.pt")
    after = stowage.manifest(tmp_path / "b.pt")
    differ = [a["name"] for a, b in zip(before["tensors"], after["tensors"]) if a != b]
    assert differ == ["layers.0.weight"] and before["root_sha256"] != after["root_sha256"]
    # Two same-shaped tensors swapped: every digest is still there, but
    # under the other name.
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    torch.save({"x": a, "y": b}, tmp_path / "xy.pt")
    torch.save({"x": b, "y": a}, tmp_path / "yx.pt")
    xy, yx = stowage.manifest(tmp_path / "xy.pt"), stowage.manifest(tmp_path / "yx.pt")
    assert sorted(t["sha256"] for t in xy["tensors"]) == sorted(t["sha256"] for t in yx["tensors"])
    assert xy["root_sha256"] != yx["root_sha256"]


def test_views_and_values_in_the_manifest(tmp_path):
    base = torch.arange(24.0).reshape(4, 6)
    torch.save({"t": base.t(), "row": base[1], "epoch": 3, "cfg": {"lr": 0.1}}, tmp_path / "v.pt")
    m = stowage.manifest(tmp_path / "v.pt")
    digests = {t["name"]: t["sha256"] for t in m["tensors"]}
    # A view's digest is that of its own elements, in its own order.
    assert digests == {"row": tensor_sha256(base[1]), "t": tensor_sha256(base.t())}
    torch.save({"t": base.t().contiguous(), "row": base[1].clone(), "epoch": 3, "cfg": {"lr": 0.1}}, tmp_path / "c.pt")
    assert stowage.manifest(tmp_path / "c.pt") == m
    torch.save({"t": base.t(), "row": base[1], "epoch": 4, "cfg": {"lr": 0.1}}, tmp_path / "e.pt")
    other = stowage.manifest(tmp_path / "e.pt")
    assert other["root_sha256"] == m["root_sha256"] and other["values_sha256"] != m["values_sha256"]


def test_a_load_checks_what_it_reads_against_a_manifest(tmp_path):
    sd = state_dict()
    safetensors.torch.save_file(sd, tmp_path / "good.safetensors")
    manifest = stowage.manifest(tmp_path / "good.safetensors")
    # The manifest of one form checks a load of another.
    torch.save(sd, tmp_path / "good.pt")
    for good in ("good.safetensors", "good.pt"):
        got = stowage.load(tmp_path / good, expect=manifest)
        assert all(torch.equal(got[k], v) for k, v in sd.items())
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    stowage.load(tmp_path / "good.pt", expect=tmp_path / "m.json", mmap=True)
    # One flipped byte inside a tensor's data: the load names that tensor
    # and both digests.
    raw = bytearray((tmp_path / "good.safetensors").read_bytes())
    header = 8 + int.from_bytes(raw[:8], "little")
    entry = json.loads(raw[8:header])["layers.1.weight"]
    raw[header + entry["data_offsets"][0] + 5] ^= 0x40
    (tmp_path / "bad.safetensors").write_bytes(bytes(raw))
    with pytest.raises(stowage.CorruptCheckpointError, match=r"layers\.1\.weight.*sha256 [0-9a-f]{64}.*sha256 [0-9a-f]{64}"):
        stowage.load(tmp_path / "bad.safetensors", expect=manifest)
    # A swapped pair of same-shaped tensors.
    swapped = dict(sd)
    swapped["embed.weight"] = sd["embed.weight"].flip(0)
    torch.save(swapped, tmp_path / "swapped.pt")
    with pytest.raises(stowage.CorruptCheckpointError, match="embed.weight"):
        stowage.load(tmp_path / "swapped.pt", expect=manifest)
    # A tensor too many, or one missing.
    torch.save({**sd, "extra": torch.ones(2)}, tmp_path / "extra.pt")
    with pytest.raises(stowage.CorruptCheckpointError, match="extra.*no such tensor"):
        stowage.load(tmp_path / "extra.pt", expect=manifest)
    torch.save({k: v for k, v in sd.items() if k != "scale"}, tmp_path / "less.pt")
    with pytest.raises(stowage.CorruptCheckpointError, match="scale"):
        stowage.load(tmp_path / "less.pt", expect=manifest)
    # A lazy load checks each tensor when its entry is first read, and the
    # names at once.
    lazy = stowage.load(tmp_path / "bad.safetensors", expect=manifest, lazy=True)
    assert torch.equal(lazy["embed.weight"], sd["embed.weight"])
    with pytest.raises(stowage.CorruptCheckpointError, match=r"layers\.1\.weight.*sha256"):
        lazy["layers.1.weight"]
    with pytest.raises(stowage.CorruptCheckpointError):  # nothing was kept: it fails again
        lazy["layers.1.weight"]
    with pytest.raises(stowage.CorruptCheckpointError, match="extra"):
        stowage.load(tmp_path / "extra.pt", expect=manifest, lazy=True)
    with pytest.raises(stowage.CorruptCheckpointError, match="scale"):
        stowage.load(tmp_path / "less.pt", expect=manifest, lazy=True)
    good = stowage.load(tmp_path / "good.pt", expect=manifest, lazy=True)
    assert all(torch.equal(good[k], v) for k, v in sd.items())



def test_diff_by_content_of_a_fine_tune_against_its_base(tmp_path):
    base = state_dict()
    torch.save(base, tmp_path / "base.pt")
    tuned = dict(base)
    tuned["layers.0.weight"] = base["layers.0.weight"] + 0.01  # trained
    tuned["head.weight"] = torch.randn(4, 8)  # a new head
    safetensors.torch.save_file(tuned, tmp_path / "tuned.safetensors")
    d = stowage.diff(tmp_path / "base.pt", tmp_path / "tuned.safetensors", content=True)
    assert [c["name"] for c in d["changed"]] == ["layers.0.weight"]
    assert [e["name"] for e in d["only_in_b"]] == ["head.weight"] and d["only_in_a"] == [] and d["moved"] == []
    assert d["identical"] == len(base) - 1
    kept = sum(v.numel() * v.element_size() for k, v in base.items() if k != "layers.0.weight")
    assert d["shared_bytes"] == kept
    assert d["b_bytes"] == sum(v.numel() * v.element_size() for v in tuned.values())


def _pae(payload_type: bytes, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding, what a DSSE signature signs."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def test_an_oms_statement_is_signed_and_verified_through_dsse(tmp_path):
    import base64

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    sd = state_dict()
    torch.save(sd, tmp_path / "model.pt")
    statement = stowage.manifest(tmp_path / "model.pt", oms=True)
    # The layout model-signing writes and reads (OMS v1.0): one resource per
    # tensor, the subject's digest over the resources' digests in order.
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://model_signing/signature/v1.0"
    resources = statement["predicate"]["resources"]
    assert [r["name"] for r in resources] == sorted(sd)
    assert all(r["algorithm"] == "sha256" and r["digest"] == tensor_sha256(sd[r["name"]]) for r in resources)
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    assert statement["subject"] == [{"name": "model.pt", "digest": {"sha256": root}}]
    assert statement["predicate"]["serialization"]["method"] == "stowage-tensors"
    # Signed unchanged, as a DSSE envelope, with a local key.
    key = ec.generate_private_key(ec.SECP256R1())
    payload_type = b"application/vnd.in-toto+json"
    body = json.dumps(statement).encode()
    envelope = {
        "payload": base64.b64encode(body).decode(),
        "payloadType": payload_type.decode(),
        "signatures": [{"sig": base64.b64encode(key.sign(_pae(payload_type, body), ec.ECDSA(hashes.SHA256()))).decode()}],
    }
    # A verifier: the signature over exactly those bytes, then every tensor
    # recomputed from what torch.load gives.
    signed = base64.b64decode(envelope["payload"])
    key.public_key().verify(base64.b64decode(envelope["signatures"][0]["sig"]),
                            _pae(envelope["payloadType"].encode(), signed), ec.ECDSA(hashes.SHA256()))
    got = json.loads(signed)
    loaded = torch.load(tmp_path / "model.pt", weights_only=True)
    assert {r["name"]: r["digest"] for r in got["predicate"]["resources"]} == {k: tensor_sha256(v) for k, v in loaded.items()}
    # The same statement from the checkpoint in another form: one signature serves both.
    safetensors.torch.save_file(sd, tmp_path / "model.safetensors")
    other = stowage.manifest(tmp_path / "model.safetensors", oms=True, name="model.pt")
    key.public_key().verify(base64.b64decode(envelope["signatures"][0]["sig"]),
                            _pae(payload_type, json.dumps(other).encode()), ec.ECDSA(hashes.SHA256()))
    # A changed statement fails.
    got["predicate"]["resources"][0]["digest"] = "0" * 64
    with pytest.raises(InvalidSignature):
        key.public_key().verify(base64.b64decode(envelope["signatures"][0]["sig"]),
                                _pae(payload_type, json.dumps(got).encode()), ec.ECDSA(hashes.SHA256()))


def test_an_object_in_memory_has_the_manifest_of_the_file_torch_saves(tmp_path):
    # A module's state dict (an OrderedDict with `_metadata`), views of one
    # storage, a transposed view, complex with and without its lazy
    # conjugate bit, a lazily negated view, bf16, numpy, and an optimizer's
    # values beside them.
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4))
    base = torch.arange(24.0).reshape(4, 6)
    obj = {
        "model": model.state_dict(),
        "views": {"t": base.t(), "row": base[1], "whole": base},
        "complex": torch.randn(3, dtype=torch.complex64),
        "conj": torch.randn(3, dtype=torch.complex64).conj(),
        "neg": torch.randn(4)._neg_view(),
        "half": torch.randn(5).to(torch.bfloat16),
        "optimizer": {"step": 7, "lr": 1e-3, "betas": (0.9, 0.999), "name": "adam"},
    }
    m = stowage.manifest(obj)
    torch.save(obj, tmp_path / "torch.pt")
    assert m == stowage.manifest(tmp_path / "torch.pt")
    # The tensors, as PyTorch computes them.
    flat = {"model." + k: v for k, v in model.state_dict().items()}
    flat.update({"views.t": base.t(), "views.row": base[1], "views.whole": base,
                 "complex": obj["complex"], "conj": obj["conj"], "neg": obj["neg"], "half": obj["half"]})
    assert {t["name"]: t["sha256"] for t in m["tensors"]} == {k: tensor_sha256(v) for k, v in flat.items()}
    # A numpy array is a tensor, as stowage.save writes it (torch.save
    # pickles numpy's own object, which a weights-only load refuses).
    obj["array"] = np.arange(6, dtype=np.int16).reshape(2, 3)
    with_array = stowage.manifest(obj)
    stowage.save(obj, tmp_path / "stowage.pt")
    assert with_array == stowage.manifest(tmp_path / "stowage.pt")
    assert {t["name"]: t["sha256"] for t in with_array["tensors"]}["array"] == tensor_sha256(torch.from_numpy(obj.pop("array")))
    # A state dict of tensors alone: the manifest of its safetensors file too.
    sd = state_dict()
    safetensors.torch.save_file(sd, tmp_path / "sd.safetensors")
    assert stowage.manifest(sd) == stowage.manifest(tmp_path / "sd.safetensors")
    # It checks a load, and signs as the file's statement does.
    stowage.load(tmp_path / "torch.pt", expect=m)
    assert stowage.manifest(obj, oms=True, name="torch.pt") == stowage.manifest(tmp_path / "torch.pt", oms=True)
    assert stowage.manifest(sd, oms=True)["subject"][0]["name"] == "model"


def test_a_manifest_in_memory_catches_a_save_that_wrote_other_bytes(tmp_path):
    # What an asynchronous save gets wrong (NeMo-RL #3312): the weights
    # change while it writes, or it writes a stale copy. The manifest taken
    # when the save was asked for tells.
    sd = state_dict()
    asked = stowage.manifest(sd)
    stale = {k: v.clone() for k, v in sd.items()}
    sd["layers.0.weight"].add_(1.0)  # the next step, before the save ran
    torch.save(sd, tmp_path / "late.pt")
    with pytest.raises(stowage.CorruptCheckpointError, match=r"layers\.0\.weight"):
        stowage.load(tmp_path / "late.pt", expect=asked)
    torch.save(stale, tmp_path / "on_time.pt")
    assert stowage.manifest(tmp_path / "on_time.pt") == asked
    # A module's state dict through torch.distributed.checkpoint's
    # asynchronous save (docs/manifest.md's example), then checked by a load.
    import warnings

    import torch.distributed.checkpoint as dcp

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.LayerNorm(4))
    asked = stowage.manifest(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no process group: torch says it saves as one rank
        dcp.async_save(model.state_dict(), checkpoint_id=tmp_path / "dcp").result()
    got = stowage.load(tmp_path / "dcp", expect=asked)
    assert all(torch.equal(got[k], v) for k, v in model.state_dict().items())
    with torch.no_grad():
        model[0].bias.zero_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.async_save(model.state_dict(), checkpoint_id=tmp_path / "dcp2").result()
    with pytest.raises(stowage.CorruptCheckpointError, match=r"0\.bias"):
        stowage.load(tmp_path / "dcp2", expect=asked)
    # What it cannot hash is refused, naming where it is.
    with pytest.raises(TypeError, match="layers"):
        stowage.manifest({"layers": [object()]})
    with pytest.raises(TypeError, match=r"Linear module: give its state_dict\(\)"):
        stowage.manifest(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="inert"):
        stowage.manifest(sd, inert=True)
