"""Structural comparison of what stowage.load returns with torch.load's."""

import collections

import torch


def storage_key(t):
    return t.untyped_storage().data_ptr() if t.untyped_storage().nbytes() else ("empty", id(t))


def same_bytes(a, b):
    if a.numel() == 0:
        return True
    if a.is_meta or b.is_meta:
        return True
    if b.is_nested:
        assert a.is_nested
        return all(same_bytes(x, y) for x, y in zip(a.unbind(), b.unbind()))
    if b.layout != torch.strided:
        assert a.layout == b.layout, f"layout {a.layout} vs {b.layout}"
        return same_bytes(a.to_dense(), b.to_dense())
    if b.is_quantized:
        assert a.is_quantized and a.qscheme() == b.qscheme()
        if b.qscheme() == torch.per_tensor_affine:
            assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
        else:
            assert a.q_per_channel_axis() == b.q_per_channel_axis()
            assert torch.equal(a.q_per_channel_scales(), b.q_per_channel_scales())
            assert torch.equal(a.q_per_channel_zero_points(), b.q_per_channel_zero_points())
        return torch.equal(a.int_repr(), b.int_repr())
    a = a.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    b = b.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def assert_same(a, b, path="root", groups=None):
    """a: stowage's object, b: torch's. Returns the sharing groups seen."""
    if groups is None:
        groups = ({}, {})
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(b, torch.Tensor):
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape"
        if b.layout == torch.strided:
            assert a.stride() == b.stride(), f"{path}: stride {a.stride()} vs {b.stride()}"
            assert a.storage_offset() == b.storage_offset(), f"{path}: offset"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad"
        assert a.is_conj() == b.is_conj() and a.is_neg() == b.is_neg(), f"{path}: lazy bits"
        assert same_bytes(a, b), f"{path}: values"
        # Sparse tensors have no storage of their own (their components do).
        if (b.layout == torch.strided or b.is_nested) and b.untyped_storage().nbytes():
            groups[0].setdefault(storage_key(b), set()).add(path)
            groups[1].setdefault(storage_key(a), set()).add(path)
    elif isinstance(b, (torch.storage.TypedStorage, torch.UntypedStorage)):
        # A storage saved on its own (legacy files): its type, dtype and bytes.
        if isinstance(b, torch.storage.TypedStorage):
            assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} vs {b.dtype}"
            a, b = a.untyped(), b.untyped()
        assert bytes(a) == bytes(b), f"{path}: bytes"
    elif isinstance(b, dict):
        assert list(a.keys()) == list(b.keys()), f"{path}: keys"
        for k in b:
            assert_same(a[k], b[k], f"{path}.{k}", groups)
        if isinstance(b, collections.OrderedDict) and hasattr(b, "_metadata"):
            assert_same(a._metadata, b._metadata, f"{path}._metadata", groups)
    elif isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{path}: len"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}.{i}", groups)
    elif isinstance(b, float) and b != b:
        assert a != a, path
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"
    return groups


def sharing(groups):
    return sorted(sorted(g) for g in groups.values())
