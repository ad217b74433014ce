"""Seeds for the `manifest` and `convert_manifest` fuzz targets that reach
the kernel of sixteen lanes (`content/sha256x16.rs`): a thread hashes
sixteen tensors at once only when it has sixteen of 16 KiB or more. Written
by real PyTorch into the folder given; `fuzz/seed.sh` runs this when torch
imports, and puts each file behind the targets' first byte."""
import sys

import torch

out = sys.argv[1]
torch.manual_seed(0)
# 20 tensors of 16-24 KiB, each on its own storage.
torch.save({f"t{i}": torch.randn(4096 + 64 * i) for i in range(20)}, f"{out}/sep.pt")
# 20 overlapping views of one storage.
base = torch.randn(20 * 4096 + 8192)
torch.save({f"v{i}": base[i * 4000 : i * 4000 + 5000 + i] for i in range(20)}, f"{out}/views.pt")
# bf16, int8, a transposed view and views sharing a storage, together.
a = torch.randn(130, 130)
d = {f"m{i}": torch.randn(64, 80 + i).to(torch.bfloat16) for i in range(12)}
d.update({"tr": a.t(), "a": a, "q": torch.randint(-100, 100, (20000,), dtype=torch.int8)})
d.update({f"s{i}": a[i:] for i in range(6)})
torch.save(d, f"{out}/mixed.pt")
