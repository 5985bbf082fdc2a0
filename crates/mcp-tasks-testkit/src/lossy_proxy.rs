//! A loopback TCP proxy that loses the answer of the first `tools/call`: it
//! forwards every request to the server, but once a connection carries a
//! `tools/call` (the first one through the proxy), it waits for the
//! server's answer (so the server has done its work) and then closes the
//! client's connection instead of passing the answer on. Later calls pass
//! both ways. What a client sees when a network drops an answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy's state, shared with the test.
#[derive(Debug, Default)]
pub struct LossyProxy {
    /// Set once the first `tools/call` went through.
    lost_one: AtomicBool,
    /// How many `tools/call` requests went through (the first included).
    calls: AtomicUsize,
}

impl LossyProxy {
    /// Starts a proxy on 127.0.0.1 in front of `upstream` (`host:port`);
    /// returns it and its address.
    pub async fn start(upstream: String) -> (Arc<Self>, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let proxy = Arc::new(Self::default());
        let shared = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let proxy = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&upstream).await {
                        proxy.pipe(client, server).await;
                    }
                });
            }
        });
        (proxy, address)
    }

    /// Whether the first `tools/call`'s answer was lost already.
    pub fn lost_one(&self) -> bool {
        self.lost_one.load(Ordering::SeqCst)
    }

    /// How many `tools/call` requests went through.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    async fn pipe(&self, client: TcpStream, server: TcpStream) {
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        let losing = AtomicBool::new(false);
        let upward = async {
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let n = match client_read.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let chunk = &buffer[..n];
                if contains(chunk, b"\"tools/call\"") {
                    self.calls.fetch_add(1, Ordering::SeqCst);
                    if !self.lost_one.swap(true, Ordering::SeqCst) {
                        losing.store(true, Ordering::SeqCst);
                    }
                }
                if server_write.write_all(chunk).await.is_err() {
                    break;
                }
            }
        };
        let downward = async {
            let mut buffer = vec![0u8; 64 * 1024];
            let mut held = Vec::new();
            loop {
                let n = match server_read.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if losing.load(Ordering::SeqCst) {
                    // Held back until the server's JSON-RPC answer is in
                    // (headers may come first), then lost.
                    held.extend_from_slice(&buffer[..n]);
                    if contains(&held, b"\"jsonrpc\"") {
                        break;
                    }
                    continue;
                }
                if client_write.write_all(&buffer[..n]).await.is_err() {
                    break;
                }
            }
        };
        // Either side ending ends the connection (both halves dropped).
        tokio::select! {
            () = upward => {}
            () = downward => {}
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}
