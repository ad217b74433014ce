"""framework="jax" and framework="mlx": each fixture's tensors as those
frameworks' arrays, equal in dtype, shape and value to torch.load's, the
values that were numpy arrays in the file kept as numpy arrays."""

import numpy as np
import pytest
import torch

import stowage
from test_load import ALL, FIXTURES_DIR, _numpy_of, _only_numpy_dtypes, torch_loads

MLX_DTYPES = {
    "bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "bfloat16", "complex64",
}


def _tensors(obj, path=(), out=None):
    out = [] if out is None else out
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _tensors(v, (*path, k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _tensors(v, (*path, i), out)
    return out


def _at(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _check(framework, array_type, name, allowed=None, to_numpy=np.asarray):
    path = FIXTURES_DIR / name
    expected, refused = torch_loads(path)
    if refused is not None:
        pytest.skip("torch refuses it")
    tensors = _tensors(expected)
    dtypes = {str(t.dtype).removeprefix("torch.") for _, t in tensors}
    if not _only_numpy_dtypes(expected) or (allowed is not None and not dtypes <= allowed):
        with pytest.raises(stowage.StowageError):
            stowage.load(path, framework=framework)
        return
    got = stowage.load(path, framework=framework)
    for where, t in tensors:
        a = _at(got, where)
        assert isinstance(a, array_type), f"{where}: {type(a).__name__}"
        want = _numpy_of(t)
        have = to_numpy(a)
        assert have.shape == want.shape, where
        assert have.dtype == want.dtype, f"{where}: {have.dtype} vs {want.dtype}"
        assert np.ascontiguousarray(have).tobytes() == np.ascontiguousarray(want).tobytes(), f"{where}: values"


@pytest.fixture
def jax_x64():
    """JAX with 64-bit types on (jax_enable_x64), as exact loads need."""
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("name", ALL)
def test_jax_arrays_are_the_tensors(name, jax_x64):
    _check("jax", jax_x64.Array, name)


def test_jax_without_x64_narrows_as_jax_does_and_says_so(tmp_path):
    jax = pytest.importorskip("jax")
    if jax.config.jax_enable_x64:
        pytest.skip("jax_enable_x64 is set in this process")
    path = tmp_path / "d.pt"
    torch.save({"d": torch.arange(3, dtype=torch.float64)}, path)
    with pytest.warns(UserWarning, match="float64"):
        got = stowage.load(path, framework="jax")
    assert got["d"].dtype == np.float32


@pytest.mark.parametrize("name", ALL)
def test_mlx_arrays_are_the_tensors(name):
    mx = pytest.importorskip("mlx.core")

    def to_numpy(a):
        # numpy's buffer protocol has no bfloat16: read its bits.
        if a.dtype == mx.bfloat16:
            import ml_dtypes

            return np.asarray(a.view(mx.uint16)).view(ml_dtypes.bfloat16)
        return np.asarray(a)

    _check("mlx", mx.array, name, MLX_DTYPES, to_numpy)


def test_numpy_values_stay_numpy_and_mlx_refuses_what_it_cannot_hold(tmp_path):
    jax = pytest.importorskip("jax")
    mx = pytest.importorskip("mlx.core")
    path = tmp_path / "v.pt"
    torch.save({"w": torch.arange(4.0), "f8": torch.zeros(2, dtype=torch.float8_e4m3fn)}, path)
    got = stowage.load(path, framework="jax")
    assert isinstance(got["w"], jax.Array) and got["f8"].dtype == np.asarray(_numpy_of(torch.zeros(1, dtype=torch.float8_e4m3fn))).dtype
    with pytest.raises(stowage.StowageError, match="float8_e4m3fn has no MLX dtype"):
        stowage.load(path, framework="mlx")
    lazy = stowage.load(path, framework="mlx", lazy=True)
    assert isinstance(lazy["w"], mx.array) and lazy["w"].dtype == mx.float32
    with pytest.raises(stowage.StowageError, match="float8_e4m3fn has no MLX dtype"):
        lazy["f8"]
