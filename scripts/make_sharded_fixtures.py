"""Make the sharded-set fixtures with Hugging Face's own writer.

usage: python scripts/make_sharded_fixtures.py   (needs torch, safetensors, huggingface_hub)

Writes crates/stowage/tests/fixtures/sharded/{safetensors,bin}/: a small model
state dict saved by `huggingface_hub.save_torch_state_dict` (safetensors) or its
`split_torch_state_dict_into_shards` and `torch.save` (`.bin`) with a 1 KB shard
limit (several shards and an index), and `expected.json` beside them: every
tensor as `torch.load`/`safetensors.torch.load_file` of the shards gives it
(name, dtype, shape, values) and, for `.bin`, which names share a storage.
"""
import json
import os
import shutil

import torch
from huggingface_hub import save_torch_state_dict, split_torch_state_dict_into_shards

root = os.path.join(os.path.dirname(__file__), "..", "crates", "stowage", "tests", "fixtures", "sharded")
torch.manual_seed(0)
embed = torch.randn(16, 8)
sd = {
    "embed.weight": embed,
    "layers.0.weight": torch.randn(8, 8),
    "layers.0.bias": torch.arange(8, dtype=torch.float16),
    "layers.1.weight": torch.randn(8, 8).to(torch.bfloat16),
    "layers.1.bias": torch.arange(8, dtype=torch.int64),
    "big": torch.arange(300, dtype=torch.float32),  # 1200 bytes: alone in its shard
    "norm.weight": torch.ones(8),
    "lm_head.weight": embed,  # tied to embed.weight
}

for safe, name in [(True, "safetensors"), (False, "bin")]:
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if safe:
        save_torch_state_dict(dict(sd), out, max_shard_size="1KB")  # it drops tied names in place
    else:
        # Hugging Face's split, each shard saved by torch.save (save_torch_state_dict
        # would drop the tied name; transformers' own .bin saves keep it).
        split = split_torch_state_dict_into_shards(
            sd, max_shard_size="1KB", filename_pattern="pytorch_model{suffix}.bin")
        for filename, names in split.filename_to_tensors.items():
            torch.save({n: sd[n] for n in names}, os.path.join(out, filename))
        with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
            json.dump({"metadata": split.metadata, "weight_map": split.tensor_to_filename}, f, indent=2)
    index = json.load(open(os.path.join(out, [f for f in os.listdir(out) if f.endswith(".index.json")][0])))
    tensors, storages = [], {}
    for shard in sorted(set(index["weight_map"].values())):
        path = os.path.join(out, shard)
        if safe:
            from safetensors.torch import load_file
            loaded = load_file(path)
        else:
            loaded = torch.load(path, weights_only=True)
        for k, t in loaded.items():
            tensors.append({
                "name": k,
                "shard": shard,
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "values": t.float().flatten().tolist(),
            })
            storages.setdefault((shard, t.untyped_storage().data_ptr()), []).append(k)
    expected = {
        "weight_map": index["weight_map"],
        "total_size": index["metadata"]["total_size"],
        "tensors": tensors,
        "shared": [sorted(v) for v in storages.values() if len(v) > 1],
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(name, sorted(os.listdir(out)))
