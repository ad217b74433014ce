//! The one error type of stowage.
//!
//! Variants carry the numbers and names a caller needs (what was asked, what
//! the limit was), never pre-formatted prose. Context wrappers
//! ([`Error::InFile`], [`Error::AtPath`]) name the file and the object path
//! an error arose under.

use crate::{DType, Device};

/// Result alias used across stowage.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in stowage.
///
/// `Debug` prints the message, as `Display` does, so that
/// `fn main() -> stowage::Result<()>` reports an error as a person reads
/// it; `{:#?}` puts the variant's name ([`Error::name`]) before it.
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum Error {
    /// A dimension index outside `[-ndim, ndim - 1]` (0-dim tensors accept -1 and 0).
    #[error("dimension out of range (expected to be in range of [{}, {}], but got {dim})", -(*ndim.max(&1) as i64), (*ndim.max(&1) as i64) - 1)]
    DimOutOfRange {
        /// The dimension asked for.
        dim: isize,
        /// The tensor's number of dimensions.
        ndim: usize,
    },
    /// An index outside `[-size, size - 1]` along a dimension.
    #[error("index {index} is out of bounds for dimension {dim} with size {size}")]
    IndexOutOfRange {
        /// The index asked for.
        index: isize,
        /// The dimension indexed.
        dim: usize,
        /// The size of that dimension.
        size: usize,
    },
    /// A shape whose element count differs from the elements available.
    #[error("shape {shape:?} is invalid for input of size {numel}")]
    ShapeMismatch {
        /// The requested shape (with `-1` where inferred).
        shape: Vec<isize>,
        /// The element count of the input.
        numel: usize,
    },
    /// Two shapes that should agree (or broadcast) do not.
    #[error("{op}: shape {found:?} does not match {expected:?}")]
    ShapeIncompatible {
        /// The operation.
        op: &'static str,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        found: Vec<usize>,
    },
    /// `view` on a tensor whose strides cannot express the new shape without a copy.
    #[error("view size {shape:?} is not compatible with input tensor's size {size:?} and stride {stride:?}; use reshape instead")]
    ViewIncompatible {
        /// The requested shape.
        shape: Vec<usize>,
        /// The tensor's shape.
        size: Vec<usize>,
        /// The tensor's stride.
        stride: Vec<usize>,
    },
    // --- tensor arguments ---
    /// A size below -1 in a shape (only -1 may be negative: it is inferred).
    #[error("invalid shape dimension {size}")]
    NegativeSize {
        /// The size given.
        size: i64,
    },
    /// A shape with more than one size to infer (-1).
    #[error("only one dimension can be inferred (shape {shape:?})")]
    MultipleInferredDims {
        /// The shape given.
        shape: Vec<isize>,
    },
    /// A stride of another length than the shape.
    #[error("mismatch in length of strides and shape ({stride_len} vs {shape_len})")]
    StrideLengthMismatch {
        /// The number of sizes.
        shape_len: usize,
        /// The number of strides.
        stride_len: usize,
    },
    /// A list of dimensions or indices of another length than the tensor's dimensions.
    #[error("number of dims don't match in {op}: input.dim() = {ndim}, len({what}) = {given}")]
    DimCountMismatch {
        /// The operation.
        op: &'static str,
        /// What was listed (`dims`, `indices`).
        what: &'static str,
        /// The tensor's number of dimensions.
        ndim: usize,
        /// The number given.
        given: usize,
    },
    /// A dimension named twice where each may appear once.
    #[error("{op}: dim {dim} appears multiple times in the list of dims")]
    RepeatedDim {
        /// The operation.
        op: &'static str,
        /// The dimension (wrapped into `0..ndim`).
        dim: usize,
    },
    /// An operation that needs at least one dimension, on a 0-dim tensor.
    #[error("{op}() cannot be applied to a 0-dim tensor")]
    ZeroDimTensor {
        /// The operation.
        op: &'static str,
    },
    /// An operation on more dimensions than it accepts.
    #[error("{op}() expects a tensor with <= {max} dimensions, but self is {ndim}D")]
    TooManyDims {
        /// The operation.
        op: &'static str,
        /// The most dimensions it accepts.
        max: usize,
        /// The tensor's number of dimensions.
        ndim: usize,
    },
    /// A matrix operation on an operand that is not 2-D.
    #[error("{op}: {arg} must be a matrix, got {ndim}-D tensor")]
    NotAMatrix {
        /// The operation.
        op: &'static str,
        /// Which operand, as PyTorch names it (`self`, `mat2`).
        arg: &'static str,
        /// The operand's number of dimensions.
        ndim: usize,
    },
    /// A matrix product whose inner sizes differ.
    #[error("{op}: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", mat1[0], mat1[1], mat2[0], mat2[1])]
    MatmulShapes {
        /// The operation.
        op: &'static str,
        /// The shape of the first matrix.
        mat1: [usize; 2],
        /// The shape of the second matrix.
        mat2: [usize; 2],
    },
    /// A matrix product of two dtypes (PyTorch's `mm` does not promote).
    #[error("expected m1 and m2 to have the same dtype, but got: {} != {}", crate::ops::type_meta_name(*mat1), crate::ops::type_meta_name(*mat2))]
    MatmulDTypes {
        /// The first matrix's dtype.
        mat1: DType,
        /// The second matrix's dtype.
        mat2: DType,
    },
    /// An operation PyTorch has no kernel of for a dtype (its dispatch error).
    #[error("\"{op}\" not implemented for '{type_name}'")]
    NotImplementedFor {
        /// The kernel as PyTorch names it (`add_stub`, `mul_cpu`, `div_cpu`).
        op: &'static str,
        /// The dtype as c10's `ScalarType` names it (`UInt16`, `ComplexHalf`).
        type_name: &'static str,
    },
    /// A floating dtype without a complex counterpart (the 8-bit floats),
    /// met by a complex operand.
    #[error("Unknown Complex ScalarType for {}", crate::ops::scalar_type_name(*dtype))]
    NoComplexType {
        /// The dtype.
        dtype: DType,
    },
    /// Subtraction with a bool operand, which PyTorch refuses.
    #[error("{}", if *both { "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead." } else { "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead." })]
    BoolSubtraction {
        /// True when both operands are bool.
        both: bool,
    },
    /// `share_memory_` of a meta storage: only CPU bytes go into shared memory.
    #[error("{op}: only available on CPU")]
    ShareMemoryNotCpu {
        /// PyTorch's function for the strategy (`_share_fd_`, `_share_filename_`).
        op: &'static str,
    },
    /// `matmul` of a 0-dim operand.
    #[error("both arguments to matmul need to be at least 1D, but they are {dim1}D and {dim2}D")]
    MatmulZeroDim {
        /// The first operand's number of dimensions.
        dim1: usize,
        /// The second's.
        dim2: usize,
    },
    /// A dot product of two dtypes.
    #[error("dot : expected both vectors to have same dtype, but found {} and {}", crate::ops::scalar_type_name(*a), crate::ops::scalar_type_name(*b))]
    DotDTypes {
        /// The first vector's dtype.
        a: DType,
        /// The second's.
        b: DType,
    },
    /// A dot product of vectors of two sizes.
    #[error("inconsistent tensor size, expected tensor [{a}] and src [{b}] to have the same number of elements, but got {a} and {b} elements respectively")]
    DotSizes {
        /// The first vector's size.
        a: usize,
        /// The second's.
        b: usize,
    },
    /// A matrix-vector product whose sizes do not fit.
    #[error("size mismatch, got input ({}), mat ({}x{}), vec ({vec})", mat[0], mat[0], mat[1])]
    MvSizes {
        /// The matrix's shape.
        mat: [usize; 2],
        /// The vector's size.
        vec: usize,
    },
    /// A matrix-vector product of two dtypes (the result takes the vector's).
    #[error("addmv input tensors must have the same dtype, but got {}, {}, and {}", crate::ops::scalar_type_name(*vec), crate::ops::scalar_type_name(*mat), crate::ops::scalar_type_name(*vec))]
    MvDTypes {
        /// The matrix's dtype.
        mat: DType,
        /// The vector's dtype.
        vec: DType,
    },
    /// A batched product whose second stack does not fit the first.
    #[error("Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].", expected[0], expected[1], found[0], found[1])]
    BmmShapes {
        /// The batch size and inner size the first stack requires.
        expected: [usize; 2],
        /// What the second stack has.
        found: [usize; 2],
    },
    /// An operand of another dtype than the operation computes in.
    #[error("expected scalar type {} but found {}", crate::ops::scalar_type_name(*expected), crate::ops::scalar_type_name(*found))]
    ScalarTypeMismatch {
        /// The dtype required.
        expected: DType,
        /// The dtype given.
        found: DType,
    },
    /// Two shapes that do not broadcast (PyTorch's `infer_size`), at the first
    /// mismatch from the right.
    #[error("The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension {dim}")]
    SizeMismatch {
        /// The size in the first shape.
        a: usize,
        /// The size in the second.
        b: usize,
        /// The dimension of the broadcast shape.
        dim: usize,
    },
    /// A write whose operands broadcast to a shape other than its output's.
    #[error("output with shape {output:?} doesn't match the broadcast shape {broadcast:?}")]
    BroadcastOutput {
        /// The output's shape.
        output: Vec<usize>,
        /// The shape the operands broadcast to.
        broadcast: Vec<usize>,
    },
    /// A write whose output reaches one storage element from two of its
    /// elements (an expanded tensor), as ATen's `assert_no_internal_overlap`.
    #[error("unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.")]
    InternalOverlap {
        /// The operation.
        op: &'static str,
    },
    /// A write whose output shares part, not all, of an input's memory, as
    /// ATen's `assert_no_partial_overlap`.
    #[error("unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.")]
    PartialOverlap {
        /// The operation.
        op: &'static str,
    },
    /// A start dimension after the end dimension.
    #[error("{op}: start_dim ({start}) cannot come after end_dim ({end})")]
    DimOrder {
        /// The operation.
        op: &'static str,
        /// The start dimension (wrapped).
        start: usize,
        /// The end dimension (wrapped).
        end: usize,
    },
    /// `narrow` past either end of a dimension.
    #[error("start ({start}) + length ({length}) exceeds dimension size ({size})")]
    NarrowOutOfRange {
        /// The start given (negative counts from the end).
        start: isize,
        /// The length given.
        length: usize,
        /// The dimension's size.
        size: usize,
    },
    /// A step, chunk count or size of 0 where the operation needs at least 1.
    #[error("{op}: {what} must be greater than 0")]
    ZeroArgument {
        /// The operation.
        op: &'static str,
        /// The argument (`step`, `chunks`, `len(sizes)`).
        what: &'static str,
    },
    /// `split` with a split size of 0 on a dimension that is not empty.
    #[error("split_size can only be 0 if dimension size is 0, but got dimension size of {size}")]
    ZeroSplitSize {
        /// The dimension's size.
        size: usize,
    },
    /// `split_with_sizes` with sizes that do not add up to the dimension's size.
    #[error("split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {dim}), but got split_sizes={sizes:?}")]
    SplitSizesMismatch {
        /// The sizes given.
        sizes: Vec<usize>,
        /// The dimension split.
        dim: usize,
        /// Its size.
        size: usize,
    },
    /// `unfold` with a window larger than the dimension.
    #[error("maximum size for tensor at dimension {dim} is {max} but size is {size}")]
    WindowTooLarge {
        /// The dimension.
        dim: usize,
        /// The window size given.
        size: usize,
        /// The dimension's size.
        max: usize,
    },
    /// `expand` to sizes the tensor's shape does not broadcast to.
    #[error("{}", crate::layout::expand_problem(sizes, shape))]
    ExpandIncompatible {
        /// The sizes asked for (-1 keeps a size).
        sizes: Vec<isize>,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// `view(dtype)` to another element size on a layout that cannot take it.
    #[error("{problem}")]
    ViewDType {
        /// The rule that fails.
        problem: crate::layout::DTypeViewProblem,
    },
    /// `arange` bounds and step that give no sequence.
    #[error("{}", crate::tensor::arange_problem(*start, *end, *step))]
    ArangeRange {
        /// The start.
        start: f64,
        /// The end (exclusive).
        end: f64,
        /// The step.
        step: f64,
    },
    /// Dtypes PyTorch does not promote together (quantized, bits, 8-bit floats, wide unsigned).
    #[error("{}", crate::ops::promotion_problem(*a, *b))]
    NoPromotion {
        /// The operation.
        op: &'static str,
        /// One operand's dtype.
        a: DType,
        /// The other's.
        b: DType,
    },
    /// An in-place operation whose result dtype cannot be stored in the tensor's.
    #[error("result type {} can't be cast to the desired output type {}", crate::ops::scalar_type_name(*result), crate::ops::scalar_type_name(*output))]
    ResultTypeCast {
        /// The operation.
        op: &'static str,
        /// The promoted dtype of the operands.
        result: DType,
        /// The tensor's dtype.
        output: DType,
    },
    /// A name with a NUL byte where the operating system takes a C string.
    #[error("name {name:?} contains a NUL byte")]
    NulInName {
        /// The name given.
        name: String,
    },
    // --- end of tensor arguments ---
    /// A layout reaching past the end of its storage.
    #[error("layout needs {needed} bytes but the storage holds {nbytes} (shape {shape:?}, stride {stride:?}, offset {offset}, {element_size}-byte elements)")]
    OutOfStorage {
        /// Bytes the layout reaches (offset + furthest element + 1, times element size).
        needed: u128,
        /// Bytes the storage holds.
        nbytes: usize,
        /// Shape of the layout.
        shape: Vec<usize>,
        /// Stride of the layout, in elements.
        stride: Vec<usize>,
        /// Storage offset, in elements.
        offset: usize,
        /// Element size in bytes.
        element_size: usize,
    },
    /// A size whose byte count does not fit in memory addresses.
    #[error("size overflow: {what} ({detail})")]
    SizeOverflow {
        /// What was being sized.
        what: &'static str,
        /// The numbers involved.
        detail: String,
    },
    /// Storage sizes that must agree differ.
    #[error("{op}: size mismatch: destination has {dst} bytes, source has {src}")]
    StorageSizeMismatch {
        /// The operation.
        op: &'static str,
        /// Destination size in bytes.
        dst: usize,
        /// Source size in bytes.
        src: usize,
    },
    /// An operation a dtype does not support.
    #[error("{op} is not supported for dtype {dtype}")]
    DTypeUnsupported {
        /// The operation.
        op: &'static str,
        /// The dtype.
        dtype: DType,
    },
    /// A dtype other than the one required.
    #[error("{op}: expected dtype {expected}, found {found}")]
    DTypeMismatch {
        /// The operation.
        op: &'static str,
        /// The dtype required.
        expected: DType,
        /// The dtype found.
        found: DType,
    },
    /// A typed view of a tensor whose elements are not laid out row-major
    /// without gaps (a slice cannot show them).
    #[error("{op}: the tensor is not contiguous (shape {shape:?}, stride {stride:?}); call contiguous() first")]
    NotContiguous {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        stride: Vec<usize>,
    },
    /// A typed view of elements whose address is not a multiple of the
    /// element type's alignment (a storage over part of a mapped file, say).
    #[error("{op}: the {dtype} elements start at address {address:#x}, which is not aligned to {align} bytes")]
    Misaligned {
        /// The operation.
        op: &'static str,
        /// The tensor's dtype.
        dtype: DType,
        /// The address of the first element.
        address: usize,
        /// The alignment the element type needs, in bytes.
        align: usize,
    },
    /// A mutable view of a tensor some of whose elements share memory (an
    /// expanded dimension, an overlapping `as_strided`): a mutable view would
    /// alias itself.
    #[error("{op}: the elements of a tensor of shape {shape:?} and stride {stride:?} overlap, so it has no mutable view")]
    OverlappingElements {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        stride: Vec<usize>,
    },
    /// A dtype name PyTorch does not have.
    #[error("unknown dtype {name:?}")]
    UnknownDType {
        /// The name given.
        name: String,
    },
    /// A device string PyTorch would not parse.
    #[error("invalid device string {text:?}")]
    InvalidDevice {
        /// The text given.
        text: String,
    },
    /// Data access on a storage that has no bytes (meta device, fake tensors).
    #[error("{op}: not available for '{device}' device type (the storage has no data)")]
    NoData {
        /// The operation.
        op: &'static str,
        /// The storage's device.
        device: Device,
    },
    /// Resizing a storage whose backing cannot change size.
    #[error("Trying to resize storage that is not resizable")]
    NotResizable,
    /// An allocation the system refused.
    #[error("failed to allocate {nbytes} bytes")]
    AllocationFailed {
        /// The size requested.
        nbytes: usize,
    },
    /// `item()` on a tensor with other than one element.
    #[error("a tensor with {numel} elements cannot be converted to a scalar")]
    NotAScalar {
        /// The tensor's element count.
        numel: usize,
    },
    /// `requires_grad` asked of a tensor whose dtype has no gradients.
    #[error("only Tensors of floating point and complex dtype can require gradients, not {dtype}")]
    GradNotFloat {
        /// The tensor's dtype.
        dtype: DType,
    },
    /// `requires_grad_(false)` on a tensor computed from others.
    #[error("you can only change requires_grad flags of leaf variables; use detach() for a tensor without history")]
    NotALeaf,
    /// `backward` on a tensor that does not require grad.
    #[error("element 0 of tensors does not require grad and does not have a grad_fn")]
    NoGradFn,
    /// `backward()` without a gradient on a tensor of more than one element.
    #[error("grad can be implicitly created only for scalar outputs, not for shape {shape:?}")]
    BackwardNonScalar {
        /// The output's shape.
        shape: Vec<usize>,
    },
    /// A gradient whose shape or dtype differs from its tensor's.
    #[error("{op}: gradient of shape {found:?} and dtype {found_dtype} for a tensor of shape {expected:?} and dtype {expected_dtype}")]
    GradMismatch {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        expected: Vec<usize>,
        /// The tensor's dtype.
        expected_dtype: DType,
        /// The gradient's shape.
        found: Vec<usize>,
        /// The gradient's dtype.
        found_dtype: DType,
    },
    /// An in-place write, while gradients are recorded, to a tensor whose
    /// gradient it would falsify (PyTorch refuses the first two roles too).
    #[error("{op}: {role} that requires grad is being used in an in-place operation")]
    InPlaceRequiresGrad {
        /// The operation.
        op: &'static str,
        /// What the tensor is in the graph.
        role: crate::autograd::GradRole,
    },
    /// Backward reached an operation whose saved tensor has been written in
    /// place since it was saved (PyTorch's version check of saved tensors).
    #[error(
        "one of the variables needed for gradient computation has been modified by an inplace operation: a {} tensor of shape {shape:?}, saved by {op}, is at version {version}; expected version {expected} instead",
        dtype.name()
    )]
    SavedTensorModified {
        /// The recorded operation that saved it (`MulBackward0`).
        op: &'static str,
        /// The saved tensor's dtype.
        dtype: DType,
        /// The saved tensor's shape.
        shape: Vec<usize>,
        /// Its storage's version now.
        version: u64,
        /// Its storage's version when it was saved.
        expected: u64,
    },
    /// An I/O error. The file it concerned is named once, by the
    /// [`Error::InFile`] around it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Two tensors would be saved under one name (a safetensors file names
    /// each tensor once).
    #[error("two tensors are saved under the name {name:?}")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A shard of a sharded set lacks a tensor its index puts in it.
    #[error("the index puts tensor {name:?} in shard {shard:?}, which does not hold it")]
    ShardLacksTensor {
        /// The tensor's name.
        name: String,
        /// The shard's file name.
        shard: String,
    },
    /// A storage shrank while a save was reading it.
    #[error("the storage changed size while the file was written: the tensor needs {needed} bytes, the storage holds {nbytes}")]
    StorageShrank {
        /// Bytes the tensor needs.
        needed: usize,
        /// Bytes the storage held.
        nbytes: usize,
    },
    /// A shared-memory object (named as `shm_open` names it, or described where
    /// it has no name) could not be created, opened, sized or mapped.
    #[error("shared memory {name}: {source}")]
    SharedMemory {
        /// The object's name, or what was being done.
        name: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A pickle the machine could not read.
    #[error("pickle: {0}")]
    Pickle(#[from] crate::checkpoint::pickle::PickleError),
    /// A value the pickle writer could not write (a string longer than protocol 2
    /// holds, a global with a newline, a full memo).
    #[error("pickle: {0}")]
    PickleWrite(crate::checkpoint::pickle::WriteError),
    /// A zip archive that could not be read or written.
    #[error("zip: {0}")]
    Zip(#[from] crate::checkpoint::zip::ZipError),
    /// A safetensors file the `safetensors` crate refused.
    #[cfg(feature = "safetensors")]
    #[error("safetensors: {0}")]
    Safetensors(#[from] safetensors::SafeTensorError),
    /// A global outside PyTorch's `weights_only` allowlist; nothing was constructed.
    #[error("refused global {module}.{name}: not in PyTorch's weights_only allowlist, so it is never constructed")]
    GlobalNotAllowed {
        /// The module named.
        module: String,
        /// The name within it.
        name: String,
    },
    /// A value PyTorch's `weights_only` loader refuses (an inert object, a
    /// numpy array, a `datetime` …), met while saving a torch checkpoint: it
    /// cannot be written so that `torch.load(weights_only=True)` reads it.
    ///
    /// [`Checkpoint::drop_objects`](crate::Checkpoint::drop_objects) drops
    /// such values first.
    #[error("cannot save {class} at {path:?}: torch.load(weights_only=True) refuses it")]
    NotSaveable {
        /// The value's path, dotted (`""`: the root).
        path: String,
        /// Its class, `module.name`.
        class: String,
    },
    /// A pickle object of the wrong shape where PyTorch expects another.
    #[error("{context}: expected {expected}, found {found}")]
    BadObject {
        /// Where in the checkpoint's meaning.
        context: &'static str,
        /// What was expected.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// A sparse, nested or per-channel quantized tensor whose components break
    /// an invariant PyTorch's loader checks (`_validate_loaded_sparse_tensors`,
    /// `_nested_view_from_buffer`, `_rebuild_qtensor`).
    #[error("{layout} tensor: {invariant} (found {found}, bound {bound})")]
    BadTensorKind {
        /// The tensor's layout or scheme (`sparse_coo`, `nested`, `per_channel_affine`).
        layout: &'static str,
        /// The invariant broken, as PyTorch states it (`0 <= index < size`).
        invariant: &'static str,
        /// The offending value.
        found: i64,
        /// The bound it had to respect.
        bound: i64,
    },
    /// Something PyTorch can write that stowage recognises but does not support.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What it is.
        what: String,
    },
    /// A file that is not a checkpoint stowage reads.
    #[error("not a checkpoint: {detail}")]
    NotACheckpoint {
        /// Why.
        detail: String,
    },
    /// A record the checkpoint references but does not hold.
    #[error("missing record {name}")]
    MissingRecord {
        /// The record's name.
        name: String,
    },
    /// A record whose size is not what the pickle declares.
    #[error("record {name} holds {found} bytes, expected {expected}")]
    RecordSize {
        /// The record's name.
        name: String,
        /// Bytes expected.
        expected: u64,
        /// Bytes found (or claimed).
        found: u64,
    },
    /// A deflated record declaring more bytes than its compressed data can expand to.
    #[error("record {name} declares {declared} bytes, more than its {compressed} compressed bytes can inflate to")]
    ImplausibleRecord {
        /// The record's name.
        name: String,
        /// Bytes the archive declares.
        declared: u64,
        /// Compressed bytes present.
        compressed: u64,
    },
    /// A resource limit that protects against hostile input.
    #[error("limit exceeded: {limit} reached {value} (at most {max})")]
    LimitExceeded {
        /// The limit.
        limit: &'static str,
        /// The count that went past it (where counting stopped).
        value: u64,
        /// The limit's value.
        max: u64,
    },
    /// One storage saved as two dtypes (PyTorch refuses this too).
    #[error("cannot save multiple tensors or storages that view the same data as different types (storage {key}: {first} and {second})")]
    SaveConflict {
        /// The storage's key.
        key: String,
        /// The dtype it was first saved as.
        first: DType,
        /// The conflicting dtype.
        second: DType,
    },
    /// An error in a file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error in a record of an archive.
    #[error("record {name}: {source}")]
    InRecord {
        /// The record.
        name: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error in a storage of a checkpoint.
    #[error("storage {key}: {source}")]
    InStorage {
        /// The storage key.
        key: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// An error at an object path (`model.layers.0.weight`).
    #[error("{path}: {source}")]
    AtPath {
        /// The dotted path.
        path: String,
        /// What went wrong.
        source: Box<Error>,
    },
    /// A file shorter than the private mapping asked of it (PyTorch's `from_file` words).
    #[error("file {} size {size} is smaller than the required mapping size {nbytes}", path.display())]
    FileTooSmall {
        /// The file.
        path: std::path::PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The bytes asked for.
        nbytes: usize,
    },
    /// `pin_memory` of a storage that is not in host memory.
    #[error("cannot pin a '{device}' storage: only CPU memory can be pinned")]
    NotPinnable {
        /// The storage's device.
        device: Device,
    },
    /// The kernel refused to lock pages in memory.
    #[error("could not pin {nbytes} bytes in memory (locked-memory limit {}): {source}", limit.map_or("unlimited".to_string(), |l| format!("{l} bytes")))]
    PinFailed {
        /// The bytes asked for.
        nbytes: usize,
        /// The process's `RLIMIT_MEMLOCK` soft limit, if finite.
        limit: Option<u64>,
        /// The error `mlock` gave.
        source: std::io::Error,
    },
    /// A storage constructor called with arguments PyTorch refuses
    /// (`torch.FloatStorage(1, 2)`, `TypedStorage(wrap_storage=s)` without a dtype, …).
    #[error("{}\n{problem}", constructor.expected_forms())]
    StorageArguments {
        /// The constructor called.
        constructor: crate::typed_storage::StorageConstructor,
        /// What was wrong.
        problem: crate::typed_storage::StorageArgProblem,
    },
    /// A typed-storage element index outside `[-size, size - 1]`.
    #[error("index {index} out of range for storage of size {size}")]
    StorageIndexOutOfRange {
        /// The index asked for.
        index: isize,
        /// The storage's size in elements.
        size: usize,
    },
    /// A quantized typed storage asked to live on a device other than the cpu.
    #[error("Cannot create {} storage with quantized dtype", device.name().to_uppercase())]
    QuantizedStorageDevice {
        /// The device type asked for.
        device: crate::DeviceType,
    },
    /// A dtype without a legacy storage class where one is needed (PyTorch's `KeyError`).
    #[error("dtype {dtype} is not recognized")]
    NoLegacyStorageClass {
        /// The dtype.
        dtype: DType,
    },
    /// A name that is not one of the 17 legacy storage classes.
    #[error("pickle storage type \"{name}\" is not recognized")]
    UnknownStorageType {
        /// The name given.
        name: String,
    },
    /// A value outside what the element type can hold (c10's `checked_convert`).
    #[error("value cannot be converted to type {type_name} without overflow")]
    ValueOverflow {
        /// The element type as PyTorch names it (`uint8_t`, `int32`, `c10::Half`).
        type_name: &'static str,
    },
    /// A complex value given where a real one is required.
    #[error("{}", if *integer { "'complex' object cannot be interpreted as an integer" } else { "must be real number, not complex" })]
    ComplexNotReal {
        /// True when an integer was required.
        integer: bool,
    },
    /// A default dtype PyTorch refuses (only float64, float32, float16 and bfloat16 may be).
    #[error("{}", if dtype.is_floating_point() { format!("couldn't find storage object {}Storage", crate::typed_storage::c10_name(*dtype)) } else { "only floating-point types are supported as the default type".to_owned() })]
    DefaultDType {
        /// The dtype given.
        dtype: DType,
    },
    /// Nothing at a path of a checkpoint's object ([`Checkpoint::get`](crate::Checkpoint::get)).
    #[error("no value at {path:?}")]
    ValueNotFound {
        /// The dotted path asked for (`""` is the root).
        path: String,
    },
    /// A value of another kind than the one asked for.
    #[error("value at {path:?}: expected {expected}, found {found}")]
    ValueType {
        /// The dotted path of the value (`""` is the root).
        path: String,
        /// The kind asked for (`int`, `dict`, ...).
        expected: &'static str,
        /// The value's kind.
        found: &'static str,
    },
    /// A byte range that does not lie inside a storage.
    #[error("bytes {offset}..+{len} are outside the storage of {nbytes} bytes")]
    StorageRange {
        /// The first byte asked for.
        offset: usize,
        /// How many bytes were asked for.
        len: usize,
        /// The storage's size.
        nbytes: usize,
    },
}

impl Error {
    /// The variant's name (`"InFile"`, `"OutOfStorage"`), for a program
    /// that reports or counts errors by kind.
    pub fn name(&self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            write!(f, "Error::{}: ", self.name())?;
        }
        std::fmt::Display::fmt(self, f)
    }
}

/// An error and its causes on one line, `outer: cause: root cause`: how the
/// command line and the scan report's JSON write an error.
///
/// A cause whose message the line already holds is left out (many errors,
/// [`Error::Io`] among them, print their source in their own message), and
/// line breaks inside messages become spaces.
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_the_message_and_alternate_debug_names_the_variant() {
        let e = Error::InFile {
            path: "x.pt".into(),
            source: Box::new(Error::NotAScalar { numel: 2 }),
        };
        // What `fn main() -> stowage::Result<()>` prints after "Error: ".
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(e.to_string().starts_with("x.pt: "), "{e}");
        assert_eq!(format!("{e:#?}"), format!("Error::InFile: {e}"));
        assert_eq!(e.name(), "InFile");
    }
}
