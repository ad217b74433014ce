//! Fake tensors: full metadata (dtype, shape, stride, offset, a pretended
//! device such as `cuda:0`) and no data, for planning over tensors, or a
//! whole checkpoint, without their bytes (PyTorch's `FakeTensor`).
//!
//! A fake tensor's storage has a size and no bytes, like a meta storage, but
//! reports the device it pretends to be on. Every view and shape operation
//! works and propagates the fakeness (copies of fake tensors are fake, on any
//! device); every data access is [`StorageError::NoData`](crate::StorageError::NoData).
//! Checkpoints load as fake with
//! [`LoadMode::Fake`](crate::checkpoint::LoadMode::Fake).

use crate::{DType, Device, Result, Tensor, UntypedStorage};

impl Tensor {
    /// A contiguous fake tensor of `shape` and `dtype` that pretends to be on `device`.
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`](crate::TensorError::SizeOverflow) when the byte count overflows.
    pub fn fake(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        let (layout, nbytes) = Tensor::contiguous_bytes(shape, dtype)?;
        Ok(Tensor::from_parts_unchecked(
            UntypedStorage::new_fake(nbytes, device),
            dtype,
            layout,
        ))
    }

    /// A fake tensor with this tensor's metadata (dtype, shape, stride, offset and
    /// storage size) on `device`, and no data.
    pub fn to_fake(&self, device: Device) -> Tensor {
        let storage = UntypedStorage::new_fake(self.storage.nbytes(), device);
        let mut t = Tensor::from_parts_unchecked(storage, self.dtype, self.layout.clone());
        t.autograd = self.leaf_like();
        t
    }

    /// True when the tensor's storage holds bytes (false on meta and for fake tensors).
    pub fn has_data(&self) -> bool {
        self.storage.has_data()
    }

    /// True for a fake tensor: no bytes, on a device other than meta.
    pub fn is_fake(&self) -> bool {
        !self.has_data() && !self.is_meta()
    }
}

#[cfg(test)]
mod tests {
    use crate::error::StorageError;
    use crate::{DType, Device, Error, Tensor};

    #[test]
    fn fake_tensors_keep_metadata_and_refuse_data() {
        let cuda: Device = "cuda:0".parse().unwrap();
        let real = Tensor::arange(0.0, 24.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[4, 6])
            .unwrap();
        let f = real.t().unwrap().to_fake(cuda);
        assert!(f.is_fake() && !f.is_meta());
        assert_eq!(
            (f.shape(), f.stride(), f.device()),
            (&[6, 4][..], &[1, 6][..], cuda)
        );
        assert_eq!(f.untyped_storage().nbytes(), 96);
        let v = f
            .contiguous()
            .unwrap()
            .view(&[2, 12])
            .unwrap()
            .select(0, 1)
            .unwrap();
        assert!(v.is_fake());
        assert_eq!((v.shape(), v.storage_offset()), (&[12][..], 12));
        assert!(matches!(
            v.get(&[0]),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        assert!(f.fill_(1.0).is_err() && f.to_vec::<f32>().is_err());
        assert!(f.to_device(Device::CPU).unwrap().is_fake());
        assert!(f.deep_clone().unwrap().is_fake());
        assert_eq!(
            f.to_string(),
            "FakeTensor(..., device='cuda:0', size=(6, 4))"
        );
        let made = Tensor::fake(&[2, 3], DType::BFloat16, cuda).unwrap();
        assert_eq!(
            (made.stride(), made.untyped_storage().nbytes()),
            (&[3, 1][..], 12)
        );
    }

    #[test]
    fn meta_cannot_be_copied_out() {
        let m = Tensor::zeros_on(&[2], DType::Float32, Device::META).unwrap();
        assert!(matches!(
            m.to_device(Device::CPU),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        assert!(m.to_device("cuda:0".parse().unwrap()).is_err());
    }
}
