//! Typed access against the element-by-element path: `to_vec::<T>()` (memcpy,
//! typed casts, lookup tables, `half`'s slice conversions, the strided gather)
//! gives what `scalars()` and `Element::from_scalar` give, for every dtype with
//! values, random bytes and random strides; and typed views of misaligned
//! bytes are refused, never undefined behaviour.

use std::fmt::Debug;

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use proptest::prelude::*;
use stowage::DTYPES;
use stowage::{DType, Element, Tensor};

/// Every dtype whose elements have values.
fn dtypes() -> Vec<DType> {
    DTYPES
        .iter()
        .filter(|r| r.dtype.has_scalar_values())
        .map(|r| r.dtype)
        .collect()
}

/// `n` pseudo-random bytes from `seed` (every bit pattern: NaNs, bools other
/// than 0 and 1, negative zeros).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A 1-D tensor of `dtype` over `n` elements of random bytes.
fn random(dtype: DType, n: usize, seed: u64) -> Tensor {
    Tensor::from_vec(bytes(n * dtype.size(), seed), &[n * dtype.size()])
        .unwrap()
        .view_dtype(dtype)
        .unwrap()
}

fn same<T: Element + Debug>(t: &Tensor) -> Result<(), TestCaseError> {
    let fast = t.to_vec::<T>().unwrap();
    let slow: Vec<T> = t
        .scalars()
        .unwrap()
        .into_iter()
        .map(T::from_scalar)
        .collect();
    // Debug text compares NaN with NaN and tells -0.0 from 0.0.
    prop_assert_eq!(
        format!("{fast:?}"),
        format!("{slow:?}"),
        "{} to {}: shape {:?} stride {:?} offset {}",
        t.dtype(),
        T::DTYPE,
        t.shape(),
        t.stride(),
        t.storage_offset()
    );
    Ok(())
}

fn every_element_type(t: &Tensor) -> Result<(), TestCaseError> {
    same::<f64>(t)?;
    same::<f32>(t)?;
    same::<f16>(t)?;
    same::<bf16>(t)?;
    same::<i64>(t)?;
    same::<i32>(t)?;
    same::<i16>(t)?;
    same::<i8>(t)?;
    same::<u64>(t)?;
    same::<u32>(t)?;
    same::<u16>(t)?;
    same::<u8>(t)?;
    same::<bool>(t)?;
    same::<Complex64>(t)?;
    same::<Complex32>(t)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any strided layout (zero and overlapping strides included) of random bytes.
    #[test]
    fn to_vec_matches_scalars_for_any_strides(
        dtype in prop::sample::select(dtypes()),
        dims in prop::collection::vec((0usize..5, 0usize..7), 0..4),
        offset in 0usize..5,
        seed in any::<u64>(),
    ) {
        let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let stride: Vec<usize> = dims.iter().map(|d| d.1).collect();
        let reach = offset + 1 + dims.iter().map(|&(n, s)| n.saturating_sub(1) * s).sum::<usize>();
        let base = random(dtype, reach, seed);
        let t = base.as_strided(&shape, &stride, offset).unwrap();
        every_element_type(&t)?;
    }

    /// Transposes large enough for the blocked kernel's micro-blocks and ragged edges.
    #[test]
    fn to_vec_matches_scalars_for_transposes(
        dtype in prop::sample::select(dtypes()),
        rows in 1usize..70,
        cols in 1usize..70,
        seed in any::<u64>(),
    ) {
        let t = random(dtype, rows * cols, seed)
            .view(&[rows as isize, cols as isize])
            .unwrap();
        every_element_type(&t.t().unwrap())?;
        every_element_type(&t)?;
    }
}

/// `read::<T>()` of a contiguous view at an offset is exactly its elements.
fn read_is_to_vec<T: Element + bytemuck::Pod + Debug>() {
    let t = random(T::DTYPE, 37, 11).narrow(0, 3, 30).unwrap();
    let r = t.read::<T>().unwrap();
    assert_eq!(r.len(), 30);
    assert_eq!(
        format!("{:?}", &*r),
        format!("{:?}", t.to_vec::<T>().unwrap())
    );
}

#[test]
fn reads_are_the_elements_in_order() {
    read_is_to_vec::<f64>();
    read_is_to_vec::<f32>();
    read_is_to_vec::<f16>();
    read_is_to_vec::<bf16>();
    read_is_to_vec::<i16>();
    read_is_to_vec::<u64>();
    read_is_to_vec::<Complex32>();
    read_is_to_vec::<Complex64>();
}

/// A safetensors file whose float32 tensor starts one byte into the data: a
/// storage over part of a mapped file, at an odd address.
#[cfg(feature = "safetensors")]
#[test]
fn misaligned_mapped_elements_are_refused_by_views_and_copied_by_to_vec() {
    use stowage::{load_mmap, LoadOptions};
    use stowage::{Error, StorageError};

    let mut header = br#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}}"#.to_vec();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.push(7);
    file.extend_from_slice(&1.5f32.to_le_bytes());
    file.extend_from_slice(&(-2.0f32).to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.safetensors");
    std::fs::write(&path, &file).unwrap();
    // SAFETY: the file is not modified while mapped.
    let ckpt = unsafe { load_mmap(&path, &LoadOptions::default()) }.unwrap();
    let tensors = ckpt.tensors().unwrap();
    let b = &tensors
        .iter()
        .find(|(_, t)| t.tensor.dtype() == DType::Float32)
        .unwrap()
        .1
        .tensor;
    assert!(b.untyped_storage().is_shared(), "a mapped record");
    assert_eq!(b.data_ptr() % 2, 1, "the record starts at an odd address");
    match b.read::<f32>() {
        Err(Error::Storage(StorageError::Misaligned {
            dtype,
            address,
            align,
            ..
        })) => assert_eq!((dtype, address, align), (DType::Float32, b.data_ptr(), 4)),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a misaligned &[f32]"),
    }
    assert!(matches!(
        b.write::<f32>(),
        Err(Error::Storage(StorageError::Misaligned { .. }))
    ));
    #[cfg(feature = "ndarray")]
    assert!(matches!(
        b.as_array_view::<f32>(),
        Err(Error::Storage(StorageError::Misaligned { .. }))
    ));
    assert_eq!(b.to_vec::<f32>().unwrap(), [1.5, -2.0]);
    assert_eq!(b.to_vec::<f64>().unwrap(), [1.5, -2.0]);
    assert_eq!(b.t().unwrap().to_vec::<f32>().unwrap(), [1.5, -2.0]);
    let u = b.view_dtype(DType::UInt8).unwrap();
    assert_eq!(u.read::<u8>().unwrap().len(), 8);
}
