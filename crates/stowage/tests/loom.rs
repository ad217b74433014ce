//! Model checks of the storage layer's locking with loom: every interleaving of
//! the threads below is explored. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p stowage --test loom --release`
//! (see `docs/sanitizers.md`); without `--cfg loom` this file is empty.
#![cfg(loom)]

use loom::thread;
use stowage::{DType, Tensor, UntypedStorage};

/// `a.copy_(b)` and `b.copy_(a)` at once lock the two storages in the same
/// (creation) order, so they cannot deadlock, and each copy is atomic.
#[test]
fn crossed_copies_neither_deadlock_nor_tear() {
    loom::model(|| {
        let a = UntypedStorage::from_bytes(&[1; 4]).unwrap();
        let b = UntypedStorage::from_bytes(&[2; 4]).unwrap();
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || {
            b2.copy_(&a2).unwrap();
        });
        a.copy_(&b).unwrap();
        t.join().unwrap();
        let (x, y) = (a.tolist().unwrap(), b.tolist().unwrap());
        // Whichever copy ran last made both storages equal, and neither was torn.
        assert_eq!(x, y);
        assert!(x == [1; 4] || x == [2; 4], "{x:?}");
    });
}

/// A reader never sees a half-filled storage.
#[test]
fn fill_is_atomic_for_readers() {
    loom::model(|| {
        let s = UntypedStorage::new(4).unwrap();
        let w = s.clone();
        let t = thread::spawn(move || {
            w.fill_(7).unwrap();
        });
        let seen = s.tolist().unwrap();
        t.join().unwrap();
        assert!(seen == [0; 4] || seen == [7; 4], "{seen:?}");
        assert_eq!(s.tolist().unwrap(), [7; 4]);
    });
}

/// Two threads writing disjoint views of one storage, while a third copies
/// an overlapping view out, end with exactly the expected bytes.
#[test]
fn disjoint_view_writes_and_an_overlapping_read() {
    loom::model(|| {
        let base = Tensor::zeros(&[4], DType::UInt8).unwrap();
        let left = base.narrow(0, 0, 2).unwrap();
        let right = base.narrow(0, 2, 2).unwrap();
        let middle = base.narrow(0, 1, 2).unwrap();
        let t1 = thread::spawn(move || {
            left.fill_(1i64).unwrap();
        });
        let t2 = thread::spawn(move || {
            right.fill_(2i64).unwrap();
        });
        let seen = middle.to_vec::<u8>().unwrap();
        t1.join().unwrap();
        t2.join().unwrap();
        assert!(
            [0, 1].contains(&seen[0]) && [0, 2].contains(&seen[1]),
            "{seen:?}"
        );
        assert_eq!(base.to_vec::<u8>().unwrap(), [1, 1, 2, 2]);
    });
}
