//! `content::digest_all`, the digests `stowage manifest`, `inspect --json`
//! and a verified load compute on every core, two tensors at a time a
//! thread where the CPU hashes two messages at once: each tensor's digest
//! is its own, whatever the sizes beside it, as `sha2` computes it alone.

use sha2::{Digest, Sha256};
use stowage::checkpoint::content;
use stowage::checkpoint::TensorObject;
use stowage::{DType, Device, Tensor};

/// SHA-256 of the tensor's elements in row-major order, by `sha2` alone.
fn by_sha2(t: &Tensor) -> [u8; 32] {
    let bytes = t.contiguous().unwrap().untyped_storage().tolist().unwrap();
    Sha256::digest(&bytes[..t.numel() * t.element_size()]).into()
}

fn floats(n: usize, seed: f32) -> Tensor {
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 + seed).collect();
    Tensor::from_vec(values, &[n]).unwrap()
}

#[test]
fn each_tensor_gets_its_own_digest_whatever_its_neighbours() {
    // Sizes around a block (64 bytes), around the 8 MiB window, empty, one
    // byte, a transposed view, and one over two windows, so that tensors
    // end and begin at every offset beside one another.
    let mut tensors = vec![
        floats(0, 0.0),
        Tensor::from_vec(vec![7u8], &[1]).unwrap(),
        floats(15, 1.0),
        floats(16, 2.0),
        floats(17, 3.0),
        floats(1000, 4.0),
        floats((8 << 20) / 4 + 3, 5.0),
        floats((8 << 20) / 4, 6.0),
        floats(3 << 18, 7.0),
        floats(12, 8.0).view(&[3, 4]).unwrap().t().unwrap(),
    ];
    for i in 0..40 {
        tensors.push(floats(1 + i * 97, i as f32));
    }
    let objects: Vec<TensorObject> = tensors.iter().cloned().map(TensorObject::new).collect();
    let meta = TensorObject::new(Tensor::zeros_on(&[4], DType::Float32, Device::META).unwrap());
    let mut given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
    given.insert(3, None);
    given.insert(7, Some(&meta));

    let digests = content::digest_all(&given, |_| ());

    assert_eq!(digests.len(), given.len());
    let mut k = 0;
    for (i, d) in digests.iter().enumerate() {
        match i {
            3 => assert!(matches!(d, Ok(None)), "no tensor given: {d:?}"),
            7 => assert!(d.is_err(), "a meta tensor has no bytes to hash: {d:?}"),
            _ => {
                let want = by_sha2(&tensors[k]);
                assert_eq!(
                    d.as_ref().unwrap().unwrap(),
                    want,
                    "tensor {k} of {} bytes",
                    tensors[k].nbytes()
                );
                k += 1;
            }
        }
    }
    assert_eq!(k, tensors.len());
}
