//! The storage model's walk-through (`stowage demo`) as assertions against
//! the public API: one storage under many views, `set_`, dtypes over one
//! storage, `data_ptr`s, meta tensors, a gradient's own storage, and every
//! error as a typed value.

use stowage::layout::{DTypeViewProblem, Layout};
use stowage::{DType, Device, Error, Result, Scalar, Tensor, UntypedStorage};
use stowage::{StorageError, TensorError};

/// `torch.arange(12.).view(3, 4)`.
fn grid() -> Tensor {
    Tensor::arange(0.0, 12.0, 1.0, DType::Float32)
        .and_then(|t| t.view(&[3, 4]))
        .expect("arange(12).view(3, 4)")
}

/// The storage's address as every view of it reports it.
fn storage_ptr(t: &Tensor) -> usize {
    t.untyped_storage().data_ptr()
}

#[test]
fn ones_has_a_twelve_byte_storage() -> Result<()> {
    let t = Tensor::ones(&[3], DType::Float32)?;
    assert_eq!(t.to_string(), "tensor([1., 1., 1.])");
    let s = t.untyped_storage();
    assert_eq!((s.nbytes(), s.size(), s.element_size()), (12, 12, 1));
    assert_eq!(s.tolist()?, [0, 0, 128, 63].repeat(3));
    assert_eq!(
        s.to_string(),
        " 0\n 0\n 128\n 63\n".repeat(3) + "[stowage.UntypedStorage(device=cpu) of size 12]"
    );
    assert_eq!((t.element_size(), t.nbytes(), t.numel()), (4, 12, 3));
    assert_eq!(
        (t.shape(), t.stride(), t.storage_offset()),
        (&[3][..], &[1][..], 0)
    );
    assert!(t.is_contiguous());
    Ok(())
}

#[test]
fn clone_fill_and_set() -> Result<()> {
    let mut t = Tensor::ones(&[3], DType::Float32)?;
    let old = t.untyped_storage().clone(); // a handle, as `old = t.untyped_storage()`
    assert!(old.is_same(t.untyped_storage()));

    let s = t.untyped_storage().deep_clone()?;
    assert!(!s.is_same(&old));
    assert_ne!(s.data_ptr(), old.data_ptr());
    assert_eq!(s.tolist()?, old.tolist()?);

    s.fill_(0)?;
    assert_eq!(s.tolist()?, vec![0; 12]);
    assert_eq!(
        t.to_string(),
        "tensor([1., 1., 1.])",
        "the clone's bytes are its own"
    );

    t.set_(&s, 0, &[3], &[1])?;
    assert_eq!(t.to_string(), "tensor([0., 0., 0.])");
    assert!(t.untyped_storage().is_same(&s));
    assert_eq!(t.data_ptr(), s.data_ptr());
    assert_eq!(
        old.tolist()?,
        [0, 0, 128, 63].repeat(3),
        "set_ leaves the old storage alone"
    );

    // set_ with a size and stride of its own (every other element), then an offset.
    s.copy_(&old)?;
    t.set_(&s, 0, &[2], &[2])?;
    assert_eq!((t.shape(), t.stride()), (&[2][..], &[2][..]));
    assert_eq!(t.to_vec::<f32>()?, vec![1.0, 1.0]);
    t.set_(&s, 2, &[1], &[1])?;
    assert_eq!(t.data_ptr(), s.data_ptr() + 8);
    Ok(())
}

