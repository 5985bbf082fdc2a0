//! The change feed across processes: one connection of its own that
//! `LISTEN`s on the store's channel, turned into the store's local
//! broadcast of ids (and the empty payload, which says seats were freed,
//! into the store's counter of freeings); and the [`Announcer`], which
//! notifies the channel of every write after a creation once it committed
//! (see `schema.rs` for why not in the write's own transaction), but for
//! the batches of compare-and-sets, whose statement notifies (`batch.rs`).
//! A creation is told on the creating store's broadcast only.
//!
//! An announcement follows its write by a moment, so another replica's
//! cache may answer the older record for that moment (as with Redis, whose
//! announcement goes out with the write but reaches each replica a moment
//! later); one lost with its writer (a process killed between its commit
//! and its announcement) is bounded by the cache's maximal age.
//!
//! A connection that is lost (PostgreSQL restarted, the network dropped, a
//! ping unanswered) is made again with a capped backoff; whatever was
//! notified in between is lost, so after each new `LISTEN` the gap counter
//! goes up and the runtime wakes every waiter, which re-reads its task. The
//! runtime's own periodic re-reads bound a gap that nothing reported (a
//! connection that died silently between two pings).

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::StreamExt;
use mcp_tasks::TaskId;
use mcp_tasks::store::{FeedCache, StoreError, StoreErrorKind};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_postgres::AsyncMessage;

use crate::connection::failure;
use crate::tls::Tls;

/// How often the connection is checked with a ping.
const PING_EVERY: Duration = Duration::from_secs(2);
/// The longest pause between two attempts to listen again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The payload that says seats were freed.
pub(crate) const SEATS_FREED: &str = "";

/// How many announcements one statement carries at most.
const BATCH: usize = 1024;

/// Sends announcements to the task that notifies them, several at once.
#[derive(Debug, Clone)]
pub(crate) struct Announcer(mpsc::UnboundedSender<(Vec<String>, oneshot::Sender<()>)>);

impl Announcer {
    /// Announces `payloads` (task ids, or [`SEATS_FREED`]), returning once
    /// they were notified (with whatever else waited at that moment, in one
    /// statement), or once notifying them failed three times: the write is
    /// committed either way, and a lost announcement is bounded by the read
    /// caches' maximal age. Awaited, so that a process that writes and then
    /// exits (`mcp-tasks admin cancel`) has announced what it wrote.
    pub(crate) async fn announce(&self, payloads: &[&str]) {
        let (sent, done) = oneshot::channel();
        let payloads = payloads
            .iter()
            .map(|payload| (*payload).to_owned())
            .collect();
        if self.0.send((payloads, sent)).is_ok() {
            let _ = done.await;
        }
    }
}

/// An [`Announcer`] and the task that notifies what it is given with
/// `sql` (`SELECT SCHEMA.announce($1)`) on a connection of `pool`: all
/// that waits at once in one statement, tried three times.
pub(crate) fn announcer(pool: Pool, sql: String, timeout: Duration) -> (Announcer, AbortHandle) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<(Vec<String>, oneshot::Sender<()>)>();
    let task = tokio::spawn(async move {
        let mut batch = Vec::new();
        let mut waiting = Vec::new();
        while let Some((payloads, done)) = receiver.recv().await {
            batch.extend(payloads);
            waiting.push(done);
            while batch.len() < BATCH {
                match receiver.try_recv() {
                    Ok((payloads, done)) => {
                        batch.extend(payloads);
                        waiting.push(done);
                    }
                    Err(_) => break,
                }
            }
            for attempt in 0..3u32 {
                match tokio::time::timeout(timeout, notify(&pool, &sql, &batch)).await {
                    Ok(Ok(())) => break,
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "announcing changes on PostgreSQL failed");
                    }
                    Err(_) => tracing::debug!("announcing changes on PostgreSQL timed out"),
                }
                tokio::time::sleep(Duration::from_millis(50) * 2u32.pow(attempt)).await;
            }
            batch.clear();
            for done in waiting.drain(..) {
                let _ = done.send(());
            }
        }
    });
    (Announcer(sender), task.abort_handle())
}

