//! The change feed across processes: one pub/sub subscription to the
//! `changes` channel, which every write script after a creation publishes
//! to, turned into the store's local broadcast of ids (and the empty
//! message that says seats were freed into the store's counter of
//! freeings). A creation is told on the creating store's broadcast only.
//!
//! A subscription that is lost (Redis restarted, the connection dropped, a
//! ping unanswered) is made again with a capped backoff; whatever was
//! published in between is lost, so after each new subscription the gap
//! counter goes up and the runtime wakes every waiter, which re-reads its
//! task. The runtime's own periodic re-reads bound a gap that nothing
//! reported (a connection that died silently between two pings).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mcp_tasks::TaskId;
use mcp_tasks::store::{FeedCache, StoreError, StoreErrorKind};
use redis::aio::PubSub;
use tokio::sync::{broadcast, watch};

/// How often the subscription is checked with a ping.
const PING_EVERY: Duration = Duration::from_secs(2);
/// The longest pause between two attempts to subscribe again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Subscribes to `channel`, within `timeout`.
pub(crate) async fn subscribe(
    client: &redis::Client,
    channel: &str,
    timeout: Duration,
) -> Result<PubSub, StoreError> {
    let subscribing = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    match tokio::time::timeout(timeout, subscribing).await {
        Ok(Ok(pubsub)) => Ok(pubsub),
        Ok(Err(error)) => Err(crate::failure(
            "Redis refused the change feed's subscription",
            error,
        )),
        Err(_) => Err(StoreError::msg(format!(
            "Redis did not answer the change feed's subscription within {timeout:?}"
        ))
        .with_kind(StoreErrorKind::Unavailable)),
    }
}

/// Where the feed's news go.
pub(crate) struct Senders {
    /// The ids of changed tasks.
    pub(crate) changes: broadcast::Sender<TaskId>,
    /// Bumped after each new subscription.
    pub(crate) gaps: watch::Sender<u64>,
    /// Bumped when seats were freed (an empty message), and after each new
    /// subscription (a freeing may have been missed).
    pub(crate) freed: watch::Sender<u64>,
    /// The store's read cache: an id drops its entry before the runtime
    /// hears of it; a lost subscription empties it.
    pub(crate) cache: Arc<FeedCache>,
}

/// Forwards published ids to the store's feed for as long as the task runs
/// (the store aborts it when dropped), subscribing again whenever the
/// subscription is lost.
pub(crate) async fn forward(
    client: redis::Client,
    channel: String,
    mut pubsub: PubSub,
    senders: Senders,
    timeout: Duration,
) {
    let bump = |counter: &watch::Sender<u64>| {
        counter.send_modify(|count| *count = count.wrapping_add(1));
    };
    loop {
        let (mut sink, mut messages) = pubsub.split();
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(message) => {
                        match message.get_payload::<String>() {
                            Ok(id) if id.is_empty() => bump(&senders.freed),
                            // No receiver is not an error.
                            Ok(id) => {
                                senders.cache.changed(&id);
                                drop(senders.changes.send(TaskId::new(id)));
                            }
                            Err(_) => {}
                        }
                    }
                    None => break,
                },
                _ = ping.tick() => {
                    let answered = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                    if !matches!(answered, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        drop((sink, messages));
        senders.cache.lost();
        tracing::warn!("the Redis change feed's subscription was lost; subscribing again");
        let mut pause = Duration::from_millis(20);
        pubsub = loop {
            match subscribe(&client, &channel, timeout).await {
                Ok(pubsub) => break pubsub,
                Err(error) => {
                    tracing::debug!(%error, "subscribing to the Redis change feed failed");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        };
        tracing::info!("the Redis change feed is subscribed again; waiters re-read their tasks");
        senders.cache.subscribed();
        bump(&senders.gaps);
        bump(&senders.freed);
    }
}