#[test]
fn views_report_the_base_storage_data_ptr() -> Result<()> {
    let b = grid();
    let base = storage_ptr(&b);
    let mut views = vec![
        ("b.view(4, 3)", b.view(&[4, 3])?),
        ("b.view(-1)", b.view(&[-1])?),
        ("b.reshape(2, 6)", b.reshape(&[2, 6])?),
        (
            "b[1:, ::2]",
            b.slice(0, Some(1), None, 1)?.slice(1, None, None, 2)?,
        ),
        ("b[-2:]", b.slice(0, Some(-2), None, 1)?),
        ("b[2]", b.index(2)?),
        ("b[-1]", b.index(-1)?),
        ("b[:, 1]", b.select(1, 1)?),
        ("b.narrow(1, 1, 2)", b.narrow(1, 1, 2)?),
        ("b.t()", b.t()?),
        ("b.transpose(0, 1)", b.transpose(0, 1)?),
        ("b.permute(1, 0)", b.permute(&[1, 0])?),
        ("b.unsqueeze(0)", b.unsqueeze(0)?),
        ("b.unsqueeze(0).squeeze()", b.unsqueeze(0)?.squeeze()),
        ("b.flatten()", b.flatten(0, -1)?),
        ("b.unflatten(1, (2, 2))", b.unflatten(1, &[2, 2])?),
        ("b[0].expand(5, 4)", b.index(0)?.expand(&[5, 4])?),
        ("b.diagonal()", b.diagonal(0, 0, 1)?),
        ("b.diagonal(1)", b.diagonal(1, 0, 1)?),
        ("b[0].unfold(0, 2, 1)", b.index(0)?.unfold(0, 2, 1)?),
        ("b.as_strided((3,), (5,), 1)", b.as_strided(&[3], &[5], 1)?),
        ("b.view(torch.uint8)", b.view_dtype(DType::UInt8)?),
        ("b.view(torch.int32)", b.view_dtype(DType::Int32)?),
        ("b.contiguous()", b.contiguous()?),
    ];
    views.extend(b.split(2, 1)?.into_iter().map(|c| ("b.split(2, 1)[i]", c)));
    views.extend(b.chunk(3, 0)?.into_iter().map(|c| ("b.chunk(3)[i]", c)));
    views.extend(b.unbind(1)?.into_iter().map(|c| ("b.unbind(1)[i]", c)));
    assert_eq!(views.len(), 24 + 2 + 3 + 4);
    for (python, v) in &views {
        assert_eq!(storage_ptr(v), base, "{python}");
        assert!(v.shares_storage_with(&b), "{python}");
        assert!(v.untyped_storage().is_same(b.untyped_storage()), "{python}");
    }
    Ok(())
}

#[test]
fn offset_views_start_inside_the_storage() -> Result<()> {
    let b = grid();
    let base = storage_ptr(&b);
    assert_eq!(b.data_ptr(), base);
    let cases = [
        (b.index(2)?, 8),
        (b.select(1, 1)?, 1),
        (b.slice(0, Some(1), None, 1)?.slice(1, None, None, 2)?, 4),
        (b.narrow(1, 3, 1)?, 3),
        (b.diagonal(1, 0, 1)?, 1),
        (b.diagonal(-1, 0, 1)?, 4),
        (b.as_strided(&[2], &[1], 10)?, 10),
    ];
    for (v, offset) in &cases {
        assert_eq!(v.storage_offset(), *offset);
        assert_eq!(v.data_ptr(), base + offset * v.element_size());
        assert_ne!(v.data_ptr(), storage_ptr(v));
    }
    // The same bytes as uint8: the offset counts bytes, data_ptr is unchanged.
    let row = b.index(2)?.view_dtype(DType::UInt8)?;
    assert_eq!((row.storage_offset(), row.element_size()), (32, 1));
    assert_eq!(row.data_ptr(), base + 32);
    Ok(())
}

