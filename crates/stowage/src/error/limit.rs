//! The limits that bound what a checkpoint from a stranger can cost, one
//! row each: the name a person sets it by, what it counts, its default, and
//! whether it can be raised. An error that hits one
//! ([`CheckpointError::LimitExceeded`](crate::CheckpointError::LimitExceeded),
//! or a pickle's own, [`PickleError::LimitExceeded`](crate::checkpoint::pickle::PickleError::LimitExceeded))
//! names the limit and says how to raise it: the environment's
//! `STOWAGE_LIMITS` (`paths=20000000,storage-bytes=4398046511104`), which
//! every load through [`LoadOptions::from_env`](crate::LoadOptions::from_env)
//! reads (the command line and the Python package among them); the command
//! line's `--limit NAME=N`; or [`LoadOptions::with_limit`](crate::LoadOptions::with_limit).

use std::fmt;

/// One resource limit ([`Limit::ALL`] lists them): those a load's options
/// set ([`adjustable`](Limit::adjustable)), and the fixed bounds of a
/// format or of what PyTorch reads back.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Bytes of one pickle (`data.pkl`, a DCP `.metadata`), and of the
    /// members a scan holds at once.
    PickleBytes,
    /// Records of an archive (a scan counts the members of nested zips, and
    /// pickles back to back).
    Records,
    /// Bytes all storages declare together, and one DCP item's bytes.
    StorageBytes,
    /// Objects a pickle builds (raised with the stream's length), and the
    /// values copied into decoded or inert objects.
    PickleNodes,
    /// Memo entries a pickle stores (raised with the stream's length).
    PickleMemo,
    /// Items on a pickle's stack, and separately its marks (raised with
    /// the stream's length).
    PickleStack,
    /// Nesting of a pickle's objects.
    PickleDepth,
    /// Steps of a walk over values by path: each value visited and each
    /// path step listed (a shared structure has exponentially many paths).
    Paths,
    /// Zip archives inside zip archives, for a scan (fixed).
    ZipNesting,
    /// Bytes of the safetensors metadata entry `stowage.tree` (fixed: the
    /// header other safetensors readers accept).
    TreeBytes,
    /// Bytes of a sharded set's `*.index.json` (fixed).
    IndexBytes,
    /// Nesting of the values a save writes (fixed: what `torch.load`
    /// reads back within Python's recursion limit).
    SaveDepth,
}

/// One row of the table: the limit, its name, what it counts, its default,
/// and whether a load's options set it.
struct Row {
    limit: Limit,
    name: &'static str,
    what: &'static str,
    default: u64,
    adjustable: bool,
}

/// Every limit, in the enum's order.
const ROWS: [Row; 12] = [
    Row {
        limit: Limit::PickleBytes,
        name: "pickle-bytes",
        what: "bytes of one pickle",
        default: 1 << 30,
        adjustable: true,
    },
    Row {
        limit: Limit::Records,
        name: "records",
        what: "records of an archive",
        default: 1 << 20,
        adjustable: true,
    },
    Row {
        limit: Limit::StorageBytes,
        name: "storage-bytes",
        what: "bytes of storages",
        default: 1 << 40,
        adjustable: true,
    },
    Row {
        limit: Limit::PickleNodes,
        name: "pickle-nodes",
        what: "objects a pickle builds",
        default: 1 << 24,
        adjustable: true,
    },
    Row {
        limit: Limit::PickleMemo,
        name: "pickle-memo",
        what: "memo entries of a pickle",
        default: 1 << 20,
        adjustable: true,
    },
    Row {
        limit: Limit::PickleStack,
        name: "pickle-stack",
        what: "items on a pickle's stack",
        default: 1 << 20,
        adjustable: true,
    },
    Row {
        limit: Limit::PickleDepth,
        name: "pickle-depth",
        what: "nesting of a pickle's objects",
        default: 1000,
        adjustable: true,
    },
    Row {
        limit: Limit::Paths,
        name: "paths",
        what: "paths walked",
        default: 8_000_000,
        adjustable: true,
    },
    Row {
        limit: Limit::ZipNesting,
        name: "zip-nesting",
        what: "zip archives inside zip archives",
        default: 4,
        adjustable: false,
    },
    Row {
        limit: Limit::TreeBytes,
        name: "tree-bytes",
        what: "bytes of the safetensors metadata entry stowage.tree",
        default: 99_000_000,
        adjustable: false,
    },
    Row {
        limit: Limit::IndexBytes,
        name: "index-bytes",
        what: "bytes of a sharded set's index",
        default: 256 << 20,
        adjustable: false,
    },
    Row {
        limit: Limit::SaveDepth,
        name: "save-depth",
        what: "nesting of the values a save writes",
        default: 1000,
        adjustable: false,
    },
];

impl Limit {
    /// Every limit, in the table's order.
    pub const ALL: [Limit; 12] = {
        let mut all = [Limit::PickleBytes; 12];
        let mut i = 0;
        while i < ROWS.len() {
            all[i] = ROWS[i].limit;
            i += 1;
        }
        all
    };

