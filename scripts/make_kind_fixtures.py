#!/usr/bin/env python3
"""Fixtures for every tensor kind PyTorch saves (issue 13, item 5), made with
real PyTorch, and what PyTorch reports for each.

    $TORCH_PY scripts/make_kind_fixtures.py            # all, into crates/stowage/tests/fixtures/kinds/
    $TORCH_PY scripts/make_kind_fixtures.py OUT_DIR

Writes `NAME.pt` and `NAME.json` (the `kind_manifest` of what
`torch.load(NAME.pt, weights_only=False)` returns, plus whether
`weights_only=True` loads it). Fixed seeds and record keys: the same bytes
every run (`*_legacy_format` in the pre-1.6 single-stream format, whose
storage keys are pointers: not byte-stable). `hostile_*.pt` are malformed variants (sparse indices out of
range, nested offsets past the buffer, per-channel scales of the wrong
length), saved through objects whose `__reduce_ex__` names the rebuild
function directly; their JSON holds the error PyTorch gives.

Run as a module, `kind_manifest(obj)` describes any loaded object
(the interop test uses it on the files stowage writes).
"""
import collections, hashlib, io, json, os, sys, warnings

import torch

warnings.simplefilter("ignore")

LAYOUTS = {
    torch.strided: "strided",
    torch.sparse_coo: "sparse_coo",
    torch.sparse_csr: "sparse_csr",
    torch.sparse_csc: "sparse_csc",
    torch.sparse_bsr: "sparse_bsr",
    torch.sparse_bsc: "sparse_bsc",
}


def dtype_name(dt):
    return str(dt).replace("torch.", "")


def raw_bytes(t):
    t = t.detach()
    if t.is_quantized:
        t = t.int_repr()
    c = t.contiguous().reshape(-1)
    if c.numel() == 0:
        return b""
    return c.view(torch.uint8).numpy().tobytes()


def plain(t):
    """A strided component: dtype, shape, stride, offset, hash of its values."""
    return {
        "dtype": dtype_name(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "sha256": hashlib.sha256(raw_bytes(t)).hexdigest(),
    }


def describe(t):
    d = {
        "dtype": dtype_name(t.dtype),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
        "parameter": isinstance(t, torch.nn.Parameter),
    }
    if t.is_nested:
        d["layout"] = "nested"
        d["shape"] = list(torch.nested.to_padded_tensor(t, 0.0).shape)
        d["components"] = {
            "buffer": plain(t.values()),
            "sizes": plain(t._nested_tensor_size()),
            "strides": plain(t._nested_tensor_strides()),
            "offsets": plain(t._nested_tensor_storage_offsets()),
        }
        return d
    layout = LAYOUTS[t.layout]
    d["layout"] = layout
    d["shape"] = list(t.shape)
    if layout == "sparse_coo":
        d["coalesced"] = bool(t.is_coalesced())
        d["components"] = {"indices": plain(t._indices()), "values": plain(t._values())}
        d["dense_sha256"] = hashlib.sha256(raw_bytes(t.to_dense())).hexdigest()
        return d
    if layout != "strided":
        if layout in ("sparse_csr", "sparse_bsr"):
            comp = {"crow_indices": t.crow_indices(), "col_indices": t.col_indices()}
        else:
            comp = {"ccol_indices": t.ccol_indices(), "row_indices": t.row_indices()}
        comp["values"] = t.values()
        d["components"] = {k: plain(v) for k, v in comp.items()}
        d["dense_sha256"] = hashlib.sha256(raw_bytes(t.to_dense())).hexdigest()
        return d
    d["stride"] = list(t.stride())
    d["storage_offset"] = t.storage_offset()
    if t.device.type == "meta":
        return d
    d["sha256"] = hashlib.sha256(raw_bytes(t)).hexdigest()
    d["storage_nbytes"] = t.untyped_storage().nbytes()
    if t.is_quantized:
        q = t.qscheme()
        d["qscheme"] = str(q).replace("torch.", "")
        if q == torch.per_tensor_affine:
            d["scale"] = t.q_scale()
            d["zero_point"] = t.q_zero_point()
        else:
            d["axis"] = t.q_per_channel_axis()
            d["components"] = {
                "scales": plain(t.q_per_channel_scales()),
                "zero_points": plain(t.q_per_channel_zero_points()),
            }
    attrs = {k: v for k, v in vars(t).items() if not k.startswith("_")} if type(t) in (torch.Tensor, torch.nn.Parameter) else {}
    if attrs:
        d["attrs"] = attrs
    if type(t) not in (torch.Tensor, torch.nn.Parameter):
        d["class"] = f"{type(t).__module__}.{type(t).__qualname__}"
    return d


def kind_manifest(obj):
    out = []

    def walk(v, path):
        if isinstance(v, torch.Tensor):
            out.append({"path": path, **describe(v)})
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, path + [k])
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            for i, x in enumerate(v):
                walk(x, path + [i])

    walk(obj, [])
    return out