#[test]
fn a_write_through_one_view_is_seen_through_another() -> Result<()> {
    let b = grid();
    let r = b.index(2)?;
    r.set(&[1], 100.0)?;
    assert_eq!(b.get(&[2, 1])?, Scalar::Float(100.0));
    assert_eq!(b.t()?.get(&[1, 2])?, Scalar::Float(100.0));
    assert_eq!(b.t()?.index(1)?.index(2)?.to_string(), "tensor(100.)");
    assert_eq!(b.view(&[-1])?.get(&[9])?, Scalar::Float(100.0));
    assert_eq!(
        b.to_string(),
        "tensor([[  0.,   1.,   2.,   3.],\n        [  4.,   5.,   6.,   7.],\n        [  8., 100.,  10.,  11.]])"
    );
    // In-place operations on a view write into the shared storage.
    b.select(1, 0)?.fill_(-1.0)?;
    assert_eq!(b.to_vec::<f32>()?[..5], [-1.0, 1.0, 2.0, 3.0, -1.0]);
    b.index(0)?.add_(10.0)?;
    assert_eq!(b.index(0)?.to_vec::<f32>()?, vec![9.0, 11.0, 12.0, 13.0]);
    // A deep clone does not share: writes to it stay in it.
    let c = b.deep_clone()?;
    assert!(!c.shares_storage_with(&b));
    assert_ne!(storage_ptr(&c), storage_ptr(&b));
    c.zero_()?;
    assert_eq!(b.get(&[0, 1])?, Scalar::Float(11.0));
    // Rust's Clone is a new handle (Python's `a = b`): it shares.
    let h = b.clone();
    h.set(&[0, 0], 7.0)?;
    assert_eq!(b.get(&[0, 0])?, Scalar::Float(7.0));
    Ok(())
}

#[test]
fn dtypes_and_shapes_over_one_storage() -> Result<()> {
    let f = Tensor::ones(&[2], DType::Float32)?;
    let u = f.view_dtype(DType::UInt8)?;
    let h = f.view_dtype(DType::Int16)?;
    assert_eq!((u.dtype(), u.shape()), (DType::UInt8, &[8][..]));
    assert_eq!((h.dtype(), h.shape()), (DType::Int16, &[4][..]));
    assert_eq!(u.to_vec::<u8>()?, vec![0, 0, 128, 63, 0, 0, 128, 63]);
    assert_eq!(h.to_vec::<i16>()?, vec![0, 16256, 0, 16256]);
    assert_eq!(
        u.to_string(),
        "tensor([  0,   0, 128,  63,   0,   0, 128,  63], dtype=torch.uint8)"
    );
    assert_eq!(
        h.to_string(),
        "tensor([    0, 16256,     0, 16256], dtype=torch.int16)"
    );

    // int16 write, seen as float32 and as bytes: 0x40000000 is 2.0.
    h.set(&[1], 0x4000i64)?;
    assert_eq!(f.to_vec::<f32>()?, vec![2.0, 1.0]);
    assert_eq!(u.to_vec::<u8>()?[..4], [0, 0, 0, 64]);
    // uint8 write, seen as int16 and float32: 0x3fc00000 is 1.5.
    u.set(&[6], 0xc0i64)?;
    assert_eq!(h.get(&[3])?, Scalar::Int(0x3fc0));
    assert_eq!(f.get(&[1])?, Scalar::Float(1.5));

    // A tensor of another dtype and shape put onto the storage with set_.
    let mut m = Tensor::zeros(&[0], DType::UInt8)?;
    m.set_(f.untyped_storage(), 0, &[2, 4], &[4, 1])?;
    assert_eq!(m.shape(), &[2, 4]);
    assert_eq!(m.to_vec::<u8>()?, vec![0, 0, 0, 64, 0, 0, 192, 63]);
    let mut wide = Tensor::zeros(&[0], DType::Float64)?;
    wide.set_(f.untyped_storage(), 0, &[], &[])?;
    assert_eq!(wide.dim(), 0);
    assert_eq!(
        wide.item()?,
        Scalar::Float(f64::from_bits(0x3fc0_0000_4000_0000))
    );
    for t in [&u, &h, &m, &wide] {
        assert_eq!(storage_ptr(t), storage_ptr(&f));
        assert!(t.shares_storage_with(&f));
    }
    // to_dtype copies; view_dtype does not.
    let converted = f.to_dtype(DType::Int16)?;
    assert!(!converted.shares_storage_with(&f));
    assert_eq!(converted.to_vec::<i16>()?, vec![2, 1]);
    Ok(())
}

