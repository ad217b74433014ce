//! The kinds of tensor PyTorch saves beside plain strided ones: sparse
//! (COO and the compressed layouts), nested, and quantized per channel. Each
//! keeps its component tensors as [`Tensor`]s on the checkpoint's storages, so
//! sharing, hashing and saving treat them as any other tensor.
//!
//! NOTE [tensor kinds]: a sparse or nested [`TensorObject`](crate::checkpoint::TensorObject)
//! has no storage of its own, as in PyTorch (`t.untyped_storage()` raises).
//! Its `tensor` is then a placeholder without data (a fake storage on the
//! components' device) that carries the dtype and the logical shape: the dense
//! shape of a sparse tensor, the padded shape (`to_padded_tensor`'s) of a
//! nested one. The data lives in the components, [`TensorKind::components`].

use crate::Tensor;

/// The compressed sparse layouts (`torch.sparse_csr` …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressedLayout {
    /// Compressed rows: `crow_indices`, `col_indices`, `values`.
    Csr,
    /// Compressed columns: `ccol_indices`, `row_indices`, `values`.
    Csc,
    /// Compressed rows of blocks.
    Bsr,
    /// Compressed columns of blocks.
    Bsc,
}

/// Every compressed layout with its PyTorch name (`torch.<name>`).
const COMPRESSED: [(CompressedLayout, &str); 4] = [
    (CompressedLayout::Csr, "sparse_csr"),
    (CompressedLayout::Csc, "sparse_csc"),
    (CompressedLayout::Bsr, "sparse_bsr"),
    (CompressedLayout::Bsc, "sparse_bsc"),
];

impl CompressedLayout {
    /// PyTorch's name without `torch.` (`sparse_csr`).
    pub fn name(self) -> &'static str {
        COMPRESSED
            .iter()
            .find(|(l, _)| *l == self)
            .map_or("sparse_csr", |(_, n)| n)
    }

    /// The layout named `name` (`sparse_bsc`, or `torch.sparse_bsc`).
    pub fn from_name(name: &str) -> Option<CompressedLayout> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        COMPRESSED.iter().find(|(_, n)| *n == name).map(|(l, _)| *l)
    }

    /// True when rows are compressed (CSR, BSR); false for columns (CSC, BSC).
    pub(crate) fn compresses_rows(self) -> bool {
        matches!(self, CompressedLayout::Csr | CompressedLayout::Bsr)
    }

    /// True for the block layouts (BSR, BSC).
    pub(crate) fn is_blocked(self) -> bool {
        matches!(self, CompressedLayout::Bsr | CompressedLayout::Bsc)
    }

    /// The names PyTorch gives the compressed and plain indices
    /// (`crow_indices`/`col_indices`, or `ccol_indices`/`row_indices`).
    pub(crate) fn index_names(self) -> (&'static str, &'static str) {
        if self.compresses_rows() {
            ("crow_indices", "col_indices")
        } else {
            ("ccol_indices", "row_indices")
        }
    }
}

/// How a tensor's elements are held: PyTorch's `layout`, with the component
/// tensors of the layouts that are not strided (see NOTE [tensor kinds]).
/// The components are boxed: a strided tensor, by far the most common, then
/// carries a few words for its kind, not four tensors' room (a checkpoint
/// may hold millions of tensor objects).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum TensorKind {
    /// A plain tensor: a strided view on its storage.
    #[default]
    Strided,
    /// `torch.sparse_coo`: `indices` (int64, `[sparse_dim, nnz]`) and
    /// `values` (`[nnz, *dense_dims]`), as `t._indices()`, `t._values()`.
    SparseCoo {
        /// The indices, one column per stored element.
        indices: Box<Tensor>,
        /// The stored elements.
        values: Box<Tensor>,
        /// `t.is_coalesced()` as saved (`None`: a file older than the flag).
        coalesced: Option<bool>,
    },
    /// The compressed layouts: `compressed_indices` (`crow_indices` or
    /// `ccol_indices`), `plain_indices` (`col_indices` or `row_indices`), `values`.
    SparseCompressed {
        /// Which of CSR, CSC, BSR, BSC.
        layout: CompressedLayout,
        /// Offsets into `plain_indices`, one more than the compressed dimension.
        compressed_indices: Box<Tensor>,
        /// The plain-dimension index of each stored element (or block).
        plain_indices: Box<Tensor>,
        /// The stored elements (or blocks).
        values: Box<Tensor>,
    },
    /// A nested tensor (`torch.nested`, strided layout): tensors of different
    /// shapes viewing one flat `buffer`, as `_rebuild_nested_tensor` takes them.
    Nested {
        /// The flat buffer (`nt.values()`).
        buffer: Box<Tensor>,
        /// int64 `[n, ndim]`: each tensor's shape (`nt._nested_tensor_size()`).
        sizes: Box<Tensor>,
        /// int64 `[n, ndim]`: each tensor's strides.
        strides: Box<Tensor>,
        /// int64 `[n]`: each tensor's offset into `buffer`, in elements.
        offsets: Box<Tensor>,
    },
}

