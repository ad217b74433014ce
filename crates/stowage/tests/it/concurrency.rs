//! Stress: many threads writing disjoint views of one storage while others read
//! overlapping views and copy between storages. Each operation holds the
//! storage's lock for its whole duration (NOTE [sound sharing] in
//! `storage/mod.rs`), so every read sees whole writes and the final bytes are
//! exactly what the writers wrote. `tests/loom.rs` model-checks the same protocol.

use std::sync::Barrier;

use stowage::{DType, Tensor};

const WRITERS: usize = 8;
const ROW: usize = 1024;
const ROUNDS: usize = 200;

#[test]
fn disjoint_writers_and_overlapping_readers_end_with_exact_bytes() {
    let base = Tensor::zeros(&[WRITERS, ROW], DType::Int32).unwrap();
    let barrier = Barrier::new(WRITERS + 3);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let row = base.select(0, w as isize).unwrap();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for round in 1..=ROUNDS {
                    // Each writer owns one row; a whole-row fill is one locked operation.
                    row.fill_((w * 1_000_000 + round) as i64).unwrap();
                }
            });
        }
        // Readers of views spanning every row: each row they see is uniform (never torn).
        for r in 0..2 {
            let view = base.t().unwrap();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for _ in 0..ROUNDS {
                    let copy = view.contiguous().unwrap();
                    let cols = copy.to_vec::<i32>().unwrap();
                    for w in 0..WRITERS {
                        let first = cols[w];
                        assert!(
                            (0..ROW).all(|c| cols[c * WRITERS + w] == first),
                            "reader {r}: row {w} torn"
                        );
                    }
                }
            });
        }
        // A thread copying the whole storage to another and back into a scratch view.
        let barrier = &barrier;
        let base = &base;
        s.spawn(move || {
            barrier.wait();
            let scratch = Tensor::zeros(&[WRITERS, ROW], DType::Int32).unwrap();
            for _ in 0..ROUNDS {
                scratch.copy_(base).unwrap();
                let v = scratch.to_vec::<i32>().unwrap();
                for w in 0..WRITERS {
                    assert!(
                        v[w * ROW..(w + 1) * ROW].iter().all(|&x| x == v[w * ROW]),
                        "copy: row {w} torn"
                    );
                }
            }
        });
    });
    let v = base.to_vec::<i32>().unwrap();
    for w in 0..WRITERS {
        assert!(
            v[w * ROW..(w + 1) * ROW]
                .iter()
                .all(|&x| x == (w * 1_000_000 + ROUNDS) as i32),
            "row {w}"
        );
    }
}