#[test]
fn a_gradient_has_a_storage_of_its_own() -> Result<()> {
    let t = Tensor::zeros(&[3], DType::Float32)?.with_requires_grad(true)?;
    t.sum()?.backward()?;
    let grad = t.grad().expect("backward reached the leaf");
    assert_eq!(t.untyped_storage().tolist()?, [0; 12]);
    assert_eq!(grad.untyped_storage().tolist()?, [0, 0, 128, 63].repeat(3));
    assert!(t.data_ptr() != grad.data_ptr() && !t.shares_storage_with(&grad));
    assert!(matches!(
        t.add_(1.0),
        Err(Error::Tensor(TensorError::InPlaceRequiresGrad {
            op: "add_",
            ..
        }))
    ));
    {
        let _no_grad = stowage::autograd::no_grad();
        t.add_(&grad.mul(-0.5)?)?;
    }
    assert_eq!(
        t.to_string(),
        "tensor([-0.5000, -0.5000, -0.5000], requires_grad=True)"
    );
    Ok(())
}

#[test]
fn meta_tensors_have_a_shape_and_no_data() -> Result<()> {
    let z = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META)?;
    assert_eq!(z.to_string(), "tensor(..., device='meta', size=(2, 3))");
    assert!(z.is_meta() && z.untyped_storage().is_meta());
    assert_eq!(
        (
            z.untyped_storage().nbytes(),
            z.untyped_storage().data_ptr(),
            z.data_ptr()
        ),
        (24, 0, 0)
    );
    // Views of a meta tensor are metadata too.
    let v = z.t()?.select(0, 1)?;
    assert_eq!(
        (v.shape(), v.stride(), v.storage_offset()),
        (&[2][..], &[3][..], 1)
    );
    let no_data = |r: Result<()>, op: &str| match r {
        Err(Error::Storage(StorageError::NoData { op: o, device })) => {
            assert_eq!(device, Device::META);
            assert_eq!(o, op);
        }
        other => panic!("{op}: expected NoData, got {other:?}"),
    };
    no_data(z.to_vec::<f32>().map(drop), "tolist");
    no_data(z.get(&[0, 0]).map(drop), "get");
    no_data(z.set(&[0, 0], 1.0), "set");
    no_data(z.untyped_storage().tolist().map(drop), "tolist");
    no_data(z.untyped_storage().fill_(0).map(drop), "fill_");
    assert!(matches!(
        z.untyped_storage().bytes(),
        Err(Error::Storage(StorageError::NoData { .. }))
    ));
    assert!(matches!(
        z.fill_(1.0),
        Err(Error::Storage(StorageError::NoData { .. }))
    ));
    assert!(matches!(
        z.to_device(Device::CPU),
        Err(Error::Storage(StorageError::NoData { .. }))
    ));
    // Moving to meta keeps the metadata and drops the bytes.
    let m = grid().to_device(Device::META)?;
    assert_eq!((m.shape(), m.untyped_storage().nbytes()), (&[3, 4][..], 48));
    assert_eq!(m.deep_clone()?.device(), Device::META);
    Ok(())
}

#[test]
fn devices_are_recorded_and_bytes_stay_on_the_host() -> Result<()> {
    let cuda: Device = "cuda:0".parse()?;
    assert_eq!(cuda, Device::cuda(0));
    let g = grid().to_device(cuda)?;
    assert!(g.untyped_storage().is_cuda());
    assert_eq!(g.to_vec::<f32>()?, grid().to_vec::<f32>()?);
    assert!(g.to_string().ends_with(", device='cuda:0')"));
    assert!(matches!(
        "cuda:01".parse::<Device>(),
        Err(Error::Tensor(TensorError::InvalidDevice { text })) if text == "cuda:01"
    ));
    assert_eq!("float32".parse::<DType>()?, DType::Float32);
    assert_eq!("torch.half".parse::<DType>()?, DType::Float16);
    assert!(matches!(
        "float128".parse::<DType>(),
        Err(Error::Tensor(TensorError::UnknownDType { name })) if name == "float128"
    ));
    Ok(())
}