impl TensorKind {
    /// The `layout` name `inspect --json` reports: `strided`, `sparse_coo`,
    /// `sparse_csr`, `sparse_csc`, `sparse_bsr`, `sparse_bsc`, `nested`.
    pub fn layout_name(&self) -> &'static str {
        match self {
            TensorKind::Strided => "strided",
            TensorKind::SparseCoo { .. } => "sparse_coo",
            TensorKind::SparseCompressed { layout, .. } => layout.name(),
            TensorKind::Nested { .. } => "nested",
        }
    }

    /// True for [`TensorKind::Strided`].
    pub fn is_strided(&self) -> bool {
        matches!(self, TensorKind::Strided)
    }

    /// The component tensors by the names PyTorch gives them (`indices`,
    /// `values`, `crow_indices`, …; nested: `buffer`, `sizes`, `strides`,
    /// `offsets`), in the order the pickle holds them. Empty when strided.
    pub fn components(&self) -> Vec<(&'static str, &Tensor)> {
        match self {
            TensorKind::Strided => Vec::new(),
            TensorKind::SparseCoo {
                indices, values, ..
            } => vec![("indices", indices), ("values", values)],
            TensorKind::SparseCompressed {
                layout,
                compressed_indices,
                plain_indices,
                values,
            } => {
                let (c, p) = layout.index_names();
                vec![
                    (c, compressed_indices),
                    (p, plain_indices),
                    ("values", values),
                ]
            }
            TensorKind::Nested {
                buffer,
                sizes,
                strides,
                offsets,
            } => vec![
                ("buffer", buffer),
                ("sizes", sizes),
                ("strides", strides),
                ("offsets", offsets),
            ],
        }
    }
}

/// The quantization parameters of a quantized tensor (`t.qscheme()` and its
/// parameters), as `_rebuild_qtensor` takes them.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Quantization {
    /// `torch.per_tensor_affine`: `value = (q - zero_point) * scale`.
    PerTensorAffine {
        /// `t.q_scale()`.
        scale: f64,
        /// `t.q_zero_point()`.
        zero_point: i64,
    },
    /// `torch.per_channel_affine` (float64 scales, int64 zero points) or
    /// `torch.per_channel_affine_float_qparams` (floating zero points): one
    /// scale and zero point per index of dimension `axis`.
    PerChannel {
        /// `t.q_per_channel_scales()`, `[size[axis]]`.
        scales: Box<Tensor>,
        /// `t.q_per_channel_zero_points()`, `[size[axis]]`.
        zero_points: Box<Tensor>,
        /// `t.q_per_channel_axis()`.
        axis: usize,
    },
}

impl Quantization {
    /// PyTorch's name of the scheme (`per_tensor_affine`, `per_channel_affine`,
    /// `per_channel_affine_float_qparams`). PyTorch saves both per-channel
    /// schemes as `per_channel_affine` and tells them apart on load by the
    /// zero points' dtype; so does stowage.
    pub fn qscheme(&self) -> &'static str {
        match self {
            Quantization::PerTensorAffine { .. } => "per_tensor_affine",
            Quantization::PerChannel { zero_points, .. }
                if zero_points.dtype().is_floating_point() =>
            {
                "per_channel_affine_float_qparams"
            }
            Quantization::PerChannel { .. } => "per_channel_affine",
        }
    }

    /// The per-tensor `(scale, zero_point)`, `None` per channel.
    pub fn per_tensor(&self) -> Option<(f64, i64)> {
        match self {
            Quantization::PerTensorAffine { scale, zero_point } => Some((*scale, *zero_point)),
            Quantization::PerChannel { .. } => None,
        }
    }
}
