//! Gradients: every differentiable operation checked against central finite
//! differences in float64, the storage facts of PyTorch's documented example,
//! the rules of leaves, views, in-place writes and grad mode, a two-layer
//! perceptron that learns, and gradients compared with PyTorch's own on a
//! fixture it wrote (`scripts/make_autograd_fixture.py`).

use crate::common;
use stowage::TensorError;

use stowage::autograd::{self, GradRole};
use stowage::checkpoint::dotted;
use stowage::{DType, Error, Tensor};

/// Whether `a` and `b` agree element by element to 1e-12, relatively (the
/// float64 answers of PyTorch and stowage differ only in rounding).
fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()))
}

/// Deterministic values in [-1, 1) (a 64-bit LCG), so failures reproduce.
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(noise(n, seed), shape).unwrap()
}

/// `rand` shifted into [0.5, 1.5): inputs for log, pow with fractional exponents, div.
fn positive(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    let v = noise(n, seed).into_iter().map(|x| 1.0 + x / 2.0).collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// Checks the gradients `backward` gives `f` at `inputs` against central
/// differences of `sum(f(inputs) * w)` for a fixed random `w` (so every output
/// element's gradient counts with its own weight).
/// A 1-D float64 leaf that requires grad.
fn leaf(v: &[f64]) -> Tensor {
    Tensor::from_slice(v)
        .unwrap()
        .with_requires_grad(true)
        .unwrap()
}

/// A leaf's gradient as JSON, to compare with PyTorch's `tolist()`.
fn grad(t: &Tensor) -> serde_json::Value {
    serde_json::json!(values(&t.grad().unwrap()))
}

fn gradcheck(name: &str, inputs: Vec<Tensor>, f: impl Fn(&[Tensor]) -> stowage::Result<Tensor>) {
    gradcheck_with(name, inputs, 1e-6, 1e-7, f)
}

fn gradcheck_with(
    name: &str,
    inputs: Vec<Tensor>,
    eps: f64,
    tol: f64,
    f: impl Fn(&[Tensor]) -> stowage::Result<Tensor>,
) {
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.deep_clone().unwrap().with_requires_grad(true).unwrap())
        .collect();
    let out = f(&leaves).unwrap();
    assert!(out.requires_grad(), "{name}: output does not require grad");
    let w = rand(out.shape(), 99).to_dtype(out.dtype()).unwrap();
    let weighted = |out: &Tensor| out.mul(&w).unwrap().sum().unwrap();
    weighted(&out).backward().unwrap();

    let _no_grad = autograd::no_grad();
    for (i, leaf) in leaves.iter().enumerate() {
        let analytic = values(
            &leaf
                .grad()
                .unwrap_or_else(|| panic!("{name}: no grad for input {i}")),
        );
        assert_eq!(
            leaf.grad().unwrap().shape(),
            leaf.shape(),
            "{name}: grad shape"
        );
        let base = values(leaf);
        for j in 0..base.len() {
            let at = |delta: f64| {
                let xs: Vec<Tensor> = leaves
                    .iter()
                    .enumerate()
                    .map(|(k, l)| {
                        let mut v = values(l);
                        if k == i {
                            v[j] += delta;
                        }
                        Tensor::from_vec(v, l.shape())
                            .unwrap()
                            .to_dtype(l.dtype())
                            .unwrap()
                    })
                    .collect();
                weighted(&f(&xs).unwrap()).to_vec::<f64>().unwrap()[0]
            };
            let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
            let err = (analytic[j] - numeric).abs();
            assert!(
                err <= tol.max(tol * numeric.abs()) * 10.0,
                "{name}: d/d input {i}[{j}]: backward {} vs finite difference {numeric}",
                analytic[j]
            );
        }
    }
}

