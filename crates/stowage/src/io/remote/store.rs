//! The object-store clients: one built per store (a bucket, an account's
//! container, an HTTP server) for a [`RemoteOptions`] and its clones, from
//! the environment, the URL and the options.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::{ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreScheme, RetryConfig};

use super::meter::{counted, Meter};
use super::{RemoteFailure, RemoteOptions};

/// A store client, with its handle on multipart uploads ([`Parts`]).
pub(super) type Client = (Arc<dyn ObjectStore>, Parts);

/// The store clients of one [`RemoteOptions`] and its clones, by the
/// scheme and authority of their URLs and any bucket in their path
/// (`s3://bucket`, `https://host:port`; [`store_key`]).
#[derive(Clone, Default)]
pub(super) struct StoreCache(Arc<std::sync::Mutex<std::collections::HashMap<String, Client>>>);

impl std::fmt::Debug for StoreCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "StoreCache({n} stores)")
    }
}

/// The store and the object's path in it for `url`.
pub(super) fn open_store(
    url: &str,
    options: &RemoteOptions,
) -> std::result::Result<(Arc<dyn ObjectStore>, ObjectPath), RemoteFailure> {
    open_with_parts(url, options).map(|(store, _, path)| (store, path))
}

/// A cloud store's handle on its multipart uploads by id, which an upload
/// needs to be aborted from another thread ([`upload`]).
pub(super) type Parts = Option<Arc<dyn MultipartStore>>;

/// [`open_store`], with the store's [`MultipartStore`] for a cloud store
/// (S3, GCS, Azure); `None` for the others (`http(s)://`, `file://`).
pub(super) fn open_with_parts(
    url: &str,
    options: &RemoteOptions,
) -> std::result::Result<(Arc<dyn ObjectStore>, Parts, ObjectPath), RemoteFailure> {
    let parsed = url::Url::parse(url)?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(object_store::Error::from)?;
    // `az://container/dir/file`: the Azure builder takes the container from
    // the host, so the object's path is the whole URL path
    // (`ObjectStoreScheme::parse` drops its first segment, as for
    // `https://account.blob.core.windows.net/container/…`).
    let path = if parsed.scheme().eq_ignore_ascii_case("az") {
        ObjectPath::from_url_path(parsed.path()).map_err(object_store::Error::from)?
    } else {
        path
    };
    // One client per store for these options and their clones; built while
    // the cache is held, so two threads opening the same store build one.
    let key = store_key(&parsed, &path);
    let mut stores = options
        .stores
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((store, parts)) = stores.get(&key) {
        return Ok((Arc::clone(store), parts.clone(), path));
    }
    let (store, parts) = build_store(url, &parsed, scheme, options)?;
    for c in counted(options.meter.as_ref().map(Meter::counters)) {
        c.stores.fetch_add(1, Ordering::Relaxed);
    }
    stores.insert(key, (Arc::clone(&store), parts.clone()));
    Ok((store, parts, path))
}

/// What names the store of `url`, whose object is `path`: the scheme, the
/// authority, and the segments of the URL's path before the object's (a
/// bucket or container named in the path, `https://host/bucket/key`).
pub(super) fn store_key(url: &url::Url, path: &ObjectPath) -> String {
    let segments: Vec<&str> = url.path_segments().map_or(Vec::new(), Iterator::collect);
    let object = path.parts().count();
    let root = &segments[..segments.len().saturating_sub(object)];
    format!("{}/{}", &url[..url::Position::BeforePath], root.join("/"))
}

