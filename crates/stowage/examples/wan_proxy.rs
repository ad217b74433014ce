//! A TCP proxy on 127.0.0.1 that behaves like the wide-area network between a
//! client and an object store: each connection receives at most `RATE` bytes
//! per second, and every chunk the client sends (a request) reaches the server
//! `LATENCY` milliseconds late.
//!
//! `wan_proxy UPSTREAM_PORT RATE_MB_PER_S LATENCY_MS` prints the port it
//! listens on, then serves until killed. `scripts/remote-bench.sh` puts it in
//! front of a local S3 server to measure parallel range requests against one
//! stream where, as on S3, a single connection is slow and far: AWS documents
//! about 85–90 MB/s per connection and tens of milliseconds to the first byte.
//! On the bare loopback neither holds, and one stream is as fast as many.
//!
//! `cargo run --release --example wan_proxy --features remote -- 4568 90 30`.
//! It is written with tokio (already under the `remote` feature) rather than
//! with `tc netem`, which limits a whole device, not each connection, and needs
//! privileges the benchmark machines do not give.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{sleep_until, Instant};

/// The largest chunk moved at once: small enough that the rate is smooth at a
/// few tens of MB/s.
const CHUNK: usize = 64 * 1024;

/// How far a connection may fall behind its rate and still catch up.
const SLACK: Duration = Duration::from_millis(10);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [upstream, rate, latency] = args.as_slice() else {
        eprintln!("usage: wan_proxy UPSTREAM_PORT RATE_MB_PER_S LATENCY_MS");
        std::process::exit(2);
    };
    let upstream: u16 = upstream.parse()?;
    let rate: f64 = rate.parse::<f64>()? * 1e6;
    let latency = Duration::from_millis(latency.parse()?);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(upstream, rate, latency))
}

async fn serve(
    upstream: u16,
    rate: f64,
    latency: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    loop {
        let (client, _) = listener.accept().await?;
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let up = tokio::spawn(requests(client_read, server_write, latency));
            responses(server_read, client_write, rate).await;
            up.abort();
        });
    }
}

/// Client to server: each chunk is held back `latency` (a request's trip).
async fn requests(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    latency: Duration,
) {
    let mut buf = vec![0; CHUNK];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        tokio::time::sleep(latency).await;
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Server to client: at most `rate` bytes per second on this connection. The
/// timer oversleeps by up to a millisecond, which the next chunks make up
/// within [`SLACK`]; an idle connection does not save up more than that.
async fn responses(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    rate: f64,
) {
    let mut buf = vec![0; CHUNK];
    let mut free_at = Instant::now();
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        free_at = free_at.max(Instant::now() - SLACK) + Duration::from_secs_f64(n as f64 / rate);
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        sleep_until(free_at).await;
    }
    let _ = to.shutdown().await;
}
