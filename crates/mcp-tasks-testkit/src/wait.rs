//! Small helpers of tests that run real parts: a free port, a fresh log
//! path and waiting for it to fill.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A port free on 127.0.0.1 when asked (the OS's next ephemeral one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A fresh path in the temp dir for a log of `kind`, unique to this test
/// process and `line` (the caller's `line!()`); any file left there is
/// removed.
pub fn fresh_log(kind: &str, line: u32) -> PathBuf {
    let log = std::env::temp_dir().join(format!("{kind}-{}-{line}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    log
}

/// What `log` holds once it holds anything (at most 5 s of waiting; then
/// what it holds, perhaps nothing).
pub async fn first_lines(log: &Path) -> String {
    let mut heard = String::new();
    for _ in 0..100 {
        heard = std::fs::read_to_string(log).unwrap_or_default();
        if !heard.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    heard
}