class Reduce:
    """Pickles as `f(*args)`: how the hostile files name a rebuild function directly."""

    def __init__(self, f, args):
        self.f, self.args = f, args

    def __reduce_ex__(self, proto):
        return (self.f, self.args)


class Tagged(torch.Tensor):
    """A tensor subclass: saved through `_rebuild_from_type_v2` with its class."""


def fixtures():
    torch.manual_seed(0)
    dense = torch.tensor([[0.0, 1.5, 0.0, 2.0], [0.0, 0.0, 0.0, -3.0], [4.0, 0.0, 0.5, 0.0]])
    i = torch.tensor([[0, 2, 0, 1], [3, 0, 1, 3]])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.arange(6.0).reshape(2, 3), (4, 3))
    yield "sparse_coo", {
        "coalesced": dense.to_sparse().coalesce(),
        "uncoalesced": torch.sparse_coo_tensor(i, v, (3, 4)),
        "hybrid": hybrid,
        "int_values": torch.sparse_coo_tensor(i[:, :2], torch.tensor([7, -8], dtype=torch.int32), (3, 4)),
    }
    blocks = torch.arange(1.0, 25.0).reshape(4, 6)
    blocks[0:2, 2:4] = 0
    yield "sparse_compressed", {
        "csr": dense.to_sparse_csr(),
        "csc": dense.to_sparse_csc(),
        "bsr": blocks.to_sparse_bsr((2, 2)),
        "bsc": blocks.to_sparse_bsc((2, 2)),
        "csr_f64": dense.double().to_sparse_csr(),
    }
    batched = torch.tensor([[[1.0, 0, 2], [0, 3, 0]], [[0, 0, 4], [5, 6, 0]]])
    yield "sparse_edge_cases", {
        "batched_csr": batched.to_sparse_csr(),
        "hybrid_csr": torch.arange(12.0).reshape(2, 3, 2).to_sparse_csr(dense_dim=1),
        "empty_coo": torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (3, 3)),
        "param_sparse": torch.nn.Parameter(torch.eye(3).to_sparse()),
        "int32_csr": torch.sparse_csr_tensor(
            torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1.0, 2.0]), (2, 2)
        ),
        "empty_in_nested": torch.nested.nested_tensor([torch.zeros(0), torch.ones(2)]),
    }
    x = torch.randn(3, 4)
    yield "quantized_per_channel", {
        "affine": torch.quantize_per_channel(
            x, torch.tensor([0.1, 0.05, 0.2, 0.01], dtype=torch.double), torch.tensor([0, 3, -2, 1]), 1, torch.qint8
        ),
        "float_qparams": torch.quantize_per_channel(
            x, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0.5, 1.0, -1.5]), 0, torch.quint8
        ),
        "per_tensor": torch.quantize_per_tensor(x, 0.05, 3, torch.quint8),
    }
    yield "quantized_packed", {
        "quint4x2": torch.quantize_per_tensor(torch.rand(3, 4) * 1.5, 0.1, 2, torch.quint4x2),
        "quint2x4": torch.quantize_per_tensor(torch.rand(2, 8) * 0.3, 0.1, 1, torch.quint2x4),
        "quint4x2_odd": torch.quantize_per_tensor(torch.rand(5) * 1.5, 0.1, 0, torch.quint4x2),
    }
    yield "nested", {
        "ragged": torch.nested.nested_tensor([torch.arange(3.0), torch.arange(5.0) * 2]),
        "matrices": torch.nested.nested_tensor(
            [torch.arange(6, dtype=torch.int64).reshape(2, 3), torch.arange(12, dtype=torch.int64).reshape(4, 3)]
        ),
    }
    yield "sparse_legacy_format", {
        "coo": dense.to_sparse(),
        "csr": dense.to_sparse_csr(),
    }
    yield "meta", {
        "plain": torch.empty(2, 3, device="meta"),
        "strided": torch.empty_strided((3, 2), (1, 3), dtype=torch.float16, device="meta"),
        "grad": torch.empty(4, device="meta", dtype=torch.float64, requires_grad=True),
        "scalar": torch.empty((), device="meta", dtype=torch.int8),
    }
    t = torch.arange(4.0)
    t.note = "calibrated"
    t.step = 7
    p = torch.nn.Parameter(torch.ones(2, 2))
    p.tag = 3
    yield "tensor_state", {"with_attrs": t, "param_with_attrs": p}
    yield "subclass", {"tagged": torch.arange(3.0).as_subclass(Tagged)}

    # Hostile: malformed components PyTorch's loader rejects.
    yield "hostile_sparse_coo_index", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (torch.sparse_coo, (torch.tensor([[0, 5], [1, 1]]), torch.tensor([1.0, 2.0]), torch.Size([3, 4]), False)),
        )
    }
    yield "hostile_sparse_coo_negative", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (torch.sparse_coo, (torch.tensor([[0, -1], [1, 1]]), torch.tensor([1.0, 2.0]), torch.Size([3, 4]), False)),
        )
    }
    yield "hostile_sparse_csr_col", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (
                torch.sparse_csr,
                (torch.tensor([0, 1, 2]), torch.tensor([0, 9]), torch.tensor([1.0, 2.0]), torch.Size([2, 3])),
            ),
        )
    }
    yield "hostile_sparse_csr_crow", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (
                torch.sparse_csr,
                (torch.tensor([0, 2, 1]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), torch.Size([2, 3])),
            ),
        )
    }
    yield "hostile_sparse_csr_crow_decreasing", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (
                torch.sparse_csr,
                (torch.tensor([0, 3, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), torch.Size([2, 3])),
            ),
        )
    }
    yield "hostile_sparse_bsr_blocks", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (
                torch.sparse_bsr,
                (torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, 2, 2), torch.Size([3, 4])),
            ),
        )
    }
    yield "hostile_sparse_coo_values_shape", {
        "t": Reduce(
            torch._utils._rebuild_sparse_tensor,
            (torch.sparse_coo, (torch.tensor([[0, 1], [1, 1]]), torch.tensor([1.0, 2.0, 3.0]), torch.Size([3, 4]), False)),
        )
    }
    yield "hostile_nested_negative", {
        "t": Reduce(
            torch._utils._rebuild_nested_tensor,
            (torch.arange(8.0), torch.tensor([[3], [5]]), torch.tensor([[1], [-1]]), torch.tensor([0, 3])),
        )
    }
    yield "hostile_nested_offsets", {
        "t": Reduce(
            torch._utils._rebuild_nested_tensor,
            (torch.arange(8.0), torch.tensor([[3], [5]]), torch.tensor([[1], [1]]), torch.tensor([0, 6])),
        )
    }
    yield "hostile_qscales_length", {
        "t": Reduce(
            torch._utils._rebuild_qtensor,
            (
                torch.quantize_per_tensor(torch.zeros(3, 2), 0.1, 0, torch.qint8).untyped_storage(),
                0,
                (3, 2),
                (2, 1),
                (torch.per_channel_affine, torch.tensor([0.1, 0.2], dtype=torch.double), torch.tensor([0, 0]), 0),
                False,
                collections.OrderedDict(),
            ),
        )
    }