#[test]
fn documented_example_grad_has_its_own_storage() {
    let t = Tensor::zeros(&[3], DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    t.sum().unwrap().backward().unwrap();
    let grad = t.grad().unwrap();
    assert!(t
        .untyped_storage()
        .tolist()
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    assert!(grad
        .untyped_storage()
        .tolist()
        .unwrap()
        .iter()
        .any(|&b| b != 0));
    assert_eq!(grad.to_vec::<f32>().unwrap(), [1.0; 3]);
    assert_ne!(grad.data_ptr(), t.data_ptr());
    assert!(!grad.shares_storage_with(&t));
    assert!(!grad.requires_grad());
}

#[test]
fn elementwise_gradients_match_finite_differences() {
    let (a, b) = (rand(&[3, 4], 1), rand(&[3, 4], 2));
    let p = positive(&[3, 4], 3);
    gradcheck("add", vec![a.clone(), b.clone()], |x| x[0].add(&x[1]));
    gradcheck("sub", vec![a.clone(), b.clone()], |x| x[0].sub(&x[1]));
    gradcheck("mul", vec![a.clone(), b.clone()], |x| x[0].mul(&x[1]));
    gradcheck("div", vec![a.clone(), p.clone()], |x| x[0].div(&x[1]));
    gradcheck("neg", vec![a.clone()], |x| x[0].neg());
    gradcheck("exp", vec![a.clone()], |x| x[0].exp());
    gradcheck("log", vec![p.clone()], |x| x[0].log());
    gradcheck("pow 3", vec![a.clone()], |x| x[0].pow(3.0));
    gradcheck("pow 0.5", vec![p.clone()], |x| x[0].pow(0.5));
    gradcheck("pow -2", vec![p.clone()], |x| x[0].pow(-2.0));
    gradcheck("pow 0", vec![a.clone()], |x| x[0].pow(0.0));
    // Away from the kink at 0, where the derivative jumps.
    let r = Tensor::from_vec(vec![-0.7, 0.3, 1.2, -0.2, 0.9, -1.5], &[2, 3]).unwrap();
    gradcheck("relu", vec![r], |x| x[0].relu());
    gradcheck("scalar operands", vec![a.clone()], |x| {
        x[0].add(2.0)?.mul(-3.0)?.sub(0.5)?.div(4.0)
    });
}

#[test]
fn broadcasting_gradients_are_reduced_to_each_operand() {
    let (m, row, col) = (rand(&[3, 4], 4), rand(&[4], 5), rand(&[3, 1], 6));
    gradcheck("add row", vec![m.clone(), row.clone()], |x| x[0].add(&x[1]));
    gradcheck("mul col", vec![m.clone(), col.clone()], |x| x[0].mul(&x[1]));
    gradcheck("outer", vec![col.clone(), row.clone()], |x| x[0].mul(&x[1]));
    gradcheck("div by row", vec![m, positive(&[4], 7)], |x| {
        x[0].div(&x[1])
    });
    gradcheck("sub 0-dim", vec![col, rand(&[], 8)], |x| x[0].sub(&x[1]));
}

#[test]
fn reduction_and_matmul_gradients_match_finite_differences() {
    let x = rand(&[2, 3, 4], 10);
    gradcheck("sum", vec![x.clone()], |x| x[0].sum());
    gradcheck("sum dim 1", vec![x.clone()], |x| x[0].sum_dims(&[1], false));
    gradcheck("sum dims 0,-1 keepdim", vec![x.clone()], |x| {
        x[0].sum_dims(&[0, -1], true)
    });
    gradcheck("mean", vec![x.clone()], |x| x[0].mean());
    gradcheck("mean dim 2", vec![x.clone()], |x| {
        x[0].mean_dims(&[2], false)
    });
    gradcheck("sum_to_size", vec![x], |x| x[0].sum_to_size(&[3, 1]));
    let (a, b) = (rand(&[3, 4], 11), rand(&[4, 5], 12));
    gradcheck("matmul", vec![a.clone(), b.clone()], |x| x[0].matmul(&x[1]));
    gradcheck("matmul of transposes", vec![a, b], |x| {
        x[1].t()?.matmul(&x[0].t()?)
    });
    // Every path of ATen's matmul: dot, mv, vector @ matrix, folded batches,
    // broadcast batches.
    let shapes: [(&[usize], &[usize]); 7] = [
        (&[4], &[4]),
        (&[3, 4], &[4]),
        (&[4], &[4, 2]),
        (&[2, 3, 4], &[4]),
        (&[2, 3, 4], &[4, 2]),
        (&[2, 1, 3, 4], &[3, 4, 2]),
        (&[4], &[2, 4, 3]),
    ];
    for (i, (sa, sb)) in shapes.into_iter().enumerate() {
        let (a, b) = (rand(sa, 20 + i as u64), rand(sb, 40 + i as u64));
        gradcheck(&format!("matmul {sa:?} @ {sb:?}"), vec![a, b], |x| {
            x[0].matmul(&x[1])
        });
    }
}

#[test]
fn view_gradients_are_scattered_into_the_base() {
    let x = rand(&[4, 6], 20);
    gradcheck("view", vec![x.clone()], |x| {
        x[0].view(&[2, -1, 3])?.mul(&x[0].view(&[2, 4, 3])?)
    });
    gradcheck("reshape of a transpose (copies)", vec![x.clone()], |x| {
        x[0].t()?.reshape(&[-1])?.pow(2.0)
    });
    gradcheck("transpose", vec![x.clone()], |x| {
        x[0].transpose(0, 1)?.exp()
    });
    gradcheck("permute", vec![rand(&[2, 3, 4], 21)], |x| {
        x[0].permute(&[2, 0, 1])?.pow(2.0)
    });
    gradcheck("narrow", vec![x.clone()], |x| {
        x[0].narrow(1, 2, 3)?.pow(2.0)
    });
    gradcheck("select", vec![x.clone()], |x| x[0].select(0, -1)?.pow(2.0));
    gradcheck("slice with step", vec![x.clone()], |x| {
        x[0].slice(1, Some(1), None, 2)?.pow(2.0)
    });
    gradcheck("expand", vec![rand(&[3, 1], 22)], |x| {
        x[0].expand(&[2, 3, 4])?.pow(2.0)
    });
    gradcheck("squeeze, unsqueeze", vec![rand(&[3, 1, 2], 23)], |x| {
        x[0].squeeze()
            .unsqueeze(0)?
            .squeeze_dim(0)?
            .unsqueeze(-1)?
            .pow(2.0)
    });
    gradcheck("flatten", vec![rand(&[2, 3, 4], 24)], |x| {
        x[0].flatten(1, 2)?.pow(2.0)
    });
    gradcheck("diagonal", vec![x.clone()], |x| {
        x[0].diagonal(1, 0, 1)?.pow(2.0)
    });
    gradcheck("unfold (overlapping windows)", vec![rand(&[7], 25)], |x| {
        x[0].unfold(0, 3, 2)?.pow(2.0)
    });
    gradcheck("split", vec![x.clone()], |x| {
        let parts = x[0].split(4, 1)?;
        parts[0]
            .pow(2.0)?
            .sum_dims(&[1], false)?
            .add(&parts[1].exp()?.sum_dims(&[1], false)?)
    });
    gradcheck("chunk", vec![x.clone()], |x| x[0].chunk(3, 0)?[1].pow(3.0));
    gradcheck("unbind", vec![x.clone()], |x| {
        let rows = x[0].unbind(0)?;
        rows[0].mul(&rows[3])
    });
    gradcheck("as_strided (overlapping)", vec![rand(&[6], 26)], |x| {
        x[0].as_strided(&[3, 3], &[1, 1], 1)?.pow(2.0)
    });
    // An input that overlaps itself: each storage element's gradient is
    // shared among the input elements on it, then summed back by expand.
    gradcheck(
        "as_strided of an expanded input",
        vec![rand(&[3, 1], 27)],
        |x| {
            x[0].expand(&[3, 4])?
                .as_strided(&[2, 2], &[1, 1], 0)?
                .pow(2.0)
        },
    );
    gradcheck("views of views", vec![x], |x| {
        x[0].t()?
            .narrow(0, 1, 4)?
            .select(1, 2)?
            .unsqueeze(1)?
            .expand(&[4, 2])?
            .pow(2.0)
    });
}

#[test]
fn dtype_conversion_gradients_flow_back_in_the_source_dtype() {
    // Rounding to float32 in the middle limits the finite differences to its precision.
    gradcheck_with(
        "float64 → float32 → float64",
        vec![rand(&[5], 30)],
        1e-3,
        1e-4,
        |x| {
            x[0].to_dtype(DType::Float32)?
                .pow(2.0)?
                .to_dtype(DType::Float64)
        },
    );
    // A float32 leaf: its gradient is float32, checked with float32's precision.
    let x = rand(&[4], 31).to_dtype(DType::Float32).unwrap();
    gradcheck_with("float32 → float64", vec![x], 1e-2, 1e-4, |x| {
        x[0].to_dtype(DType::Float64)?.pow(2.0)
    });
    let leaf = rand(&[3], 32)
        .to_dtype(DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let mixed = leaf.mul(&rand(&[3], 33)).unwrap(); // float32 × float64 → float64
    assert_eq!(mixed.dtype(), DType::Float64);
    mixed.sum().unwrap().backward().unwrap();
    assert_eq!(leaf.grad().unwrap().dtype(), DType::Float32);
}

#[test]
fn a_view_gradient_lands_on_the_right_elements_of_its_base() {
    let x = Tensor::zeros(&[3, 4], DType::Float64)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let v = x.narrow(0, 1, 2).unwrap().select(1, 2).unwrap(); // x[1:3, 2]
    assert!(!v.is_leaf());
    assert_eq!(v.grad_fn_name(), Some("SelectBackward0"));
    v.mul(&Tensor::from_slice(&[10.0f64, 20.0]).unwrap())
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let mut expected = vec![0.0; 12];
    expected[4 + 2] = 10.0;
    expected[8 + 2] = 20.0;
    assert_eq!(values(&x.grad().unwrap()), expected);
    assert!(v.grad().is_none(), "only leaves keep a grad");
}

#[test]
fn gradients_accumulate_until_cleared() {
    let w = Tensor::from_slice(&[1.0f64, 2.0])
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let loss = w.pow(2.0).unwrap().sum().unwrap();
    loss.backward().unwrap();
    let grad = w.grad().unwrap();
    assert_eq!(values(&grad), [2.0, 4.0]);
    // The graph is kept: a second backward adds, into the same storage.
    loss.backward().unwrap();
    assert_eq!(values(&grad), [4.0, 8.0]);
    assert_eq!(w.grad().unwrap().data_ptr(), grad.data_ptr());
    // A second graph through the same leaf adds too.
    w.mul(3.0).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(values(&grad), [7.0, 11.0]);
    w.zero_grad().unwrap();
    assert_eq!(values(&w.grad().unwrap()), [0.0, 0.0]);
    assert_eq!(w.grad().unwrap().data_ptr(), grad.data_ptr());
    w.set_grad(None).unwrap();
    assert!(w.grad().is_none());
    // A leaf used twice in one graph gets the sum of both paths.
    w.mul(&w)
        .unwrap()
        .add(&w)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(values(&w.grad().unwrap()), [3.0, 5.0]);
    // The same leaf through a clone of its handle shares the gradient.
    let alias = w.clone();
    assert_eq!(values(&alias.grad().unwrap()), [3.0, 5.0]);
}

#[test]
fn backward_with_an_explicit_gradient() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0])
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let y = x.pow(2.0).unwrap();
    assert!(
        matches!(y.backward(), Err(Error::Tensor(TensorError::BackwardNonScalar { shape })) if shape == [3])
    );
    y.backward_with(&Tensor::from_slice(&[1.0f64, 0.1, 0.01]).unwrap())
        .unwrap();
    let g = values(&x.grad().unwrap());
    for (g, e) in g.iter().zip([2.0, 0.4, 0.06]) {
        assert!((g - e).abs() < 1e-12);
    }
    assert!(matches!(
        y.backward_with(&Tensor::ones(&[2], DType::Float64).unwrap()),
        Err(Error::Tensor(TensorError::GradMismatch { expected, found, .. })) if expected == [3] && found == [2]
    ));
    let plain = Tensor::ones(&[1], DType::Float64).unwrap();
    assert!(matches!(
        plain.backward(),
        Err(Error::Tensor(TensorError::NoGradFn))
    ));
}

