#!/usr/bin/env python3
"""Writes crates/stowage/tests/fixtures/promote_types.json: PyTorch's own
torch.promote_types for every pair of dtypes, null where PyTorch refuses.
usage: ~/.torch-venv/bin/python scripts/make_promotion_table.py"""
import json, os, torch

names = sorted({str(v).replace("torch.", "") for v in vars(torch).values() if isinstance(v, torch.dtype)})
table = {}
for a in names:
    row = {}
    for b in names:
        try:
            row[b] = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
        except Exception:
            row[b] = None
    table[a] = row
out = os.path.join(os.path.dirname(__file__), "..", "crates", "stowage", "tests", "fixtures", "promote_types.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "promote_types": table}, f, indent=0, sort_keys=True)
    f.write("\n")
print(out, len(names), "dtypes")