def save_bytes(obj, name):
    b = io.BytesIO()
    # `*_legacy_format`: the pre-1.6 single-stream format.
    torch.save(obj, b, _use_new_zipfile_serialization=not name.endswith("_legacy_format"))
    return b.getvalue()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "crates", "stowage", "tests", "fixtures", "kinds")
    os.makedirs(out_dir, exist_ok=True)
    for name, obj in fixtures():
        if name == "hostile_qscales_length":
            # The storage must be a typed QInt8 storage, as `_reduce_ex_internal` wraps it.
            st = obj["t"].args[0]
            obj["t"].args = (torch.storage.TypedStorage(wrap_storage=st, dtype=torch.qint8, _internal=True),) + obj["t"].args[1:]
        data = save_bytes(obj, name)
        path = os.path.join(out_dir, name + ".pt")
        with open(path, "wb") as f:
            f.write(data)
        report = {}
        try:
            torch.load(path, weights_only=True)
            report["weights_only"] = True
        except Exception as e:
            report["weights_only"] = False
            report["weights_only_error"] = type(e).__name__
        try:
            loaded = torch.load(path, weights_only=False)
            if name.startswith("hostile"):
                # What PyTorch's weights_only loader validates: sparse invariants.
                report["loaded"] = True
            else:
                report["tensors"] = kind_manifest(loaded)
        except Exception as e:
            report["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
            f.write("\n")
        print(name, "weights_only" if report["weights_only"] else "-", report.get("error", ""))


if __name__ == "__main__":
    main()