#[test]
fn requires_grad_rules() {
    let mut i = Tensor::zeros(&[2], DType::Int64).unwrap();
    assert!(matches!(
        i.requires_grad_(true),
        Err(Error::Tensor(TensorError::GradNotFloat {
            dtype: DType::Int64
        }))
    ));
    let x = Tensor::ones(&[2], DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    assert!(x.is_leaf() && x.requires_grad() && x.grad_fn_name().is_none());
    let mut y = x.mul(2.0).unwrap();
    assert!(!y.is_leaf() && y.requires_grad());
    assert!(matches!(
        y.requires_grad_(false),
        Err(Error::Tensor(TensorError::NotALeaf))
    ));
    let d = y.detach();
    assert!(!d.requires_grad() && d.is_leaf() && d.shares_storage_with(&y));
    // Integer results never require grad.
    assert!(!x.to_dtype(DType::Int32).unwrap().requires_grad());
    let mut x2 = x.clone();
    x2.requires_grad_(false).unwrap();
    assert!(!x2.requires_grad() && x.requires_grad());
}

#[test]
fn in_place_writes_to_what_requires_grad_are_refused_while_recording() {
    let x = Tensor::ones(&[2, 2], DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let role = |r: stowage::Result<()>| match r {
        Err(Error::Tensor(TensorError::InPlaceRequiresGrad { role, .. })) => Some(role),
        _ => None,
    };
    assert_eq!(role(x.add_(1.0).map(|_| ())), Some(GradRole::Leaf));
    assert_eq!(role(x.fill_(0.0).map(|_| ())), Some(GradRole::Leaf));
    assert_eq!(role(x.set(&[0, 0], 2.0)), Some(GradRole::Leaf));
    let v = x.t().unwrap().narrow(0, 0, 1).unwrap();
    assert_eq!(role(v.zero_().map(|_| ())), Some(GradRole::ViewOfLeaf));
    let y = x.mul(2.0).unwrap();
    assert_eq!(role(y.set(&[0, 0], 2.0)), Some(GradRole::Computed));
    // Element writes through a view of a computed tensor are not recorded,
    // nor is any write through an `as_strided` view, of a computed tensor or
    // of one that would start requiring grad.
    let yv = y.narrow(0, 0, 1).unwrap();
    assert_eq!(role(yv.set(&[0, 0], 1.0)), Some(GradRole::ViewOfComputed));
    let strided = y.as_strided(&[2], &[1], 0).unwrap();
    assert_eq!(
        role(strided.add_(1.0).map(|_| ())),
        Some(GradRole::StridedView)
    );
    let plain = Tensor::zeros(&[4], DType::Float32).unwrap();
    let x2 = x.view(&[4]).unwrap().narrow(0, 0, 2).unwrap();
    let strided = plain.as_strided(&[2], &[1], 0).unwrap();
    assert_eq!(
        role(strided.add_(&x2).map(|_| ())),
        Some(GradRole::StridedView)
    );
    // As in PyTorch: no recorded write through one of several views one call
    // made, or through a view made under no_grad (a scalar operand is not
    // recorded on a tensor that does not require grad).
    let pieces = plain.split(2, 0).unwrap();
    assert_eq!(
        role(pieces[0].add_(&x2).map(|_| ())),
        Some(GradRole::MultiOutputView)
    );
    pieces[0].add_(1.0).unwrap();
    let rows = y.unbind(0).unwrap();
    assert_eq!(
        role(rows[0].mul_(2.0).map(|_| ())),
        Some(GradRole::MultiOutputView)
    );
    let quiet = {
        let _g = autograd::no_grad();
        plain.narrow(0, 2, 2).unwrap()
    };
    assert_eq!(
        role(quiet.mul_(&x2).map(|_| ())),
        Some(GradRole::NoGradView)
    );
    assert!(!plain.requires_grad());
    assert_eq!(values(&x.to_dtype(DType::Float64).unwrap()), [1.0; 4]);
    // Under no_grad (an optimiser step) the leaf may be written.
    {
        let _g = autograd::no_grad();
        x.mul_(0.5).unwrap();
        v.fill_(7.0).unwrap();
    }
    assert_eq!(
        values(&x.detach().to_dtype(DType::Float64).unwrap()),
        [7.0, 0.5, 7.0, 0.5]
    );
    // The data, detached, is writable while recording.
    x.detach().fill_(1.0).unwrap();
}

#[test]
fn grad_mode_is_per_thread_and_restored() {
    let x = Tensor::ones(&[2], DType::Float64)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    assert!(autograd::is_grad_enabled());
    {
        let _g = autograd::no_grad();
        assert!(!autograd::is_grad_enabled());
        assert!(!x.exp().unwrap().requires_grad());
        let other_thread = std::thread::spawn(autograd::is_grad_enabled)
            .join()
            .unwrap();
        assert!(other_thread, "grad mode is per thread");
        {
            let _on = autograd::set_grad_enabled(true);
            assert!(x.exp().unwrap().requires_grad());
        }
        assert!(!autograd::is_grad_enabled());
    }
    assert!(autograd::is_grad_enabled());
    assert!(x.exp().unwrap().requires_grad());
}

#[test]
fn printing_shows_requires_grad_and_grad_fn_as_pytorch() {
    let t = Tensor::zeros(&[3], DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    assert_eq!(t.to_string(), "tensor([0., 0., 0.], requires_grad=True)");
    assert_eq!(
        t.sum().unwrap().to_string(),
        "tensor(0., grad_fn=<SumBackward0>)"
    );
    assert_eq!(
        t.mul(2.0).unwrap().to_string(),
        "tensor([0., 0., 0.], grad_fn=<MulBackward0>)"
    );
}

#[test]
fn saving_records_the_flag_not_the_gradient() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grad.pt");
    let w = Tensor::ones(&[2], DType::Float32)
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    w.sum().unwrap().backward().unwrap();
    let computed = w.mul(3.0).unwrap();
    let ckpt = stowage::Checkpoint::from_state_dict([
        ("leaf", w.clone()),
        ("computed", computed),
        ("detached", w.detach()),
    ]);
    stowage::save(&path, &ckpt).unwrap();
    let back = stowage::load(&path).unwrap();
    let tensors: Vec<Tensor> = back
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(tensors.len(), 3);
    // Loaded tensors are leaves: a computed tensor comes back as a leaf that
    // requires grad, as PyTorch loads it; no gradient is saved.
    assert!(tensors[0].requires_grad() && tensors[0].is_leaf() && tensors[0].grad().is_none());
    assert!(tensors[1].requires_grad() && tensors[1].is_leaf());
    assert!(!tensors[2].requires_grad());
}

/// A two-layer perceptron (2 → 16 → 1, relu) fitted to `y = x0·x1 + 0.5·x0`
/// on 32 fixed points with plain gradient descent lowers its loss.
#[test]
fn two_layer_perceptron_learns() {
    let n = 32;
    let xs = noise(2 * n, 40);
    let ys: Vec<f32> = xs
        .chunks(2)
        .map(|p| (p[0] * p[1] + 0.5 * p[0]) as f32)
        .collect();
    let x = Tensor::from_vec(xs.iter().map(|&v| v as f32).collect(), &[n, 2]).unwrap();
    let y = Tensor::from_vec(ys, &[n, 1]).unwrap();
    let param = |shape: &[usize], seed: u64, scale: f64| {
        let v: Vec<f32> = noise(shape.iter().product(), seed)
            .iter()
            .map(|&v| (v * scale) as f32)
            .collect();
        Tensor::from_vec(v, shape)
            .unwrap()
            .with_requires_grad(true)
            .unwrap()
    };
    let params = [
        param(&[2, 16], 41, 0.8),
        param(&[16], 42, 0.1),
        param(&[16, 1], 43, 0.4),
        param(&[1], 44, 0.1),
    ];
    let loss_of = |p: &[Tensor]| {
        let hidden = x.matmul(&p[0])?.add(&p[1])?.relu()?;
        let pred = hidden.matmul(&p[2])?.add(&p[3])?;
        pred.sub(&y)?.pow(2.0)?.mean()
    };
    let mut losses = Vec::new();
    for _ in 0..200 {
        let loss = loss_of(&params).unwrap();
        losses.push(loss.item().unwrap().to_f64());
        for p in &params {
            p.set_grad(None).unwrap();
        }
        loss.backward().unwrap();
        let _g = autograd::no_grad();
        for p in &params {
            p.add_(&p.grad().unwrap().mul(-0.2).unwrap()).unwrap();
        }
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(last < first * 0.25, "loss went from {first} to {last}");
    assert!(losses[1] < first, "the first step lowers the loss");
}

/// PyTorch's own gradients for a small network on fixed data
/// (`fixtures/autograd_mlp.pt`, written by `scripts/make_autograd_fixture.py`).
#[test]
fn gradients_match_pytorch() {
    let ckpt = stowage::load(common::fixture("autograd_mlp")).unwrap();
    let get = |name: &str| -> Tensor {
        ckpt.tensors()
            .unwrap()
            .into_iter()
            .find(|(p, _)| dotted(p) == name)
            .unwrap_or_else(|| panic!("fixture has no {name}"))
            .1
            .tensor
            .clone()
    };
    let params: Vec<Tensor> = ["w1", "b1", "w2", "b2"]
        .iter()
        .map(|n| get(&format!("params.{n}")))
        .collect();
    assert!(params.iter().all(|p| p.requires_grad() && p.is_leaf()));
    let (x, y) = (get("x"), get("y"));
    let hidden = x
        .matmul(&params[0])
        .unwrap()
        .add(&params[1])
        .unwrap()
        .relu()
        .unwrap();
    let out = hidden.matmul(&params[2]).unwrap().add(&params[3]).unwrap();
    let loss = out
        .sub(&y)
        .unwrap()
        .pow(2.0)
        .unwrap()
        .mean()
        .unwrap()
        .add(
            &params[0]
                .t()
                .unwrap()
                .narrow(0, 0, 2)
                .unwrap()
                .exp()
                .unwrap()
                .sum()
                .unwrap()
                .log()
                .unwrap(),
        )
        .unwrap();
    loss.backward().unwrap();
    assert!(close(&values(&loss), &values(&get("loss"))));
    for (p, n) in params.iter().zip(["w1", "b1", "w2", "b2"]) {
        let expected = get(&format!("grads.{n}"));
        assert!(
            close(&values(&p.grad().unwrap()), &values(&expected)),
            "grad of {n}"
        );
    }
}

/// Each operation's `grad_fn` has the name PyTorch 2.15 gives it
/// (`type(y.grad_fn).__name__` for `x = torch.ones(2, 3, requires_grad=True)`).
#[test]
fn grad_fn_names_are_pytorchs() {
    let mut x = Tensor::ones(&[2, 3], DType::Float32).unwrap();
    x.requires_grad_(true).unwrap();
    let mut v = Tensor::ones(&[3], DType::Float32).unwrap();
    v.requires_grad_(true).unwrap();
    let name = |t: stowage::Result<Tensor>| t.unwrap().grad_fn_name();
    let cases: Vec<(&str, Option<&str>)> = vec![
        ("t", name(x.t())),
        ("t of 1-D", name(v.t())),
        ("transpose", name(x.transpose(0, 1))),
        ("view", name(x.view(&[6]))),
        ("reshape (a view)", name(x.reshape(&[6]))),
        (
            "flatten of a 0-dim tensor",
            name(v.sum().unwrap().flatten(0, -1)),
        ),
        ("permute", name(x.permute(&[1, 0]))),
        ("narrow", name(x.narrow(1, 0, 2))),
        ("select", name(x.select(0, 1))),
        ("expand", name(x.narrow(0, 0, 1).unwrap().expand(&[4, 3]))),
        ("unsqueeze", name(x.unsqueeze(0))),
        ("squeeze_dim", name(x.unsqueeze(0).unwrap().squeeze_dim(0))),
        ("squeeze", x.unsqueeze(0).unwrap().squeeze().grad_fn_name()),
        ("as_strided", name(x.as_strided(&[2], &[1], 0))),
        ("unfold", name(x.unfold(1, 2, 1))),
        ("diagonal", name(x.diagonal(0, 0, 1))),
        ("contiguous", name(x.t().unwrap().contiguous())),
        ("clone", name(x.deep_clone())),
        ("to", name(x.to_dtype(DType::Float64))),
        ("sum", name(x.sum())),
        ("sum dims", name(x.sum_dims(&[0], false))),
        ("mean", name(x.mean())),
        ("mm", name(x.matmul(&x.t().unwrap()))),
        ("pow", name(x.pow(2.0))),
        ("neg", name(x.neg())),
        ("add", name(x.add(1.0))),
        ("mul", name(x.mul(&x))),
        ("div", name(x.div(2.0))),
        ("sub", name(x.sub(&x))),
    ];
    let want = [
        "TBackward0",
        "TBackward0",
        "TransposeBackward0",
        "ViewBackward0",
        "ViewBackward0",
        "ViewBackward0",
        "PermuteBackward0",
        "SliceBackward0",
        "SelectBackward0",
        "ExpandBackward0",
        "UnsqueezeBackward0",
        "SqueezeBackward1",
        "SqueezeBackward0",
        "AsStridedBackward0",
        "UnfoldBackward0",
        "DiagonalBackward0",
        "CloneBackward0",
        "CloneBackward0",
        "ToCopyBackward0",
        "SumBackward0",
        "SumBackward1",
        "MeanBackward0",
        "MmBackward0",
        "PowBackward0",
        "NegBackward0",
        "AddBackward0",
        "MulBackward0",
        "DivBackward0",
        "SubBackward0",
    ];
    for ((op, got), want) in cases.into_iter().zip(want) {
        assert_eq!(got, Some(want), "{op}");
    }
    // sum_to_size: a sum, then a view only when leading dimensions go away.
    assert_eq!(
        x.sum_to_size(&[1, 3]).unwrap().grad_fn_name(),
        Some("SumBackward1")
    );
    assert_eq!(
        x.sum_to_size(&[3]).unwrap().grad_fn_name(),
        Some("ViewBackward0")
    );
    // A reshape that must copy: PyTorch's `_unsafe_view` of a clone.
    let copied = x.t().unwrap().reshape(&[6]).unwrap();
    assert_eq!(copied.grad_fn_name(), Some("UnsafeViewBackward0"));
    // view(dtype), even to the same dtype, is not differentiable.
    let same = x.view_dtype(DType::Float32).unwrap();
    assert!(!same.requires_grad() && same.grad_fn_name().is_none());
}

/// `ones(2) + tensor(1.0, float64)` is float32 in PyTorch (a 0-dim operand
/// lifts only the category), and each gradient comes back in its operand's
/// dtype and shape.
#[test]
fn zero_dim_operands_promote_by_category_and_gradients_follow() {
    let mut a = Tensor::ones(&[2], DType::Float32).unwrap();
    a.requires_grad_(true).unwrap();
    let mut s = Tensor::scalar(1.0f64).unwrap();
    s.requires_grad_(true).unwrap();
    for (name, y) in [
        ("add", a.add(&s).unwrap()),
        ("mul", a.mul(&s).unwrap()),
        ("div", a.div(&s).unwrap()),
        ("sub", a.sub(&s).unwrap()),
    ] {
        assert_eq!(y.dtype(), DType::Float32, "{name}");
        y.sum().unwrap().backward().unwrap();
    }
    let (ga, gs) = (a.grad().unwrap(), s.grad().unwrap());
    assert_eq!((ga.dtype(), ga.shape()), (DType::Float32, &[2][..]));
    assert_eq!((gs.dtype(), gs.shape()), (DType::Float64, &[][..]));
    // d/ds of sum(a + s) + sum(a * s) + sum(a / s) + sum(a - s) at a = 1, s = 1:
    // 2 + 2 - 2 - 2.
    assert_eq!(gs.to_vec::<f64>().unwrap(), vec![0.0]);
    assert_eq!(ga.to_vec::<f32>().unwrap(), vec![4.0, 4.0]);
    let half = Tensor::ones(&[2], DType::Float16).unwrap();
    assert_eq!(
        half.add(&Tensor::scalar(0.5f64).unwrap()).unwrap().dtype(),
        DType::Float16
    );
    let longs = Tensor::ones(&[2], DType::Int64).unwrap();
    assert_eq!(
        longs.add(1i64).unwrap().to_vec::<i64>().unwrap(),
        vec![2, 2]
    );
    assert_eq!(longs.add(1i64).unwrap().dtype(), DType::Int64);
    assert_eq!(longs.add(0.5).unwrap().dtype(), stowage::default_dtype());
    // Complex arithmetic computes, but would need conjugates to record
    // gradients: refused rather than wrong.
    let mut c = Tensor::ones(&[2], DType::Complex64).unwrap();
    assert_eq!(c.mul(&c).unwrap().dtype(), DType::Complex64);
    c.requires_grad_(true).unwrap();
    assert!(matches!(
        c.mul(2.0),
        Err(Error::Tensor(TensorError::DTypeUnsupported {
            dtype: DType::Complex64,
            ..
        }))
    ));
    let _off = stowage::autograd::no_grad();
    assert!(c.mul(2.0).is_ok());
}

/// In-place arithmetic on a computed tensor is differentiated through, as in
/// PyTorch (issue 26, item 21), and a saved tensor written since it was
/// saved makes backward fail, as PyTorch's version counter does; each case
/// against PyTorch's own answer.
#[test]
fn in_place_arithmetic_on_computed_tensors_follows_pytorch() {
    let script = r#"
import json, torch
out = {}
def leaf(v):
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)
x = leaf([1., 2., 3.])
y = x * 2; y.add_(1); (y * y).sum().backward()
out["add_"] = x.grad.tolist()
x, w = leaf([1., 2., 3.]), leaf([4., 5., 6.])
y = x * 2; y.mul_(w); y.sum().backward()
out["mul_tensor"] = [x.grad.tolist(), w.grad.tolist()]
x, z = leaf([1., 2., 3.]), leaf([0.5])
y = x * 2; y.mul_(3.0); y.add_(z); (y * x).sum().backward()
out["chain"] = [x.grad.tolist(), z.grad.tolist()]
x = leaf([1., 2., 3.])
y = x * 2; before = y * 3; y.add_(10); before.sum().backward()
out["earlier"] = x.grad.tolist()
def fails(f):
    try:
        f()
        return None
    except RuntimeError as e:
        return "modified by an inplace operation" in str(e)
x = leaf([1., 2.])
y = x.exp(); y.add_(1)
out["exp_saved"] = fails(lambda: y.sum().backward())
w = leaf([1., 2.])
y = w * w
with torch.no_grad():
    w.add_(1)
out["optimiser_step"] = fails(lambda: y.sum().backward())
print(json.dumps(out))
"#;
    let Some(answer) = common::run_torch_script(script, &[]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_slice(&answer).unwrap();

    let x = leaf(&[1., 2., 3.]);
    let y = x.mul(2.0).unwrap();
    y.add_(1.0).unwrap();
    assert_eq!(y.grad_fn_name(), Some("AddBackward0"));
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(grad(&x), want["add_"]);

    let (x, w) = (leaf(&[1., 2., 3.]), leaf(&[4., 5., 6.]));
    let y = x.mul(2.0).unwrap();
    y.mul_(&w).unwrap();
    y.sum().unwrap().backward().unwrap();
    assert_eq!(serde_json::json!([grad(&x), grad(&w)]), want["mul_tensor"]);

    let (x, z) = (leaf(&[1., 2., 3.]), leaf(&[0.5]));
    let y = x.mul(2.0).unwrap();
    y.mul_(3.0).unwrap();
    y.add_(&z).unwrap();
    y.mul(&x).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(serde_json::json!([grad(&x), grad(&z)]), want["chain"]);

    // An operation recorded before the write keeps the history it used.
    let x = leaf(&[1., 2., 3.]);
    let y = x.mul(2.0).unwrap();
    let before = y.mul(3.0).unwrap();
    y.add_(10.0).unwrap();
    before.sum().unwrap().backward().unwrap();
    assert_eq!(grad(&x), want["earlier"]);

    let modified = |r: stowage::Result<()>| match r {
        Err(e @ Error::Tensor(TensorError::SavedTensorModified { .. })) => {
            assert!(
                e.to_string().contains("modified by an inplace operation"),
                "{e}"
            );
            Some(true)
        }
        Err(e) => panic!("{e}"),
        Ok(()) => None,
    };
    // exp saves its output, which the write changed.
    let x = leaf(&[1., 2.]);
    let y = x.exp().unwrap();
    y.add_(1.0).unwrap();
    assert_eq!(y.version(), 1);
    assert_eq!(
        serde_json::json!(modified(y.sum().unwrap().backward())),
        want["exp_saved"]
    );
    // An optimiser step under no_grad between forward and backward.
    let w = leaf(&[1., 2.]);
    let y = w.mul(&w).unwrap();
    {
        let _g = autograd::no_grad();
        w.add_(1.0).unwrap();
    }
    assert_eq!(
        serde_json::json!(modified(y.sum().unwrap().backward())),
        want["optimiser_step"]
    );
}

/// In-place arithmetic through a view of a computed tensor rebases the
/// base, as PyTorch's `CopySlices` does: the base's gradient passes the
/// view's region through the operation, other views of the base see the
/// write, and views of views reach the same base; against PyTorch.
#[test]
fn in_place_arithmetic_through_views_follows_pytorch() {
    let script = r#"
import json, torch
out = {}
def leaf(v):
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)
x = leaf([[1., 2., 3.], [4., 5., 6.]])
y = x * 2; v = y.narrow(0, 0, 1); v.mul_(3); (y * y).sum().backward()
out["narrow"] = [x.grad.flatten().tolist(), type(y.grad_fn).__name__, type(v.grad_fn).__name__]
x, w = leaf([[1., 2., 3.], [4., 5., 6.]]), leaf([[1., 2.], [3., 4.], [5., 6.]])
y = x * 2; v = y.t(); v.add_(w); (y * x).sum().backward()
out["t_add"] = [x.grad.flatten().tolist(), w.grad.flatten().tolist()]
x = leaf([1., 2., 3., 4.])
y = x * 2; a = y.narrow(0, 0, 2); b = y.narrow(0, 1, 2); a.mul_(5); (b * b).sum().backward()
out["other_view"] = x.grad.tolist()
x, w = leaf([[1., 2., 3.], [4., 5., 6.]]), leaf([7., 8.])
y = x * 3; v = y.select(0, 1).narrow(0, 1, 2); v.mul_(w); (y * y).sum().backward()
out["nested"] = [x.grad.flatten().tolist(), w.grad.tolist()]
x = leaf([1., 2., 3.])
y = x * 2; y.zero_(); name = type(y.grad_fn).__name__; (y + x).sum().backward()
out["zero_"] = [x.grad.tolist(), name]
x, w = leaf([1., 2., 3.]), leaf([4.])
y = x * 2; y.copy_(w); name = type(y.grad_fn).__name__; (y * y).sum().backward()
out["copy_"] = [x.grad.tolist(), w.grad.tolist(), name]
x = leaf([[1., 2.], [3., 4.]])
y = x * 2; y.narrow(0, 0, 1).fill_(7); (y * y).sum().backward()
out["fill_view"] = x.grad.flatten().tolist()
print(json.dumps(out))
"#;
    let Some(answer) = common::run_torch_script(script, &[]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    let leaf = |v: Vec<f64>, shape: &[usize]| {
        Tensor::from_vec(v, shape)
            .unwrap()
            .with_requires_grad(true)
            .unwrap()
    };
    let grad = |t: &Tensor| values(&t.grad().unwrap());
    let want_of = |key: &str, i: usize| -> Vec<f64> {
        let w = if key == "other_view" {
            &want[key]
        } else {
            &want[key][i]
        };
        serde_json::from_value(w.clone()).unwrap()
    };
    let x23 = || leaf(vec![1., 2., 3., 4., 5., 6.], &[2, 3]);

    let x = x23();
    let y = x.mul(2.0).unwrap();
    let v = y.narrow(0, 0, 1).unwrap();
    v.mul_(3.0).unwrap();
    assert_eq!(y.grad_fn_name(), want["narrow"][1].as_str());
    assert_eq!(v.grad_fn_name(), want["narrow"][2].as_str());
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    assert!(close(&grad(&x), &want_of("narrow", 0)), "{:?}", grad(&x));

    let (x, w) = (x23(), leaf(vec![1., 2., 3., 4., 5., 6.], &[3, 2]));
    let y = x.mul(2.0).unwrap();
    let v = y.t().unwrap();
    v.add_(&w).unwrap();
    y.mul(&x).unwrap().sum().unwrap().backward().unwrap();
    assert!(close(&grad(&x), &want_of("t_add", 0)), "{:?}", grad(&x));
    assert!(close(&grad(&w), &want_of("t_add", 1)), "{:?}", grad(&w));

    let x = leaf(vec![1., 2., 3., 4.], &[4]);
    let y = x.mul(2.0).unwrap();
    let (a, b) = (y.narrow(0, 0, 2).unwrap(), y.narrow(0, 1, 2).unwrap());
    a.mul_(5.0).unwrap();
    b.mul(&b).unwrap().sum().unwrap().backward().unwrap();
    assert!(
        close(&grad(&x), &want_of("other_view", 0)),
        "{:?}",
        grad(&x)
    );

    let (x, w) = (x23(), leaf(vec![7., 8.], &[2]));
    let y = x.mul(3.0).unwrap();
    let v = y.select(0, 1).unwrap().narrow(0, 1, 2).unwrap();
    v.mul_(&w).unwrap();
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    assert!(close(&grad(&x), &want_of("nested", 0)), "{:?}", grad(&x));
    assert!(close(&grad(&w), &want_of("nested", 1)), "{:?}", grad(&w));

    // fill_, zero_ and copy_ on computed tensors, and through a view.
    let x = leaf(vec![1., 2., 3.], &[3]);
    let y = x.mul(2.0).unwrap();
    y.zero_().unwrap();
    assert_eq!(y.grad_fn_name(), want["zero_"][1].as_str());
    y.add(&x).unwrap().sum().unwrap().backward().unwrap();
    assert!(close(&grad(&x), &want_of("zero_", 0)), "{:?}", grad(&x));

    let (x, w) = (leaf(vec![1., 2., 3.], &[3]), leaf(vec![4.], &[1]));
    let y = x.mul(2.0).unwrap();
    y.copy_(&w).unwrap();
    assert_eq!(y.grad_fn_name(), want["copy_"][2].as_str());
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    assert!(close(&grad(&x), &want_of("copy_", 0)), "{:?}", grad(&x));
    assert!(close(&grad(&w), &want_of("copy_", 1)), "{:?}", grad(&w));

    let x = leaf(vec![1., 2., 3., 4.], &[2, 2]);
    let y = x.mul(2.0).unwrap();
    y.narrow(0, 0, 1).unwrap().fill_(7.0).unwrap();
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    let fill_view: Vec<f64> = serde_json::from_value(want["fill_view"].clone()).unwrap();
    assert!(close(&grad(&x), &fill_view), "{:?}", grad(&x));
}

/// A tensor that does not require grad, written in place with one that does,
/// starts requiring grad for every handle of it, and through a view its base
/// and the base's other views follow; an `as_strided` view of a computed
/// tensor follows its base's new history; against PyTorch (issue 26, item
/// 21).
#[test]
fn in_place_writes_start_history_on_tensors_without_it_as_pytorch() {
    let script = r#"
import json, torch
out = {}
def leaf(v):
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)
x = leaf([1., 2.])
acc = torch.zeros(2, dtype=torch.float64); same = acc
for k in (1., 2., 3.):
    acc.add_(x * k)
(same * same).sum().backward()
out["acc"] = [x.grad.tolist(), type(same.grad_fn).__name__, same.requires_grad]
x = leaf([1., 2.])
a = torch.ones(2, dtype=torch.float64); a.mul_(x); a.mul_(x); a.sum().backward()
out["mul_"] = [x.grad.tolist(), type(a.grad_fn).__name__]
x = leaf([3., 4.])
c = torch.zeros(2, dtype=torch.float64); c.copy_(x); (c * c).sum().backward()
out["copy_"] = [x.grad.tolist(), type(c.grad_fn).__name__]
x = leaf([1., 2.])
base = torch.zeros(4, dtype=torch.float64); v = base[:2]; v2 = base[2:]; v3 = base[1:3]
v2_before = v2.requires_grad
v.mul_(x); v.add_(x)
names = [type(t.grad_fn).__name__ for t in (base, v, v2, v3)]
(base * torch.arange(4., dtype=torch.float64)).sum().backward()
out["view"] = [x.grad.tolist(), names, v2_before, v3.requires_grad]
x = leaf([1., 2.])
base = torch.zeros(2, 3, dtype=torch.float64); v = base.t()[1]
v.add_(x); (base * base).sum().backward()
out["view_of_view"] = [x.grad.tolist(), base.tolist()]
x = leaf([1., 2.])
y = x * 2; w = y.as_strided((1,), (1,), 1); y.mul_(3); w.sum().backward()
out["strided_follows"] = [x.grad.tolist(), type(w.grad_fn).__name__]
i = torch.zeros(2, dtype=torch.int64); i.copy_(leaf([1., 2.]))
out["int"] = i.requires_grad
print(json.dumps(out))
"#;
    let Some(answer) = common::run_torch_script(script, &[]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    let zeros = |n: usize| Tensor::zeros(&[n], DType::Float64).unwrap();

    // Every handle of the tensor sees the history the write started.
    let x = leaf(&[1., 2.]);
    let acc = zeros(2);
    let same = acc.clone();
    for k in [1.0, 2.0, 3.0] {
        acc.add_(&x.mul(k).unwrap()).unwrap();
    }
    assert!(same.is_same(&acc));
    same.mul(&same).unwrap().sum().unwrap().backward().unwrap();
    let got = serde_json::json!([grad(&x), same.grad_fn_name(), same.requires_grad()]);
    assert_eq!(got, want["acc"]);

    let x = leaf(&[1., 2.]);
    let a = Tensor::ones(&[2], DType::Float64).unwrap();
    a.mul_(&x).unwrap();
    a.mul_(&x).unwrap();
    a.sum().unwrap().backward().unwrap();
    assert_eq!(
        serde_json::json!([grad(&x), a.grad_fn_name()]),
        want["mul_"]
    );

    let x = leaf(&[3., 4.]);
    let c = zeros(2);
    c.copy_(&x).unwrap();
    c.mul(&c).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(
        serde_json::json!([grad(&x), c.grad_fn_name()]),
        want["copy_"]
    );

    // Through a view: the base's history becomes CopySlices and every view
    // of it, made before, follows.
    let x = leaf(&[1., 2.]);
    let base = zeros(4);
    let (v, v2, v3) = (
        base.narrow(0, 0, 2).unwrap(),
        base.narrow(0, 2, 2).unwrap(),
        base.narrow(0, 1, 2).unwrap(),
    );
    let v2_before = v2.requires_grad();
    v.mul_(&x).unwrap();
    v.add_(&x).unwrap();
    let names: Vec<_> = [&base, &v, &v2, &v3]
        .iter()
        .map(|t| t.grad_fn_name())
        .collect();
    let arange = Tensor::from_slice(&[0., 1., 2., 3.]).unwrap();
    base.mul(&arange)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let got = serde_json::json!([grad(&x), names, v2_before, v3.requires_grad()]);
    assert_eq!(got, want["view"]);

    let x = leaf(&[1., 2.]);
    let base = Tensor::zeros(&[2, 3], DType::Float64).unwrap();
    let v = base.t().unwrap().select(0, 1).unwrap();
    v.add_(&x).unwrap();
    base.mul(&base).unwrap().sum().unwrap().backward().unwrap();
    let rows: Vec<Vec<f64>> = values(&base.detach())
        .chunks(3)
        .map(<[f64]>::to_vec)
        .collect();
    assert_eq!(serde_json::json!([grad(&x), rows]), want["view_of_view"]);

    let x = leaf(&[1., 2.]);
    let y = x.mul(2.0).unwrap();
    let w = y.as_strided(&[1], &[1], 1).unwrap();
    y.mul_(3.0).unwrap();
    w.sum().unwrap().backward().unwrap();
    let got = serde_json::json!([grad(&x), w.grad_fn_name()]);
    assert_eq!(got, want["strided_follows"]);

    let i = Tensor::zeros(&[2], DType::Int64).unwrap();
    i.copy_(&leaf(&[1., 2.])).unwrap();
    assert_eq!(serde_json::json!(i.requires_grad()), want["int"]);
}

/// Writes that PyTorch records on results recorded as views but made fresh
/// (`reshape`'s copy, `matmul`), a view function replayed on a base that is
/// not contiguous, and what PyTorch refuses once a base became a leaf or a
/// view made under no_grad saw its base written; against PyTorch.
#[test]
fn in_place_history_on_fresh_results_and_odd_bases_follows_pytorch() {
    let script = r#"
import json, torch
out = {}
f64 = torch.float64
x = torch.ones(2, 3, dtype=f64, requires_grad=True)
r = x.t().reshape(-1); r.add_(1); name = type(r.grad_fn).__name__
r.mul_(torch.arange(6., dtype=f64)); r.sum().backward()
out["reshape_copy"] = [x.grad.flatten().tolist(), name]
a = torch.ones(2, 2, 3, dtype=f64, requires_grad=True)
m = a.matmul(torch.ones(3, 2, dtype=f64)); m.mul_(2.0); name = type(m.grad_fn).__name__
m.sum().backward()
out["matmul"] = [a.grad.flatten().tolist(), name]
acc = torch.zeros_like(torch.ones(3, 2, dtype=f64).t())
x6 = torch.arange(6., dtype=f64, requires_grad=True)
acc.t().view(-1).copy_(x6)
(acc * torch.arange(6., dtype=f64).view(2, 3)).sum().backward()
out["strided_base"] = [list(acc.stride()), x6.grad.tolist()]
x, w = torch.ones(3, dtype=f64, requires_grad=True), torch.tensor([5., 7.], dtype=f64, requires_grad=True)
y = x * 2; y[:2].copy_(w); (y * y).sum().backward()
out["copy_through_view"] = [x.grad.tolist(), w.grad.tolist()]
print(json.dumps(out))
"#;
    let Some(answer) = common::run_torch_script(script, &[]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    let f64s = |v: Vec<f64>, shape: &[usize]| Tensor::from_vec(v, shape).unwrap();
    let arange6 = || f64s((0..6).map(f64::from).collect(), &[6]);
    let flat_grad = |t: &Tensor| serde_json::json!(values(&t.grad().unwrap()));

    let x = f64s(vec![1.0; 6], &[2, 3])
        .with_requires_grad(true)
        .unwrap();
    let r = x.t().unwrap().reshape(&[-1]).unwrap();
    r.add_(1.0).unwrap();
    let name = r.grad_fn_name();
    r.mul_(&arange6()).unwrap();
    r.sum().unwrap().backward().unwrap();
    assert_eq!(
        serde_json::json!([flat_grad(&x), name]),
        want["reshape_copy"]
    );

    let a = f64s(vec![1.0; 12], &[2, 2, 3])
        .with_requires_grad(true)
        .unwrap();
    let m = a.matmul(&f64s(vec![1.0; 6], &[3, 2])).unwrap();
    m.mul_(2.0).unwrap();
    let name = m.grad_fn_name();
    m.sum().unwrap().backward().unwrap();
    assert_eq!(serde_json::json!([flat_grad(&a), name]), want["matmul"]);

    let acc = Tensor::zeros_like(&f64s(vec![1.0; 6], &[3, 2]).t().unwrap()).unwrap();
    let x6 = arange6().with_requires_grad(true).unwrap();
    acc.t().unwrap().view(&[-1]).unwrap().copy_(&x6).unwrap();
    let weights = arange6().view(&[2, 3]).unwrap();
    acc.mul(&weights)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(
        serde_json::json!([acc.stride(), flat_grad(&x6)]),
        want["strided_base"]
    );

    // The operand's gradient is not the region's, overwritten after.
    let x = leaf(&[1., 1., 1.]);
    let w = leaf(&[5., 7.]);
    let y = x.mul(2.0).unwrap();
    y.narrow(0, 0, 2).unwrap().copy_(&w).unwrap();
    y.mul(&y).unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(
        serde_json::json!([grad(&x), grad(&w)]),
        want["copy_through_view"]
    );

    // PyTorch refuses these; so does stowage.
    let role = |r: stowage::Result<&Tensor>| match r {
        Err(Error::Tensor(TensorError::InPlaceRequiresGrad { role, .. })) => Some(role),
        _ => None,
    };
    let x2 = leaf(&[1., 2.]);
    let mut base = Tensor::zeros(&[3], DType::Float64).unwrap();
    let (before, old) = (base.narrow(0, 0, 2).unwrap(), base.clone());
    base.requires_grad_(true).unwrap();
    assert_eq!(role(before.add_(&x2)), Some(GradRole::ViewOfLeaf));
    assert_eq!(
        role(old.narrow(0, 1, 2).unwrap().mul_(&x2)),
        Some(GradRole::ViewOfLeaf)
    );
    assert_eq!(role(old.copy_(&leaf(&[1., 2., 3.]))), Some(GradRole::Leaf));
    assert_eq!(values(&base.detach()), [0.0; 3]);

    // A view made under no_grad, whose base is written since: using it in
    // backward is refused with PyTorch's words.
    let plain = Tensor::zeros(&[3], DType::Float64).unwrap();
    let quiet = {
        let _g = autograd::no_grad();
        plain.narrow(0, 0, 2).unwrap()
    };
    plain.narrow(0, 1, 2).unwrap().add_(&x2).unwrap();
    assert!(quiet.requires_grad());
    let err = quiet.sum().unwrap().backward().unwrap_err();
    assert!(
        matches!(err, Error::Tensor(TensorError::NoGradViewOfModifiedBase)),
        "{err}"
    );
    assert!(err
        .to_string()
        .starts_with("A view was created in no_grad mode"));

    // A gradient written in place with its own leaf: allowed, as in PyTorch,
    // and the leaf's state is not kept alive by it.
    let t = leaf(&[1., 2.]);
    t.mul(&t).unwrap().sum().unwrap().backward().unwrap();
    let g = t.grad().unwrap();
    g.add_(&t).unwrap();
    assert!(g.requires_grad());
    drop(t);
    g.sum().unwrap().backward().unwrap();
}
