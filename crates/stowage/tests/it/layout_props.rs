//! Property tests: random chains of views (views of views) against a naive
//! reference model that tracks every element's storage address explicitly.

use proptest::prelude::*;
use stowage::layout::Layout;

/// The reference: a shape and, row-major, the storage address of every element.
#[derive(Clone, Debug)]
struct Model {
    shape: Vec<usize>,
    addr: Vec<usize>,
}

impl Model {
    fn contiguous(shape: &[usize]) -> Model {
        Model {
            shape: shape.to_vec(),
            addr: (0..shape.iter().product()).collect(),
        }
    }

    /// The model of shape `shape` whose element at index `i` is `self`'s element at `old(i)`.
    fn gather(&self, shape: Vec<usize>, old: impl Fn(&[usize]) -> Vec<usize>) -> Model {
        let n: usize = shape.iter().product();
        let mut addr = Vec::with_capacity(n);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..n {
            addr.push(self.addr[flat(&self.shape, &old(&idx))]);
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        Model { shape, addr }
    }
}

fn flat(shape: &[usize], idx: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &s)| acc * s + i)
}

#[derive(Clone, Debug)]
enum Op {
    Transpose(usize, usize),
    Narrow(usize, usize, usize),
    Select(usize, usize),
    Slice(usize, usize, usize, usize),
    Unsqueeze(usize),
    Expand(usize, usize),
    Permute(Vec<usize>),
    Flatten,
    Diagonal(usize, usize),
    Unfold(usize, usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    // Raw numbers, reduced modulo the current shape when applied.
    prop_oneof![
        (0..8usize, 0..8usize).prop_map(|(a, b)| Op::Transpose(a, b)),
        (0..8usize, 0..8usize, 0..8usize).prop_map(|(d, s, l)| Op::Narrow(d, s, l)),
        (0..8usize, 0..8usize).prop_map(|(d, i)| Op::Select(d, i)),
        (0..8usize, 0..8usize, 0..8usize, 1..4usize).prop_map(|(d, a, b, s)| Op::Slice(d, a, b, s)),
        (0..8usize).prop_map(Op::Unsqueeze),
        (0..8usize, 1..4usize).prop_map(|(d, n)| Op::Expand(d, n)),
        Just(()).prop_perturb(|_, mut rng| {
            let mut p: Vec<usize> = (0..8).collect();
            for i in (1..p.len()).rev() {
                p.swap(i, rng.random_range(0..=i));
            }
            Op::Permute(p)
        }),
        Just(Op::Flatten),
        (0..8usize, 0..8usize).prop_map(|(a, b)| Op::Diagonal(a, b)),
        (0..8usize, 0..4usize, 1..3usize).prop_map(|(d, s, st)| Op::Unfold(d, s, st)),
    ]
}

/// Applies `op` to both; `None` when the op does not apply to this shape.
fn apply(l: &Layout, m: &Model, op: &Op) -> Option<(Layout, Model)> {
    let n = m.shape.len();
    let sh = &m.shape;
    match op {
        Op::Transpose(a, b) if n > 0 => {
            let (a, b) = (a % n, b % n);
            let mut shape = sh.clone();
            shape.swap(a, b);
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o.swap(a, b);
                o
            });
            Some((l.transpose(a as isize, b as isize).ok()?, mm))
        }
        Op::Narrow(d, s, len) if n > 0 => {
            let d = d % n;
            let start = s % (sh[d] + 1);
            let len = len % (sh[d] - start + 1);
            let mut shape = sh.clone();
            shape[d] = len;
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o[d] += start;
                o
            });
            Some((l.narrow(d as isize, start as isize, len).ok()?, mm))
        }
        Op::Select(d, i) if n > 0 && sh[*d % n] > 0 => {
            let d = d % n;
            let at = i % sh[d];
            let mut shape = sh.clone();
            shape.remove(d);
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o.insert(d, at);
                o
            });
            Some((l.select(d as isize, at as isize).ok()?, mm))
        }
        Op::Slice(d, a, b, step) if n > 0 => {
            let d = d % n;
            let (start, stop) = (a % (sh[d] + 1), b % (sh[d] + 1));
            let len = stop.saturating_sub(start).div_ceil(*step);
            let mut shape = sh.clone();
            shape[d] = len;
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o[d] = start + i[d] * step;
                o
            });
            Some((
                l.slice(d as isize, Some(start as isize), Some(stop as isize), *step)
                    .ok()?,
                mm,
            ))
        }
        Op::Unsqueeze(d) if n < 5 => {
            let d = d % (n + 1);
            let mut shape = sh.clone();
            shape.insert(d, 1);
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o.remove(d);
                o
            });
            Some((l.unsqueeze(d as isize).ok()?, mm))
        }
        Op::Expand(d, k) if n > 0 && sh[*d % n] == 1 => {
            let d = d % n;
            let mut sizes: Vec<isize> = vec![-1; n];
            sizes[d] = *k as isize;
            let mut shape = sh.clone();
            shape[d] = *k;
            let mm = m.gather(shape, |i| {
                let mut o = i.to_vec();
                o[d] = 0;
                o
            });
            Some((l.expand(&sizes).ok()?, mm))
        }
        Op::Permute(p) => {
            let perm: Vec<usize> = p.iter().copied().filter(|&x| x < n).collect();
            let shape: Vec<usize> = perm.iter().map(|&d| sh[d]).collect();
            let mm = m.gather(shape, |i| {
                let mut o = vec![0; n];
                for (k, &d) in perm.iter().enumerate() {
                    o[d] = i[k];
                }
                o
            });
            let dims: Vec<isize> = perm.iter().map(|&d| d as isize).collect();
            Some((l.permute(&dims).ok()?, mm))
        }
        Op::Flatten => {
            // A view only when the strides allow; the elements keep their row-major order.
            let total: usize = sh.iter().product();
            let v = l.view(&[-1]).ok()?;
            Some((
                v,
                Model {
                    shape: vec![total],
                    addr: m.addr.clone(),
                },
            ))
        }
        Op::Diagonal(a, b) if n >= 2 && a % n != b % n => {
            let (a, b) = (a % n, b % n);
            let len = sh[a].min(sh[b]);
            let mut shape: Vec<usize> = (0..n)
                .filter(|&d| d != a && d != b)
                .map(|d| sh[d])
                .collect();
            shape.push(len);
            let mm = m.gather(shape, |i| {
                let mut o = Vec::with_capacity(n);
                let mut rest = i[..i.len() - 1].iter();
                for d in 0..n {
                    o.push(if d == a || d == b {
                        i[i.len() - 1]
                    } else {
                        *rest.next().unwrap()
                    });
                }
                o
            });
            Some((l.diagonal(0, a as isize, b as isize).ok()?, mm))
        }
        Op::Unfold(d, size, step) if n > 0 && n < 5 && *size <= sh[*d % n] => {
            let d = d % n;
            let mut shape = sh.clone();
            shape[d] = (sh[d] - size) / step + 1;
            shape.push(*size);
            let mm = m.gather(shape, |i| {
                let mut o = i[..n].to_vec();
                o[d] = i[d] * step + i[n];
                o
            });
            Some((l.unfold(d as isize, *size, *step).ok()?, mm))
        }
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn views_of_views_address_the_same_elements_as_the_model(
        shape in proptest::collection::vec(1..5usize, 0..4),
        ops in proptest::collection::vec(op(), 0..8),
    ) {
        let mut l = Layout::contiguous(&shape).unwrap();
        let mut m = Model::contiguous(&shape);
        let storage_elements = m.addr.len();
        for op in &ops {
            if let Some((nl, nm)) = apply(&l, &m, op) {
                l = nl;
                m = nm;
                prop_assert_eq!(l.shape(), &m.shape[..], "{:?}", op);
                prop_assert_eq!(l.offsets().collect::<Vec<_>>(), m.addr.clone(), "{:?} -> {:?}", op, l);
                // Every view stays within the base storage.
                prop_assert!(l.check_fits(4, storage_elements * 4).is_ok(), "{:?}", l);
                // PyTorch's contiguity: row-major addresses with no gaps.
                let dense = m.addr.windows(2).all(|w| w[1] == w[0] + 1);
                if l.is_contiguous() && l.numel() > 0 {
                    prop_assert!(dense, "{:?} reported contiguous", l);
                }
            }
        }
    }
}
