//! The state dict of an `nn.Module` saved whole (`torch.save(model)`, read
//! with [`LoadOptions::with_inert`](crate::checkpoint::LoadOptions::with_inert)):
//! the names and tensors `model.state_dict()` gives, found in the inert
//! objects' state without importing anything.
//!
//! PyTorch's `Module.state_dict` (`torch/nn/modules/module.py`) lists, for
//! each module, its `_parameters` that are not `None`, then its `_buffers`
//! that are not `None` and not in `_non_persistent_buffers_set`, then each
//! child of `_modules` (not `None`) under `name.`, recursively. A tensor
//! reachable under two names (tied weights) is listed under both. A
//! module's `get_extra_state` (`_extra_state`) runs its class's code, and is
//! not followed.

use crate::error::CheckpointError;
use std::collections::HashSet;

use super::access::ValueRef;
use crate::checkpoint::pickle::{NodeId, Value};
use crate::{Error, Result, Tensor};

impl<'c> ValueRef<'c> {
    /// The names and tensors `module.state_dict()` would give for the
    /// `nn.Module` saved here (an inert object, as `torch.save(model)` reads
    /// with `inert`), in PyTorch's order: parameters, persistent buffers,
    /// then each child module under `name.`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when this is not an inert object holding
    /// `_parameters`, `_buffers` and `_modules`, or one of them holds other
    /// than tensors (and `None`).
    pub fn module_state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        let mut on_path = HashSet::new();
        self.module_into("", &mut on_path, &mut out)?;
        Ok(out)
    }

    fn module_into(
        &self,
        prefix: &str,
        on_path: &mut HashSet<NodeId>,
        out: &mut Vec<(String, Tensor)>,
    ) -> Result<()> {
        let not_a_module = || {
            Error::Checkpoint(CheckpointError::ValueType {
                path: prefix.trim_end_matches('.').to_owned(),
                expected: "an nn.Module (an inert object with _parameters, _buffers and _modules)",
                found: self.kind().name(),
            })
        };
        if self.as_object().is_none() {
            return Err(not_a_module());
        }
        let Value::Node(id) = self.raw() else {
            return Err(not_a_module());
        };
        if !on_path.insert(*id) {
            return Ok(()); // a module holding itself: PyTorch would recurse forever
        }
        let field = |name: &str| -> Result<Option<ValueRef<'c>>> {
            Ok(self
                .as_dict()?
                .find(|(k, _)| k.as_str().is_ok_and(|k| k == name))
                .map(|(_, v)| v))
        };
        let (Some(params), Some(buffers), Some(modules)) = (
            field("_parameters")?,
            field("_buffers")?,
            field("_modules")?,
        ) else {
            return Err(not_a_module());
        };
        let non_persistent: HashSet<&str> = match field("_non_persistent_buffers_set")? {
            Some(set) => set.as_list()?.filter_map(|v| v.as_str().ok()).collect(),
            None => HashSet::new(),
        };
        for (k, v) in params.as_dict()? {
            if !v.is_none() {
                out.push((
                    format!("{prefix}{}", k.as_str()?),
                    v.as_tensor()?.tensor.clone(),
                ));
            }
        }
        for (k, v) in buffers.as_dict()? {
            let name = k.as_str()?;
            if !v.is_none() && !non_persistent.contains(name) {
                out.push((format!("{prefix}{name}"), v.as_tensor()?.tensor.clone()));
            }
        }
        for (k, m) in modules.as_dict()? {
            if !m.is_none() {
                m.module_into(&format!("{prefix}{}.", k.as_str()?), on_path, out)?;
            }
        }
        on_path.remove(id);
        Ok(())
    }
}
