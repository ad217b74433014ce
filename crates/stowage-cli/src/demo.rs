//! `stowage demo`: the storage model at work, step by step.
//!
//! Each step prints the PyTorch code (`>>> …`) and what stowage gives for
//! it: storages printed as PyTorch prints them, `data_ptr`s in hex, and
//! errors as the [`stowage::Error`] variant and its message. The same steps
//! are asserted in `crates/stowage/tests/it/walkthrough.rs`.

use std::io::{self, Write};
use std::process::ExitCode;

use stowage::{DType, Device, Tensor};

use crate::{Context, Failure};

/// Walk through PyTorch's storage model, step by step, with the PyTorch code for each step.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Prints the walk-through to `out`.
///
/// # Errors
/// A write error on `out`, or a stowage error (which would be a bug in the library).
pub fn run(_args: Args, _cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let mut page = Page { out, step: 0 };
    page.line("stowage demo: PyTorch's storage model, step by step.")?;
    page.line("Lines starting with >>> are the PyTorch code; below each is what stowage gives.")?;
    ones_storage(&mut page)?;
    clone_fill_set(&mut page)?;
    views_share_storage(&mut page)?;
    offset_data_ptr(&mut page)?;
    writes_through_views(&mut page)?;
    dtypes_over_one_storage(&mut page)?;
    meta_tensor(&mut page)?;
    gradient_storage(&mut page)?;
    page.line("")?;
    page.line("The same steps as library calls: crates/stowage/tests/it/walkthrough.rs;")?;
    page.line("PyTorch calls and their stowage names: docs/pytorch-users.md.")?;
    Ok(ExitCode::SUCCESS)
}

/// The output, with the step counter.
struct Page<'a> {
    out: &'a mut dyn Write,
    step: usize,
}

impl Page<'_> {
    /// A numbered step heading, after a blank line.
    fn heading(&mut self, title: &str) -> io::Result<()> {
        self.step += 1;
        write!(self.out, "\n== {}. {title} ==\n", self.step)
    }
    /// A line of PyTorch code.
    fn code(&mut self, python: &str) -> io::Result<()> {
        writeln!(self.out, ">>> {python}")
    }
    /// Output text (any number of lines).
    fn line(&mut self, text: impl std::fmt::Display) -> io::Result<()> {
        writeln!(self.out, "{text}")
    }
    /// The outcome of a call that must fail: the error's variant and message.
    fn error<T>(&mut self, result: stowage::Result<T>) -> Result<(), Failure> {
        match result {
            Err(e) => Ok(self.line(format_args!("Error::{}: {e}", e.name()))?),
            Ok(_) => Err(Failure::msg("demo: a call that must fail succeeded")),
        }
    }
}