// ---------------------------------------------------------------------------
// Errors, as typed values with their fields.
// ---------------------------------------------------------------------------

#[test]
fn dimensions_out_of_range() {
    let b = grid();
    assert!(matches!(
        b.select(2, 0),
        Err(Error::Tensor(TensorError::DimOutOfRange {
            dim: 2,
            ndim: 2
        }))
    ));
    assert!(matches!(
        b.transpose(0, -3),
        Err(Error::Tensor(TensorError::DimOutOfRange {
            dim: -3,
            ndim: 2
        }))
    ));
    assert!(matches!(
        b.narrow(5, 0, 1),
        Err(Error::Tensor(TensorError::DimOutOfRange {
            dim: 5,
            ndim: 2
        }))
    ));
    // unsqueeze accepts ndim + 1 positions.
    assert!(matches!(
        b.unsqueeze(3),
        Err(Error::Tensor(TensorError::DimOutOfRange {
            dim: 3,
            ndim: 3
        }))
    ));
    assert!(b.unsqueeze(2).is_ok() && b.unsqueeze(-3).is_ok());
    assert!(matches!(
        b.permute(&[0, 2]),
        Err(Error::Tensor(TensorError::DimOutOfRange {
            dim: 2,
            ndim: 2
        }))
    ));
    let e = b.select(2, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "dimension out of range (expected to be in range of [-2, 1], but got 2)"
    );
}

#[test]
fn indices_out_of_range() {
    let b = grid();
    assert!(matches!(
        b.select(0, 3),
        Err(Error::Tensor(TensorError::IndexOutOfRange {
            index: 3,
            dim: 0,
            size: 3
        }))
    ));
    assert!(matches!(
        b.index(-4),
        Err(Error::Tensor(TensorError::IndexOutOfRange {
            index: -4,
            dim: 0,
            size: 3
        }))
    ));
    assert!(matches!(
        b.get(&[0, 4]),
        Err(Error::Tensor(TensorError::IndexOutOfRange {
            index: 4,
            dim: 1,
            size: 4
        }))
    ));
    assert!(matches!(
        b.set(&[isize::MIN, 0], 1.0),
        Err(Error::Tensor(TensorError::IndexOutOfRange {
            index: isize::MIN,
            dim: 0,
            size: 3
        }))
    ));
    assert!(matches!(
        b.untyped_storage().get(48),
        Err(Error::Tensor(TensorError::IndexOutOfRange {
            index: 48,
            dim: 0,
            size: 48
        }))
    ));
    assert_eq!(b.untyped_storage().get(-1).ok(), Some(65)); // 11.0 is 0x41300000
    assert!(matches!(
        b.get(&[0]),
        Err(Error::Tensor(TensorError::DimCountMismatch {
            op: "index",
            ndim: 2,
            given: 1,
            ..
        }))
    ));
    assert_eq!(
        b.select(0, 3).unwrap_err().to_string(),
        "index 3 is out of bounds for dimension 0 with size 3"
    );
}

#[test]
fn view_on_incompatible_strides() {
    let t = grid().t().unwrap();
    match t.view(&[12]) {
        Err(Error::Tensor(TensorError::ViewIncompatible {
            shape,
            size,
            stride,
        })) => {
            assert_eq!((shape, size, stride), (vec![12], vec![4, 3], vec![1, 4]));
        }
        other => panic!("expected ViewIncompatible, got {other:?}"),
    }
    // reshape copies instead.
    let r = t.reshape(&[12]).unwrap();
    assert!(!r.shares_storage_with(&t));
    assert_eq!(r.to_vec::<f32>().unwrap()[..4], [0.0, 4.0, 8.0, 1.0]);
    // A dtype view needs a unit last stride.
    assert!(matches!(
        t.view_dtype(DType::UInt8),
        Err(Error::Tensor(TensorError::ViewDType {
            problem: DTypeViewProblem::LastStride { stride: 4 }
        }))
    ));
}

