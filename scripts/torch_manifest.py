#!/usr/bin/env python3
"""Ground-truth manifest of a checkpoint, computed by real PyTorch.

Walks the object that torch.load returns and lists every tensor with the
fields of the project's `inspect --json` contract (the `stowage inspect --json`
tensor form, with `storage_group` where the binary gives `storage_key`):
path, dtype, shape, stride, storage_offset, storage identity, requires_grad,
parameter, sha256 of the logical elements in row-major order.
values_manifest lists the non-tensor leaves in the contract's "values" form.
"""
import hashlib, json, sys, collections
import torch

def dtype_name(dt):
    return str(dt).replace("torch.", "")

def walk(obj, path, out, seen_storages):
    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        sid = seen_storages.setdefault(st.data_ptr(), len(seen_storages))
        out.append({
            "path": path,
            "dtype": dtype_name(obj.dtype),
            "shape": list(obj.shape),
            "stride": list(obj.stride()),
            "storage_offset": obj.storage_offset(),
            "storage_group": sid,
            "storage_nbytes": st.nbytes(),
            "requires_grad": bool(obj.requires_grad),
            "parameter": isinstance(obj, torch.nn.Parameter),
            "sha256": hashlib.sha256(raw_bytes(obj)).hexdigest(),
        })
    elif isinstance(obj, (dict, collections.OrderedDict)):
        for k, v in obj.items():
            walk(v, path + [k if isinstance(k, (int, str)) else str(k)], out, seen_storages)
    elif isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        for i, v in enumerate(obj):
            walk(v, path + [i], out, seen_storages)

def raw_bytes(t):
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    # conj/neg views: hash the logical values (a plain .view(uint8) refuses them)
    t = t.resolve_conj().resolve_neg()
    c = t.contiguous().reshape(-1)
    if c.numel() == 0:
        return b""
    return c.view(torch.uint8).numpy().tobytes()

def values_manifest(obj):
    """The CLI contract's "values" list for a loaded object: every non-tensor
    leaf with its path and type, empty containers listed, in iteration order."""
    out = []

    def number(v):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return v

    def leaf(path, v):
        if v is None:
            return {"path": path, "type": "none", "value": None}
        if isinstance(v, bool):
            return {"path": path, "type": "bool", "value": v}
        if isinstance(v, int):
            return {"path": path, "type": "int", "value": v if abs(v) <= 2**53 else str(v)}
        if isinstance(v, float):
            return {"path": path, "type": "float", "value": number(v)}
        if isinstance(v, complex):
            return {"path": path, "type": "complex", "value": [number(v.real), number(v.imag)]}
        if isinstance(v, str):
            return {"path": path, "type": "str", "value": v}
        if isinstance(v, bytes):
            return {"path": path, "type": "bytes", "value": v.hex()}
        if isinstance(v, torch.dtype):
            return {"path": path, "type": "dtype", "value": str(v).removeprefix("torch.")}
        if isinstance(v, torch.Size):
            return {"path": path, "type": "size", "value": list(v)}
        if isinstance(v, torch.device):
            return {"path": path, "type": "device", "value": str(v)}
        raise TypeError(f"no contract type for {type(v).__name__} at {path}")

    def walk_values(path, v):
        if isinstance(v, torch.Tensor):
            return
        if isinstance(v, (dict, list, tuple)) and not isinstance(v, torch.Size):
            items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
            if not items:
                kind = "dict" if isinstance(v, dict) else "list" if isinstance(v, list) else "tuple"
                out.append({"path": path, "type": kind, "value": []})
            for k, x in items:
                walk_values(path + [k], x)
            return
        out.append(leaf(path, v))

    walk_values([], obj)
    return out

def object_groups(obj):
    """Which tensor object each tensor of walk's list is (Python's `is`): the index,
    in that list, of the first tensor that is the same object."""
    found = []

    def go(o):
        if isinstance(o, torch.Tensor):
            found.append(o)
        elif isinstance(o, (dict, collections.OrderedDict)):
            for v in o.values():
                go(v)
        elif isinstance(o, (list, tuple)) and not isinstance(o, torch.Size):
            for v in o:
                go(v)

    go(obj)
    first = {}
    return [first.setdefault(id(t), i) for i, t in enumerate(found)]

def manifest(path):
    obj = torch.load(path, weights_only=False, map_location="cpu")
    out, seen = [], {}
    walk(obj, [], out, seen)
    return out

if __name__ == "__main__":
    json.dump(manifest(sys.argv[1]), sys.stdout, indent=1)
    print()