/// A shape or stride as Python prints a tuple: `(3, 4)`, `(4,)`, `()`.
fn py_tuple(values: &[usize]) -> String {
    match values {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = values.iter().map(ToString::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

fn ones_storage(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("A tensor is a view of an untyped storage")?;
    let t = Tensor::ones(&[3], DType::Float32)?;
    page.code("t = torch.ones(3)")?;
    page.code("t")?;
    page.line(&t)?;
    page.code("t.untyped_storage()   # 12 bytes: float32 1.0 is 0x3f800000, stored little-endian")?;
    page.line(t.untyped_storage())?;
    Ok(())
}

fn clone_fill_set(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("Clone the storage, zero it, and set_ the tensor onto the clone")?;
    let mut t = Tensor::ones(&[3], DType::Float32)?;
    page.code("t = torch.ones(3)")?;
    let s = t.untyped_storage().deep_clone()?;
    page.code("s = t.untyped_storage().clone()   # new bytes at a new address")?;
    s.fill_(0)?;
    page.code("_ = s.fill_(0)")?;
    page.code("hex(t.untyped_storage().data_ptr()), hex(s.data_ptr())")?;
    page.line(format_args!(
        "('{:#x}', '{:#x}')",
        t.untyped_storage().data_ptr(),
        s.data_ptr()
    ))?;
    t.set_(&s, 0, &[3], &[1])?;
    page.code("t.set_(s, 0, (3,), (1,))   # storage, storage_offset, size, stride")?;
    page.line(&t)?;
    page.code("t.untyped_storage().data_ptr() == s.data_ptr()")?;
    page.line(py_bool(t.untyped_storage().data_ptr() == s.data_ptr()))?;
    page.code("t.set_(s, 1, (3,), (1,))   # one element past the end of s")?;
    page.error(t.set_(&s, 1, &[3], &[1]))?;
    Ok(())
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The base tensor of steps 3 to 5: `torch.arange(12.).view(3, 4)`.
fn grid() -> stowage::Result<Tensor> {
    Tensor::arange(0.0, 12.0, 1.0, DType::Float32)?.view(&[3, 4])
}

fn views_share_storage(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("Views copy nothing: every view reports the same storage data_ptr")?;
    let b = grid()?;
    page.code("b = torch.arange(12.).view(3, 4)")?;
    page.code("b")?;
    page.line(&b)?;
    let views = [
        ("b", b.clone()),
        ("b.view(4, 3)", b.view(&[4, 3])?),
        ("b.view(-1)", b.view(&[-1])?),
        (
            "b[1:, ::2]",
            b.slice(0, Some(1), None, 1)?.slice(1, None, None, 2)?,
        ),
        ("b[2]", b.index(2)?),
        ("b[:, 1]", b.select(1, 1)?),
        ("b.t()", b.t()?),
    ];
    page.line(format_args!(
        "{:<13} {:<9} {:<10} {:<18} {:<15} {}",
        "x", "x.size()", "x.stride()", "x.storage_offset()", "storage ptr", "x.data_ptr()"
    ))?;
    for (python, v) in &views {
        page.line(format_args!(
            "{:<13} {:<9} {:<10} {:<18} {:<15} {:#x}",
            python,
            py_tuple(v.shape()),
            py_tuple(v.stride()),
            v.storage_offset(),
            format!("{:#x}", v.untyped_storage().data_ptr()),
            v.data_ptr()
        ))?;
    }
    page.line("(storage ptr is x.untyped_storage().data_ptr(): one storage under all of them)")?;
    Ok(())
}

fn offset_data_ptr(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("A view with an offset starts inside the storage")?;
    let b = grid()?;
    let r = b.index(2)?;
    page.code("r = b[2]")?;
    page.code("r.storage_offset(), r.element_size()")?;
    page.line(format_args!(
        "({}, {})",
        r.storage_offset(),
        r.element_size()
    ))?;
    page.code("r.data_ptr() - r.untyped_storage().data_ptr()   # storage_offset * element_size")?;
    page.line(r.data_ptr().wrapping_sub(r.untyped_storage().data_ptr()))?;
    Ok(())
}

fn writes_through_views(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("A write through one view is seen through every other")?;
    let b = grid()?;
    page.code("b = torch.arange(12.).view(3, 4)")?;
    let r = b.index(2)?;
    page.code("r = b[2]")?;
    r.set(&[1], 100.0)?;
    page.code("r[1] = 100.")?;
    page.code("b")?;
    page.line(&b)?;
    page.code("b.t()[1, 2]")?;
    page.line(b.t()?.index(1)?.index(2)?)?;
    Ok(())
}

fn dtypes_over_one_storage(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("Tensors of different dtypes and shapes over one storage")?;
    let f = Tensor::ones(&[2], DType::Float32)?;
    page.code("f = torch.ones(2)")?;
    let u = f.view_dtype(DType::UInt8)?;
    page.code("u = f.view(torch.uint8)")?;
    page.code("u")?;
    page.line(&u)?;
    let h = f.view_dtype(DType::Int16)?;
    page.code("h = f.view(torch.int16)")?;
    page.code("h")?;
    page.line(&h)?;
    h.set(&[1], 0x4000i64)?;
    page.code("h[1] = 0x4000   # the high half of f[0]: 0x40000000 is float32 2.0")?;
    page.code("f")?;
    page.line(&f)?;
    let mut m = Tensor::zeros(&[0], DType::UInt8)?;
    m.set_(f.untyped_storage(), 0, &[2, 4], &[4, 1])?;
    page.code(
        "m = torch.tensor([], dtype=torch.uint8).set_(f.untyped_storage(), 0, (2, 4), (4, 1))",
    )?;
    page.code("m")?;
    page.line(&m)?;
    page.code("len({x.untyped_storage().data_ptr() for x in (f, u, h, m)})")?;
    let mut ptrs: Vec<usize> = [&f, &u, &h, &m]
        .iter()
        .map(|x| x.untyped_storage().data_ptr())
        .collect();
    ptrs.sort_unstable();
    ptrs.dedup();
    page.line(ptrs.len())?;
    Ok(())
}

fn meta_tensor(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("A meta tensor has a shape and a size in bytes, and no data")?;
    let z = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META)?;
    page.code("z = torch.zeros(2, 3, device=\"meta\")")?;
    page.code("z")?;
    page.line(&z)?;
    page.code("z.untyped_storage().nbytes(), z.untyped_storage().data_ptr()")?;
    page.line(format_args!(
        "({}, {})",
        z.untyped_storage().nbytes(),
        z.untyped_storage().data_ptr()
    ))?;
    page.code("z.tolist()")?;
    page.error(z.to_vec::<f32>())?;
    Ok(())
}

fn gradient_storage(page: &mut Page<'_>) -> Result<(), Failure> {
    page.heading("A tensor with a gradient holds a second storage")?;
    let t = Tensor::zeros(&[3], DType::Float32)?.with_requires_grad(true)?;
    page.code("t = torch.zeros(3, requires_grad=True)")?;
    t.sum()?.backward()?;
    page.code("t.sum().backward()")?;
    page.code("t.untyped_storage().tolist()   # the data: still all zero bytes")?;
    page.line(format_args!("{:?}", t.untyped_storage().tolist()?))?;
    let grad = t
        .grad()
        .ok_or_else(|| Failure::msg("demo: backward left no gradient"))?;
    page.code("t.grad.untyped_storage().tolist()   # the gradient's own storage: 3 × float32 1.0")?;
    page.line(format_args!("{:?}", grad.untyped_storage().tolist()?))?;
    page.code("t.grad")?;
    page.line(&grad)?;
    page.code("t.data_ptr() == t.grad.data_ptr()")?;
    page.line(py_bool(t.data_ptr() == grad.data_ptr()))?;
    page.code("t.add_(1)   # an in-place write to a leaf that requires grad")?;
    page.error(t.add_(1.0))?;
    {
        let _no_grad = stowage::autograd::no_grad();
        t.add_(&grad.mul(-0.5)?)?;
    }
    page.code("with torch.no_grad(): t.add_(t.grad * -0.5)   # a gradient-descent step")?;
    page.code("t")?;
    page.line(&t)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use stowage::{StorageError, TensorError};
    use super::*;

    #[test]
    fn prints_every_step() {
        let mut out = Vec::new();
        run(Args {}, &Context::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("== 8. "), "{text}");
        assert!(text.contains("tensor([-0.5000, -0.5000, -0.5000], requires_grad=True)"));
        assert!(text.contains("tensor([0., 0., 0.])"));
        let lines = text.lines().count();
        assert!((70..=120).contains(&lines), "{lines} lines");
    }

    #[test]
    fn helpers() {
        assert_eq!(py_tuple(&[]), "()");
        assert_eq!(py_tuple(&[4]), "(4,)");
        assert_eq!(py_tuple(&[3, 4]), "(3, 4)");
        assert_eq!(stowage::Error::Storage(StorageError::NotResizable).name(), "NotResizable");
        assert_eq!(
            stowage::Error::Tensor(TensorError::NotAScalar { numel: 2 }).name(),
            "NotAScalar"
        );
    }
}