/// A new client of the store `url` is in, with `options`' retries,
/// timeouts and configuration.
fn build_store(
    url: &str,
    parsed: &url::Url,
    scheme: ObjectStoreScheme,
    options: &RemoteOptions,
) -> std::result::Result<(Arc<dyn ObjectStore>, Parts), RemoteFailure> {
    let retry = RetryConfig {
        max_retries: options.retries,
        retry_timeout: options.retry_timeout,
        ..RetryConfig::default()
    };
    let client = ClientOptions::new()
        .with_timeout(options.timeout)
        .with_connect_timeout(options.connect_timeout);
    // A cloud store: its builder from the environment, the URL, retries,
    // timeouts and the caller's options (an unknown key is an error naming
    // it, not ignored), then the environment's client options again.
    macro_rules! cloud {
        ($builder:ty, $key:ty, $prefix:literal) => {{
            let mut b = <$builder>::from_env()
                .with_url(url)
                .with_retry(retry)
                .with_client_options(client);
            for (key, value) in &options.store_options {
                b = b.with_config(key.to_ascii_lowercase().parse::<$key>()?, value);
            }
            let b = reapply_env_client(b, $prefix, |b, k, v| b.with_config(<$key>::Client(k), v));
            let store = Arc::new(b.build()?);
            let parts: Parts = Some(store.clone());
            (store as Arc<dyn ObjectStore>, parts)
        }};
    }
    let (store, parts): (Arc<dyn ObjectStore>, Parts) = match scheme {
        ObjectStoreScheme::AmazonS3 => cloud!(
            object_store::aws::AmazonS3Builder,
            object_store::aws::AmazonS3ConfigKey,
            "AWS_"
        ),
        ObjectStoreScheme::GoogleCloudStorage => cloud!(
            object_store::gcp::GoogleCloudStorageBuilder,
            object_store::gcp::GoogleConfigKey,
            "GOOGLE_"
        ),
        ObjectStoreScheme::MicrosoftAzure => cloud!(
            object_store::azure::MicrosoftAzureBuilder,
            object_store::azure::AzureConfigKey,
            "AZURE_"
        ),
        ObjectStoreScheme::Http => {
            let base = &parsed[..url::Position::BeforePath];
            // An `http://` URL asks for plain HTTP itself.
            let client = client.with_allow_http(parsed.scheme() == "http");
            let mut b = object_store::http::HttpBuilder::new()
                .with_url(base)
                .with_retry(retry)
                .with_client_options(client);
            for (key, value) in &options.store_options {
                b = b.with_config(key.to_ascii_lowercase().parse()?, value);
            }
            (Arc::new(b.build()?), None)
        }
        _ => {
            // `file://` (and the crate's `memory://`, which holds nothing here).
            (Arc::new(object_store::local::LocalFileSystem::new()), None)
        }
    };
    Ok((store, parts))
}

/// Sets again the client options (`AWS_ALLOW_HTTP`, `AWS_TIMEOUT`, …) that the
/// environment gives, since [`ClientOptions`] set as a whole replace them.
fn reapply_env_client<B>(
    mut builder: B,
    prefix: &str,
    set: impl Fn(B, ClientConfigKey, String) -> B,
) -> B {
    for (key, value) in std::env::vars() {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        if let Ok(k) = rest.to_ascii_lowercase().parse::<ClientConfigKey>() {
            builder = set(builder, k, value);
        }
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clones of one options value share their clients; a clone given
    /// another client configuration builds its own.
    #[test]
    fn clones_share_clients_until_reconfigured() {
        let options = RemoteOptions::default();
        let open = |url: &str, o: &RemoteOptions| open_with_parts(url, o).unwrap().0;
        let a = open("s3://b/x.pt", &options);
        assert!(Arc::ptr_eq(&a, &open("s3://b/y/z.pt", &options.clone())));
        assert!(!Arc::ptr_eq(&a, &open("s3://c/x.pt", &options)));
        let other = options.clone().with_retries(7);
        assert!(!Arc::ptr_eq(&a, &open("s3://b/x.pt", &other)));
        // Request shaping is no client setting: the client stays shared.
        let wider = options.clone().with_concurrency(4);
        assert!(Arc::ptr_eq(&a, &open("s3://b/x.pt", &wider)));
    }

    /// Objects of one bucket share a key; another bucket, named in the host
    /// or in the path, has its own.
    #[test]
    fn a_store_is_named_by_its_bucket() {
        let key = |u: &str| {
            let parsed = url::Url::parse(u).unwrap();
            let (_, path) = ObjectStoreScheme::parse(&parsed).unwrap();
            store_key(&parsed, &path)
        };
        assert_eq!(key("s3://b/x/model-1.safetensors"), key("s3://b/y.json"));
        assert_ne!(key("s3://b/x.pt"), key("s3://c/x.pt"));
        let path_style = |bucket: &str| {
            key(&format!(
                "https://s3.us-east-1.amazonaws.com/{bucket}/d/x.pt"
            ))
        };
        assert_eq!(path_style("b"), "https://s3.us-east-1.amazonaws.com/b");
        assert_ne!(path_style("b"), path_style("c"));
        assert_eq!(
            key("https://host:8080/a/b.pt"),
            key("https://host:8080/c.pt")
        );
    }
}
