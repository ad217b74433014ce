//! Checkpoints named by URL (`s3://…`, `gs://…`, `az://…`, `http(s)://…`,
//! `file://…`): what the commands add for them. Loading and saving go
//! through the library's entry points, which read and write URLs themselves
//! (the `remote` feature); here are the transfer counts, each result's
//! `"transfer"` member.

use crate::Context;
use serde_json::{json, Value as Json};

/// What the run of `cx` has transferred from and to object stores, as the
/// `"transfer"` member of `--json` outputs: `None` when nothing was.
pub fn transfer_json(cx: &Context) -> Option<Json> {
    #[cfg(feature = "remote")]
    {
        let t = cx.transfer();
        (t.requests > 0).then(|| {
            let mut doc = json!({
                "requests": t.requests,
                "bytes_received": t.bytes_received,
                "bytes_sent": t.bytes_sent,
            });
            // Said only when it happened: objects fetched whole because
            // their server ignores `Range`.
            if t.whole_gets > 0 {
                doc["whole_gets"] = json!(t.whole_gets);
            }
            doc
        })
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = (json!(null), cx);
        None
    }
}
