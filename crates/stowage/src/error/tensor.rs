//! Errors of tensors: shapes, dimensions, dtypes, views, arithmetic and gradients.

use crate::DType;

/// A tensor operation's arguments or state that PyTorch refuses: a shape,
/// a dimension, a dtype, a view, an operation's operands, a gradient.
///
/// Messages follow PyTorch's own where PyTorch has one.
///
/// Part of [`Error`](crate::Error), as [`Error::Tensor`](crate::Error::Tensor).
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum TensorError {
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
    /// A size whose byte count does not fit in memory addresses.
    #[error("size overflow: {what} ({detail})")]
    SizeOverflow {
        /// What was being sized.
        what: &'static str,
        /// The numbers involved.
        detail: String,
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
    #[error("{op}: {role}")]
    InPlaceRequiresGrad {
        /// The operation.
        op: &'static str,
        /// What the tensor is in the graph.
        role: crate::autograd::GradRole,
    },
    /// Backward reached a view made under `no_grad` whose base (or another
    /// view of its base) was written in place since, with gradients
    /// recorded: PyTorch refuses to use such a view.
    #[error("A view was created in no_grad mode and its base or another view of its base has been modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked).")]
    NoGradViewOfModifiedBase,
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
    #[error("{}", if dtype.is_floating_point() { format!("couldn't find storage object {}Storage", crate::dtype::c10_name(*dtype)) } else { "only floating-point types are supported as the default type".to_owned() })]
    DefaultDType {
        /// The dtype given.
        dtype: DType,
    },
}

crate::error::debug_is_display!(TensorError);