    const fn row(self) -> &'static Row {
        // `ROWS` is in the enum's order (a unit test holds them together).
        &ROWS[self as usize]
    }

    /// The name it is set by (`paths`, `storage-bytes`).
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// The limit named `name` ([`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<Limit> {
        ROWS.iter().find(|r| r.name == name).map(|r| r.limit)
    }

    /// Its value when nothing sets it.
    pub const fn default_value(self) -> u64 {
        self.row().default
    }

    /// Whether a load's options set it; the others are fixed.
    pub fn adjustable(self) -> bool {
        self.row().adjustable
    }

    /// The limit the pickle machine's [`Limits`](crate::checkpoint::pickle::Limits)
    /// field `field` is (`"max_nodes"`).
    pub(crate) fn of_pickle_field(field: &str) -> Option<Limit> {
        Some(match field {
            "max_nodes" => Limit::PickleNodes,
            "max_memo" => Limit::PickleMemo,
            "max_stack" => Limit::PickleStack,
            "max_depth" => Limit::PickleDepth,
            _ => return None,
        })
    }

    /// Parses one setting, `NAME=N` (`N` a whole number; `_` may group its
    /// digits), as `STOWAGE_LIMITS` and `--limit` give it.
    ///
    /// # Errors
    /// A message saying what is wrong: no `=`, an unknown or fixed limit, a
    /// value that is not a whole number.
    pub fn parse_setting(setting: &str) -> Result<(Limit, u64), String> {
        let Some((name, value)) = setting.split_once('=') else {
            return Err(format!("{setting:?}: expected NAME=N"));
        };
        let names = || {
            let adjustable = Limit::ALL.iter().filter(|l| l.adjustable());
            adjustable.map(|l| l.name()).collect::<Vec<_>>().join(", ")
        };
        let limit = match Limit::from_name(name.trim()) {
            Some(l) if l.adjustable() => l,
            Some(l) => {
                return Err(format!(
                    "{name}: a fixed limit ({l}); these can be set: {}",
                    names()
                ))
            }
            None => {
                return Err(format!(
                    "{name:?}: no such limit; these can be set: {}",
                    names()
                ))
            }
        };
        let digits: String = value.trim().chars().filter(|&c| c != '_').collect();
        let value = digits
            .parse()
            .map_err(|_| format!("{setting:?}: {value:?} is not a whole number"))?;
        Ok((limit, value))
    }

    /// What to do about hitting it: how to raise it, or why it is fixed.
    pub fn how_to_raise(self) -> String {
        if self.adjustable() {
            let name = self.name();
            format!(
                "raise it with STOWAGE_LIMITS={name}=N in the environment, --limit {name}=N on the command line, or LoadOptions::with_limit(Limit::{self:?}, N)"
            )
        } else {
            "a fixed bound".to_owned()
        }
    }
}

impl fmt::Display for Limit {
    /// What it counts, and its name: `paths walked (paths)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.row().what, self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_order_of_all_and_names_are_unique() {
        for (i, l) in Limit::ALL.iter().enumerate() {
            assert_eq!(*l as usize, i, "{l:?} is row {i}");
            assert_eq!(Limit::from_name(l.name()), Some(*l));
        }
        let mut names: Vec<_> = ROWS.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ROWS.len());
    }

    #[test]
    fn defaults_agree_with_the_readers_own() {
        let pickle = crate::checkpoint::pickle::Limits::default();
        assert_eq!(Limit::PickleNodes.default_value(), pickle.max_nodes as u64);
        assert_eq!(Limit::PickleMemo.default_value(), pickle.max_memo as u64);
        assert_eq!(Limit::PickleStack.default_value(), pickle.max_stack as u64);
        assert_eq!(Limit::PickleDepth.default_value(), pickle.max_depth as u64);
        let zip = crate::checkpoint::zip::ZipLimits::default();
        assert_eq!(Limit::Records.default_value(), zip.max_entries as u64);
        let options = crate::LoadOptions::default();
        for l in Limit::ALL {
            assert_eq!(options.limit(l), l.default_value(), "{l}");
            let raised = options.clone().with_limit(l, 7).limit(l);
            assert_eq!(raised == 7, l.adjustable(), "{l}");
        }
    }

    #[test]
    fn settings_parse_or_say_what_is_wrong() {
        assert_eq!(
            Limit::parse_setting("paths=20_000_000"),
            Ok((Limit::Paths, 20_000_000))
        );
        assert!(Limit::parse_setting("paths")
            .unwrap_err()
            .contains("NAME=N"));
        assert!(Limit::parse_setting("tree-bytes=1")
            .unwrap_err()
            .contains("fixed"));
        assert!(Limit::parse_setting("nope=1")
            .unwrap_err()
            .contains("no such limit"));
        assert!(Limit::parse_setting("paths=lots")
            .unwrap_err()
            .contains("whole number"));
    }
}