#[test]
fn shape_mismatch() {
    let b = grid();
    match b.view(&[5, -1]) {
        Err(Error::Tensor(TensorError::ShapeMismatch { shape, numel })) => {
            assert_eq!((shape, numel), (vec![5, -1], 12))
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    match b.view(&[5]) {
        Err(Error::Tensor(TensorError::ShapeMismatch { shape, numel })) => {
            assert_eq!((shape, numel), (vec![5], 12))
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    match Tensor::from_vec(vec![1.0f32; 5], &[2, 3]) {
        Err(Error::Tensor(TensorError::ShapeMismatch { shape, numel })) => {
            assert_eq!((shape, numel), (vec![2, 3], 5))
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    assert_eq!(
        b.view(&[5]).unwrap_err().to_string(),
        "shape [5] is invalid for input of size 12"
    );
    assert!(matches!(
        b.view(&[-1, -1]),
        Err(Error::Tensor(TensorError::MultipleInferredDims { .. }))
    ));
    assert!(matches!(
        b.view(&[-2, 6]),
        Err(Error::Tensor(TensorError::NegativeSize { size: -2 }))
    ));
    assert!(matches!(
        b.expand(&[3, 5]),
        Err(Error::Tensor(TensorError::ExpandIncompatible { .. }))
    ));
    let a = Tensor::zeros(&[2, 3], DType::Float32).unwrap();
    let e = a.copy_(&b).unwrap_err();
    assert!(matches!(
        e,
        Error::Tensor(TensorError::SizeMismatch { a: 3, b: 4, dim: 1 })
    ));
    assert_eq!(
        e.to_string(),
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
    );
    let e = Tensor::zeros(&[2], DType::Float32)
        .unwrap()
        .copy_(&Tensor::zeros(&[2, 2], DType::Float32).unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "output with shape [2] doesn't match the broadcast shape [2, 2]"
    );
}

#[test]
fn layouts_past_the_end_of_the_storage() {
    let b = grid(); // 12 float32 elements, 48 bytes
    match b.as_strided(&[4], &[7], 3) {
        Err(Error::Storage(StorageError::OutOfStorage {
            needed,
            nbytes,
            shape,
            stride,
            offset,
            element_size,
        })) => {
            // offset 3 + 3 * 7 + 1 = 25 elements reached, 100 bytes.
            assert_eq!((needed, nbytes), (100, 48));
            assert_eq!(
                (shape, stride, offset, element_size),
                (vec![4], vec![7], 3, 4)
            );
        }
        other => panic!("expected OutOfStorage, got {other:?}"),
    }
    // Exactly to the end is fine; one more element is not.
    assert!(b.as_strided(&[4], &[1], 8).is_ok());
    assert!(matches!(
        b.as_strided(&[4], &[1], 9),
        Err(Error::Storage(StorageError::OutOfStorage {
            needed: 52,
            nbytes: 48,
            ..
        }))
    ));
    let mut t = Tensor::ones(&[3], DType::Float32).unwrap();
    let s = t.untyped_storage().deep_clone().unwrap();
    match t.set_(&s, 1, &[3], &[1]) {
        Err(Error::Storage(StorageError::OutOfStorage {
            needed,
            nbytes,
            offset,
            element_size,
            ..
        })) => {
            assert_eq!((needed, nbytes, offset, element_size), (16, 12, 1, 4));
        }
        other => panic!("expected OutOfStorage, got {other:?}"),
    }
    assert_eq!(
        t.to_string(),
        "tensor([1., 1., 1.])",
        "a failed set_ changes nothing"
    );
    assert!(!t.untyped_storage().is_same(&s));
    // A wider dtype reaches further: 3 float64 need 24 bytes.
    let mut d = Tensor::zeros(&[0], DType::Float64).unwrap();
    assert!(matches!(
        d.set_(&s, 0, &[3], &[1]),
        Err(Error::Storage(StorageError::OutOfStorage {
            needed: 24,
            nbytes: 12,
            element_size: 8,
            ..
        }))
    ));
    assert!(matches!(
        Tensor::from_parts(
            s.clone(),
            DType::Float32,
            Layout::new(&[13], &[1], 0).unwrap()
        ),
        Err(Error::Storage(StorageError::OutOfStorage {
            needed: 52,
            nbytes: 12,
            ..
        }))
    ));
    // Shape and stride of different lengths.
    assert!(matches!(
        t.set_(&s, 0, &[3], &[1, 1]),
        Err(Error::Tensor(TensorError::StrideLengthMismatch {
            shape_len: 1,
            stride_len: 2
        }))
    ));
    // A storage shrunk under a view: reads check the layout again.
    let v = grid();
    v.untyped_storage().resize_(8).unwrap();
    assert!(matches!(
        v.get(&[2, 3]),
        Err(Error::Storage(StorageError::OutOfStorage { nbytes: 8, .. }))
    ));
    assert!(matches!(
        v.to_vec::<f32>(),
        Err(Error::Storage(StorageError::OutOfStorage { .. }))
    ));
}

#[test]
fn sizes_that_overflow() {
    match Tensor::zeros(&[usize::MAX, 2], DType::Float32) {
        Err(Error::Tensor(TensorError::SizeOverflow { what, .. })) => {
            assert_eq!(what, "element count")
        }
        other => panic!(
            "expected SizeOverflow, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    }
    match Tensor::zeros(&[usize::MAX / 2], DType::Float32) {
        Err(Error::Tensor(TensorError::SizeOverflow { what, .. })) => {
            assert_eq!(what, "tensor bytes")
        }
        other => panic!(
            "expected SizeOverflow, got {:?}",
            other.map(|t| t.shape().to_vec())
        ),
    }
    let b = grid();
    assert!(matches!(
        b.view(&[isize::MAX, 2]),
        Err(Error::Tensor(TensorError::ShapeMismatch { .. }))
    ));
    assert!(matches!(
        b.index(0).unwrap().expand(&[isize::MAX, isize::MAX, 4]),
        Err(Error::Tensor(TensorError::SizeOverflow { .. }))
    ));
    // A stride reaching past every address is caught, in 128-bit arithmetic.
    match b.as_strided(&[2], &[usize::MAX], 0) {
        Err(Error::Storage(StorageError::OutOfStorage { needed, .. })) => {
            assert_eq!(needed, (1u128 << 64) * 4)
        }
        other => panic!("expected OutOfStorage, got {other:?}"),
    }
    assert!(matches!(
        Layout::new(&[usize::MAX, 2], &[usize::MAX, 1], 0),
        Err(Error::Tensor(TensorError::SizeOverflow { .. }))
    ));
    assert!(matches!(
        UntypedStorage::new(usize::MAX),
        Err(Error::Storage(StorageError::AllocationFailed { .. }))
            | Err(Error::Tensor(TensorError::SizeOverflow { .. }))
    ));
}

#[test]
fn other_typed_errors() {
    let b = grid();
    assert!(matches!(
        b.item(),
        Err(Error::Tensor(TensorError::NotAScalar { numel: 12 }))
    ));
    assert!(matches!(
        b.slice(0, None, None, 0),
        Err(Error::Tensor(TensorError::ZeroArgument {
            op: "slice",
            what: "step",
        }))
    ));
    assert!(matches!(
        Tensor::zeros(&[2, 2, 2], DType::Float32).unwrap().t(),
        Err(Error::Tensor(TensorError::TooManyDims {
            op: "t",
            max: 2,
            ndim: 3
        }))
    ));
    assert!(matches!(
        b.permute(&[0, 0]),
        Err(Error::Tensor(TensorError::RepeatedDim {
            op: "permute",
            dim: 0
        }))
    ));
    let small = UntypedStorage::new(3).unwrap();
    assert!(matches!(
        small.copy_(b.untyped_storage()),
        Err(Error::Storage(StorageError::StorageSizeMismatch {
            op: "copy_",
            dst: 3,
            src: 48
        }))
    ));
    assert!(matches!(
        Tensor::ones(&[2], DType::Bits8),
        Err(Error::Tensor(TensorError::DTypeUnsupported {
            dtype: DType::Bits8,
            ..
        }))
    ));
    assert!(matches!(
        Tensor::arange(0.0, 1.0, 0.0, DType::Float32),
        Err(Error::Tensor(TensorError::ArangeRange { step: 0.0, .. }))
    ));
}

// ---------------------------------------------------------------------------
// Empty tensors: PyTorch lets a layout without elements have any offset and
// stride (there is nothing to bound-check), so views of them must not overflow.
// ---------------------------------------------------------------------------

/// An empty tensor over a one-byte storage, at a far offset.
fn far_empty(size: &[usize], stride: &[usize], offset: usize) -> Tensor {
    Tensor::zeros(&[1], DType::Float32)
        .and_then(|t| t.as_strided(size, stride, offset))
        .expect("a layout without elements fits any storage")
}

#[test]
fn empty_layouts_accept_any_offset_and_stride() {
    let e = far_empty(&[0], &[1], usize::MAX / 8);
    assert_eq!((e.numel(), e.storage_offset()), (0, usize::MAX / 8));
    assert_eq!(e.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    assert_eq!(e.to_string(), "tensor([])");
}

// Each test below panics ("attempt to multiply/add with overflow") in a debug
// build and silently wraps in a release build. They are ignored until the
// library checks (or wraps deliberately) the arithmetic named in each reason.

#[test]
fn data_ptr_of_an_empty_view_at_a_far_offset() {
    let e = far_empty(&[0], &[1], usize::MAX);
    // PyTorch computes data + offset * itemsize without checking; stowage must not panic.
    let _ = e.data_ptr();
}

#[test]
fn nbytes_of_a_huge_expanded_tensor() {
    let t = Tensor::zeros(&[1], DType::Float64).unwrap();
    let e = t.expand(&[(usize::MAX / 4) as isize]).unwrap();
    assert_eq!(e.numel(), usize::MAX / 4);
    let _ = e.nbytes();
}

#[test]
fn select_on_an_empty_tensor_with_a_huge_stride() {
    let e = far_empty(&[3, 0], &[usize::MAX, 1], 0);
    let _ = e.select(0, 2);
    let _ = e.unbind(0);
}

#[test]
fn narrow_on_an_empty_tensor_with_a_huge_stride() {
    let _ = far_empty(&[3, 0], &[usize::MAX, 1], 0).narrow(0, 2, 1);
    let _ = far_empty(&[3, 0], &[usize::MAX, 1], 0).split(1, 0);
    let _ = far_empty(&[2, 0], &[1, 1], usize::MAX).narrow(0, 1, 1);
}

#[test]
fn slice_on_an_empty_tensor_with_a_huge_stride() {
    let _ = far_empty(&[3, 0], &[usize::MAX, 1], 0).slice(0, Some(2), None, 1);
}

#[test]
fn diagonal_on_an_empty_tensor_with_a_huge_stride() {
    let _ = far_empty(&[3, 3, 0], &[usize::MAX, 1, 1], 0).diagonal(-2, 0, 1);
}

#[test]
fn offsets_of_a_layout_reaching_past_usize() {
    // Layout::new accepts it: the reach, 2^64 elements, is checked in u128 only.
    let l = Layout::new(&[2], &[usize::MAX], 0).unwrap();
    assert_eq!(l.offsets().collect::<Vec<_>>(), vec![0, usize::MAX]);
}