async fn notify(pool: &Pool, sql: &str, batch: &[String]) -> Result<(), String> {
    let client = pool.get().await.map_err(|error| error.to_string())?;
    let statement = client
        .prepare_cached(sql)
        .await
        .map_err(|error| error.to_string())?;
    client
        .execute(&statement, &[&batch])
        .await
        .map(drop)
        .map_err(|error| error.to_string())
}

/// Where the feed's news go.
#[derive(Debug)]
pub(crate) struct Senders {
    /// The ids of changed tasks.
    pub(crate) changes: broadcast::Sender<TaskId>,
    /// Bumped after each new `LISTEN`.
    pub(crate) gaps: watch::Sender<u64>,
    /// Bumped when seats were freed (an empty payload), and after each new
    /// `LISTEN` (a freeing may have been missed).
    pub(crate) freed: watch::Sender<u64>,
    /// The store's read cache: an id drops its entry before the runtime
    /// hears of it; a lost connection empties it.
    pub(crate) cache: Arc<FeedCache>,
}

impl Senders {
    fn deliver(&self, payload: &str) {
        if payload == SEATS_FREED {
            bump(&self.freed);
        } else {
            self.cache.changed(payload);
            // No receiver is not an error.
            drop(self.changes.send(TaskId::new(payload)));
        }
    }
}

fn bump(counter: &watch::Sender<u64>) {
    counter.send_modify(|count| *count = count.wrapping_add(1));
}

/// A connection that listens, and the task that reads its notifications.
#[derive(Debug)]
pub(crate) struct Listening {
    client: tokio_postgres::Client,
    driver: JoinHandle<()>,
}

/// Connects and listens on `channel`, within `timeout`: once this returns,
/// every later notification reaches `senders`.
pub(crate) async fn listen(
    config: &tokio_postgres::Config,
    tls: &Tls,
    channel: &str,
    timeout: Duration,
    senders: &Arc<Senders>,
) -> Result<Listening, StoreError> {
    let listening = async {
        let (client, mut connection) = config
            .connect(tls.clone())
            .await
            .map_err(|error| failure("cannot connect the change feed to PostgreSQL", error))?;
        let senders = Arc::clone(senders);
        let driver = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(notification)) => {
                        senders.deliver(notification.payload());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        let listened = client
            .batch_execute(&format!("LISTEN \"{channel}\""))
            .await
            .map_err(|error| failure("PostgreSQL refused the change feed's LISTEN", error));
        match listened {
            Ok(()) => Ok(Listening { client, driver }),
            Err(error) => {
                driver.abort();
                Err(error)
            }
        }
    };
    match tokio::time::timeout(timeout, listening).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::msg(format!(
            "PostgreSQL did not answer the change feed's LISTEN within {timeout:?}"
        ))
        .with_kind(StoreErrorKind::Unavailable)),
    }
}

/// Keeps the feed listening for as long as the task runs (the store aborts
/// it when dropped), connecting and listening again whenever the
/// connection is lost.
pub(crate) async fn forward(
    config: tokio_postgres::Config,
    tls: Tls,
    channel: String,
    mut listening: Listening,
    senders: Arc<Senders>,
    timeout: Duration,
) {
    loop {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                _ = &mut listening.driver => break,
                _ = ping.tick() => {
                    let answered =
                        tokio::time::timeout(timeout, listening.client.simple_query("SELECT 1")).await;
                    if !matches!(answered, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        listening.driver.abort();
        senders.cache.lost();
        tracing::warn!("the PostgreSQL change feed's connection was lost; listening again");
        let mut pause = Duration::from_millis(20);
        listening = loop {
            match listen(&config, &tls, &channel, timeout, &senders).await {
                Ok(listening) => break listening,
                Err(error) => {
                    tracing::debug!(%error, "listening to the PostgreSQL change feed failed");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        };
        tracing::info!("the PostgreSQL change feed listens again; waiters re-read their tasks");
        senders.cache.subscribed();
        bump(&senders.gaps);
        bump(&senders.freed);
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.driver.abort();
    }
}
