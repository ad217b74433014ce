//! The machine's state and the operations opcodes share: errors that name
//! the opcode, the stack and its marks, the memo, node limits, and the
//! container mutations (`APPEND`, `SETITEM`, `ADDITEMS`).

use super::super::value::{Node, NodeId, Value};
use super::super::PickleError;
use super::keys::KeyIndex;
use super::Machine;

impl<X: Clone + std::fmt::Debug> Machine<'_, X> {
    // ---- errors ----

    pub(super) fn underflow(&self) -> PickleError {
        PickleError::StackUnderflow {
            opcode: self.op,
            offset: self.at,
        }
    }

    pub(super) fn bad(&self, what: &'static str) -> PickleError {
        PickleError::BadText {
            what,
            offset: self.at,
        }
    }

    pub(super) fn wrong_operand(&self, expected: &'static str) -> PickleError {
        PickleError::WrongOperand {
            opcode: self.op,
            expected,
            offset: self.at,
        }
    }

    pub(super) fn unsupported(&self) -> PickleError {
        PickleError::Unsupported {
            opcode: self.op,
            offset: self.at,
        }
    }

    pub(super) fn limit(
        &self,
        limit: &'static str,
        value: usize,
        max: usize,
    ) -> Result<(), PickleError> {
        if value > max {
            return Err(PickleError::LimitExceeded {
                limit,
                value,
                max,
                offset: self.at,
            });
        }
        Ok(())
    }

    // ---- arguments ----

    /// A memo index given as a decimal line (`GET`, `PUT`).
    pub(super) fn index_line(&self, line: &[u8]) -> Result<u64, PickleError> {
        super::super::operand::index_line(line).ok_or_else(|| self.bad("memo index"))
    }

    /// A UTF-8 string argument.
    pub(super) fn utf8<'b>(&self, bytes: &'b [u8]) -> Result<&'b str, PickleError> {
        std::str::from_utf8(bytes).map_err(|_| self.bad("utf-8"))
    }

    // ---- stack ----

    pub(super) fn fence(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    pub(super) fn push(&mut self, v: Value<X>) -> Result<(), PickleError> {
        self.limit("max_stack", self.stack.len() + 1, self.limits.max_stack)?;
        self.stack.push(v);
        Ok(())
    }

    pub(super) fn pop(&mut self) -> Result<Value<X>, PickleError> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        self.stack.pop().ok_or(self.underflow())
    }

    pub(super) fn top(&self) -> Result<&Value<X>, PickleError> {
        if self.stack.len() <= self.fence() {
            return Err(self.underflow());
        }
        self.stack.last().ok_or(self.underflow())
    }

    pub(super) fn pop_n(&mut self, n: usize) -> Result<Vec<Value<X>>, PickleError> {
        if self.stack.len() < self.fence() + n {
            return Err(self.underflow());
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    /// Pops the topmost mark and returns the items above it.
    pub(super) fn pop_mark(&mut self) -> Result<Vec<Value<X>>, PickleError> {
        let mark = self.marks.pop();
        let mark = mark.ok_or(PickleError::NoMark {
            opcode: self.op,
            offset: self.at,
        })?;
        Ok(self.stack.split_off(mark.min(self.stack.len())))
    }

    /// Pops a tuple node (`REDUCE` and `NEWOBJ` arguments).
    pub(super) fn pop_tuple(&mut self) -> Result<Value<X>, PickleError> {
        let args = self.pop()?;
        match args.as_node().and_then(|id| self.graph.try_get(id)) {
            Some(Node::Tuple(_)) => Ok(args),
            _ => Err(self.wrong_operand("tuple")),
        }
    }

    // ---- memo ----

    pub(super) fn memo_get(&self, index: u64) -> Result<Value<X>, PickleError> {
        let offset = self.at;
        self.memo
            .get(&index)
            .cloned()
            .ok_or(PickleError::MemoMissing { index, offset })
    }

    pub(super) fn memo_put(&mut self, index: u64) -> Result<(), PickleError> {
        let top = self.top()?;
        if self.plan.as_ref().is_some_and(|p| !p.read.contains(&index)) {
            return Ok(());
        }
        let v = top.clone();
        if !self.memo.contains_key(&index) {
            self.limit("max_memo", self.memo.len() + 1, self.limits.max_memo)?;
        }
        self.graph.mark_shared(&v);
        self.memo.insert(index, v);
        Ok(())
    }

    // ---- nodes ----

    /// Forgets the key indexes of the nodes a hook released from the end of
    /// the graph (`Graph::release`), whose ids new nodes may take: those
    /// from the fewest nodes the graph held after a release up to
    /// `before`, its length when the hook was called. (Nodes a hook added
    /// in that call were never indexed.)
    pub(super) fn forget_released(&mut self, before: usize) {
        let from = self.graph.take_released_to();
        if from >= before {
            return;
        }
        self.tuples.forget(from, before);
        if self.keys.is_empty() {
            return;
        }
        for id in from..before {
            // Ids fit in u32: the graph refuses more nodes.
            self.keys.remove(&NodeId(id as u32));
        }
    }

    /// Adds a tuple the pickle builds (`TUPLE`, `EMPTY_TUPLE`, …), which
    /// compares by its items as a key.
    pub(super) fn tuple(&mut self, items: Vec<Value<X>>) -> Result<Value<X>, PickleError> {
        let height = self.tuples.height_of(&items);
        let v = self.node(Node::Tuple(items))?;
        if let Value::Node(id) = v {
            self.tuples.built(id, height);
        }
        Ok(v)
    }

    /// Adds a node, enforcing the node and depth limits.
    pub(super) fn node(&mut self, node: Node<X>) -> Result<Value<X>, PickleError> {
        let max = self.limits.max_nodes.min(u32::MAX as usize - 1);
        self.limit("max_nodes", self.graph.len() + 1, max)?;
        let id = self.graph.add(node);
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)?;
        Ok(Value::Node(id))
    }

    /// Checks a value that may come from a hook against the limits.
    pub(super) fn checked(&self, v: Value<X>) -> Result<Value<X>, PickleError> {
        self.limit("max_nodes", self.graph.len(), self.limits.max_nodes)?;
        if let Value::Node(id) = v {
            self.node_id(&v)?;
            self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)?;
        }
        Ok(v)
    }

    /// The id of a node value that must exist.
    pub(super) fn node_id(&self, v: &Value<X>) -> Result<Option<NodeId>, PickleError> {
        match *v {
            Value::Node(id) if self.graph.try_get(id).is_none() => Err(PickleError::DanglingNode {
                id: id.0,
                offset: self.at,
            }),
            Value::Node(id) => Ok(Some(id)),
            _ => Ok(None),
        }
    }

    /// `APPEND` / `APPENDS`: extends the list `target`.
    pub(super) fn extend(
        &mut self,
        target: &Value<X>,
        items: Vec<Value<X>>,
    ) -> Result<(), PickleError> {
        let wrong = PickleError::WrongTarget {
            opcode: self.op,
            expected: "list",
            offset: self.at,
        };
        let id = self.node_id(target)?.ok_or(wrong.clone())?;
        self.graph.note_children(id, &items);
        match self.graph.try_get_mut(id) {
            Some(Node::List(list)) => list.extend(items),
            _ => return Err(wrong),
        }
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)
    }

    /// `SETITEM(S)` / `DICT` on a dict (`items` alternates key, value) and
    /// `ADDITEMS` on a set. Equal keys replace values; equal items are skipped.
    pub(super) fn insert(
        &mut self,
        target: &Value<X>,
        items: Vec<Value<X>>,
        expected: &'static str,
    ) -> Result<(), PickleError> {
        let wrong = PickleError::WrongTarget {
            opcode: self.op,
            expected,
            offset: self.at,
        };
        let id = self.node_id(target)?.ok_or(wrong.clone())?;
        match (expected, self.graph.try_get(id)) {
            ("set", Some(Node::Set(_))) | ("dict", Some(Node::Dict(_))) => {}
            _ => return Err(wrong),
        }
        if expected == "dict" && !items.len().is_multiple_of(2) {
            return Err(PickleError::OddItems {
                opcode: self.op,
                offset: self.at,
            });
        }
        // Every key is registered before it is indexed (`tuples.rs`): those
        // a hook put in the node, which the index is about to take in (its
        // count disagrees), and the new ones.
        let in_step = |n: usize| self.keys.get(&id).is_some_and(|i| i.in_step(n));
        let is_node = |k: &&Value<X>| k.as_node().is_some();
        let held: Vec<Value<X>> = match self.graph.try_get(id) {
            Some(Node::Dict(e)) if !in_step(e.len()) => {
                e.iter().map(|(k, _)| k).filter(is_node).cloned().collect()
            }
            Some(Node::Set(e)) if !in_step(e.len()) => e.iter().filter(is_node).cloned().collect(),
            _ => Vec::new(),
        };
        let step = if expected == "dict" { 2 } else { 1 };
        for k in held.iter().chain(items.iter().step_by(step)) {
            self.tuples.register(&mut self.graph, &mut self.interner, k);
        }
        self.graph.note_children(id, &items);
        let index = self.keys.entry(id).or_default();
        let tuples = &self.tuples;
        match self.graph.try_get_mut(id) {
            Some(Node::Dict(entries)) => {
                index.sync(&entries[..], tuples);
                let mut items = items.into_iter();
                while let (Some(k), Some(v)) = (items.next(), items.next()) {
                    let k = self.interner.intern(k);
                    match tuples
                        .key(&k)
                        .and_then(|key| index.position(&key, &entries[..], tuples))
                    {
                        Some(i) => entries[i].1 = v,
                        None if entries.len() >= KeyIndex::MAX_ENTRIES => {
                            return Err(too_many(self.at))
                        }
                        None => {
                            grow_gently(entries);
                            entries.push((k, v));
                            index.record(entries.len() - 1, &entries[..], tuples);
                        }
                    }
                }
            }
            Some(Node::Set(entries)) => {
                index.sync(&entries[..], tuples);
                for item in items {
                    let item = self.interner.intern(item);
                    if tuples
                        .key(&item)
                        .and_then(|key| index.position(&key, &entries[..], tuples))
                        .is_none()
                    {
                        if entries.len() >= KeyIndex::MAX_ENTRIES {
                            return Err(too_many(self.at));
                        }
                        grow_gently(entries);
                        entries.push(item);
                        index.record(entries.len() - 1, &entries[..], tuples);
                    }
                }
            }
            _ => return Err(wrong),
        }
        self.limit("max_depth", self.graph.depth(id), self.limits.max_depth)
    }
}

/// A dict or set past the entries a key index holds.
fn too_many(offset: usize) -> PickleError {
    PickleError::LimitExceeded {
        limit: "dict or set entries",
        value: KeyIndex::MAX_ENTRIES + 1,
        max: KeyIndex::MAX_ENTRIES,
        offset,
    }
}

/// Room for one more entry in a dict's or set's entries, growing a full
/// vector by half rather than doubling it: a state dict of many tensors is
/// one vector of 80-byte entries, which doubling leaves up to half empty at
/// a load's peak (the copies stay linear in all).
fn grow_gently<T>(entries: &mut Vec<T>) {
    if entries.len() == entries.capacity() {
        entries.reserve_exact((entries.len() / 2).max(8));
    }
}
