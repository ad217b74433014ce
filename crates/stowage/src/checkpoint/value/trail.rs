//! The way a [`ValueRef`](super::access::ValueRef) was reached from the
//! root, kept cheap to extend and rendered as [`PathKey`]s only when asked.
//!
//! A walk makes a handle per item it visits (a state dict: two per entry,
//! its key and its value) and almost never asks for a path, which errors
//! and path listings name. A handle keeps its own step inline and its
//! parent's trail as a shared link; a link for the handle itself is made
//! only when it has children of its own (once, shared by all of them). So
//! a state dict's entries cost no allocation, and a child copies none of
//! its parent's keys. A dict key is kept as where it is in the graph and
//! made a [`PathKey`] (a `String`) only when the path is rendered. (Where,
//! not a reference: a link borrows nothing, so it can unlink its chain in
//! its own `Drop`.)

use std::sync::{Arc, OnceLock};

use crate::checkpoint::pickle::{Node, NodeId};
use crate::checkpoint::value::graph::{Checkpoint, PathKey};
use crate::checkpoint::value::path_key::path_key;

/// A step of a trail made shareable: the handles below a handle point up
/// to its link.
pub(crate) struct Link {
    up: Option<Arc<Link>>,
    key: Key,
}

/// A step's key.
#[derive(Clone)]
pub(crate) enum Key {
    /// The key of entry `at` of the dict node `dict`, named by
    /// [`path_key`] when the path is rendered.
    Entry { dict: NodeId, at: usize },
    /// A key already made (an index, `__dict__`, a looked-up key).
    Made(PathKey),
}

impl Key {
    fn render(&self, ckpt: &Checkpoint) -> PathKey {
        match self {
            Key::Entry { dict, at } => match ckpt.graph.try_get(*dict) {
                Some(Node::Dict(items)) if *at < items.len() => {
                    path_key(&ckpt.graph, &items[*at].0)
                }
                // Entries are made only from a dict's items.
                _ => PathKey::Index(*at as i64),
            },
            Key::Made(k) => k.clone(),
        }
    }
}

/// The trail of a handle: the link of the handle it was reached from, its
/// own step (none at the root), and, made on first use, its own link and
/// the path it renders to.
#[derive(Clone, Default)]
pub(crate) struct Trail {
    up: Option<Arc<Link>>,
    step: Option<Key>,
    depth: usize,
    own: OnceLock<Option<Arc<Link>>>,
    rendered: OnceLock<Vec<PathKey>>,
}

/// What the children of one handle share: its link and its depth.
pub(crate) struct Parent {
    link: Option<Arc<Link>>,
    depth: usize,
}

impl Parent {
    /// The trail one step below, by `key`.
    pub(crate) fn child(&self, key: Key) -> Trail {
        Trail {
            up: self.link.clone(),
            step: Some(key),
            depth: self.depth + 1,
            own: OnceLock::new(),
            rendered: OnceLock::new(),
        }
    }
}

impl Trail {
    /// This trail as the parent of others: its link, made once.
    pub(crate) fn parent(&self) -> Parent {
        let link = self.own.get_or_init(|| {
            self.step.as_ref().map(|key| {
                Arc::new(Link {
                    up: self.up.clone(),
                    key: key.clone(),
                })
            })
        });
        Parent {
            link: link.clone(),
            depth: self.depth,
        }
    }

    /// The trail one step below this one, by `key`.
    pub(crate) fn child(&self, key: Key) -> Trail {
        self.parent().child(key)
    }

    /// Steps from the root.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// The keys from the root, rendered once.
    pub(crate) fn keys(&self, ckpt: &Checkpoint) -> &[PathKey] {
        self.rendered.get_or_init(|| {
            let mut keys = Vec::with_capacity(self.depth);
            keys.extend(self.step.as_ref().map(|k| k.render(ckpt)));
            let mut at = self.up.as_deref();
            while let Some(link) = at {
                keys.push(link.key.render(ckpt));
                at = link.up.as_deref();
            }
            keys.reverse();
            keys
        })
    }
}

impl std::fmt::Debug for Trail {
    /// The depth, and the keys where they were rendered: a walk of the
    /// chain (a debug print of a deep handle) would recurse as a drop would.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trail")
            .field("depth", &self.depth)
            .field("keys", &self.rendered.get())
            .finish()
    }
}

impl Drop for Link {
    /// Unlinks the chain above a link iteratively: a handle deep in a
    /// nested checkpoint may hold the last reference to thousands of
    /// links, which a recursive drop would take a stack frame each for.
    fn drop(&mut self) {
        let mut up = self.up.take();
        while let Some(link) = up {
            up = match Arc::try_unwrap(link) {
                Ok(mut only) => only.up.take(),
                Err(_) => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::PyValue;

    #[test]
    fn a_dict_entrys_key_and_value_share_the_path_rendered_from_the_graph() {
        let inner = PyValue::Dict(vec![
            (PyValue::Int(7), PyValue::Str("seven".into())),
            (PyValue::None, PyValue::Bool(true)),
        ]);
        let ckpt = Checkpoint::builder()
            .value_at(&[PathKey::Key("outer".into())], inner)
            .build()
            .unwrap();
        let outer = ckpt.get("outer").unwrap();
        let entries: Vec<_> = outer.as_dict().unwrap().collect();
        let want = |k: PathKey| vec![PathKey::Key("outer".into()), k];
        assert_eq!(entries[0].0.path(), want(PathKey::Index(7)));
        assert_eq!(entries[0].1.path(), want(PathKey::Index(7)));
        assert_eq!(entries[1].1.path(), want(PathKey::Key("None".into())));
        // A handle outlives the one it was reached from.
        let value = entries[0].1.clone();
        drop(entries);
        assert_eq!(value.path(), want(PathKey::Index(7)));
        assert_eq!(value.as_str().unwrap(), "seven");
    }

    #[test]
    fn a_trail_deeper_than_the_stack_drops() {
        // Dropped link by link, a recursive drop of this chain would take
        // a frame each, past a test thread's 2 MiB stack.
        let mut trail = Trail::default();
        for i in 0..1_000_000 {
            trail = trail.child(Key::Made(PathKey::Index(i)));
        }
        assert_eq!(trail.depth(), 1_000_000);
        let ckpt = Checkpoint::builder().build().unwrap();
        let keys = trail.keys(&ckpt);
        assert_eq!(
            (keys[0].clone(), keys.len()),
            (PathKey::Index(0), 1_000_000)
        );
        drop(trail);
    }
}
