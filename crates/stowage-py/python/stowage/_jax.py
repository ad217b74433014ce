"""The JAX adapter: ``jax.Array`` leaves, made from the numpy adapter's
views (``jax.numpy.asarray``, a copy into JAX's buffer: JAX arrays are
immutable, so tensors that shared a storage in the file are separate arrays
here, equal in value). bfloat16 and the float8 types are ``ml_dtypes``',
which JAX uses too. 64-bit dtypes follow JAX's ``jax_enable_x64``: with
it off (JAX's default) JAX narrows them to 32 bits, with its own warning.
Values that were numpy arrays in the file stay numpy
arrays, as with torch."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from . import _numpy


class Adapter(_numpy.Adapter):
    def tensor(self, *args: Any) -> Any:
        view = super().tensor(*args)  # the numpy adapter's view, then a copy
        return jnp.asarray(view, dtype=view.dtype)

    def lazy_bits(self, t: Any, conj: bool, neg: bool) -> Any:
        if conj:
            t = jnp.conj(t)
        if neg:
            t = jnp.negative(t)
        return t
