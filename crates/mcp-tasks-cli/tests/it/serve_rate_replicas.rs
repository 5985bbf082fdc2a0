//! `serve --rate-per-caller` on two replicas of one Redis (`--store
//! redis://`), and of one PostgreSQL (`--store postgres://`): the rate
//! holds for both together, counted in the store on its clock, not once per
//! process.

use std::os::unix::fs::PermissionsExt;

use crate::serve_rate_per_caller::{ALICE, post_call};
use crate::serving::Served;
use crate::shared_store::Shared;
use crate::support::BIN;

#[test]
fn the_rate_per_caller_holds_across_two_replicas_on_one_redis() {
    the_rate_per_caller_holds_across_two_replicas(&Shared::redis());
}

#[test]
fn the_rate_per_caller_holds_across_two_replicas_on_one_postgres() {
    the_rate_per_caller_holds_across_two_replicas(&Shared::postgres());
}

fn the_rate_per_caller_holds_across_two_replicas(store: &Shared) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ALICE} alice\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    // 3 a minute in bursts of 3: one creation every 20 s past the burst,
    // so no more is allowed however slow the machine.
    let namespace = store.namespace("rate-replicas");
    let flags = [
        &namespace[0],
        &namespace[1],
        "--rate-per-caller",
        "3/min",
        "--rate-burst",
        "3",
        "--auth-tokens",
        tokens.to_str().unwrap(),
    ];
    let mut a = Served::start(BIN, "127.0.0.1:0", &store.url(), &flags);
    let mut b = Served::start(BIN, "127.0.0.1:0", &store.url(), &flags);
    // Alternating replicas: per process each would allow 3, so 6 in all.
    let answers: Vec<_> = (0..6)
        .map(|n| post_call(if n % 2 == 0 { &a.url } else { &b.url }, ALICE))
        .collect();
    let created = answers.iter().filter(|answer| answer.status == 200).count();
    assert_eq!(created, 3, "the burst of 3 is shared by both replicas");
    for refused in answers.iter().filter(|answer| answer.status != 200) {
        assert_eq!(refused.status, 503, "{}", refused.body);
        let data = &refused.body["error"]["data"];
        assert_eq!(data["reason"], "rateLimited", "{}", refused.body);
        assert_eq!(data["ratePerCaller"], "3/min", "{}", refused.body);
        let hint = data["retryAfterMs"].as_u64().expect("a hint");
        // The store's hint: the next creation is due 20 s after the first.
        assert!((1..=20_000).contains(&hint), "{}", refused.body);
        assert_eq!(refused.retry_after, Some(hint.div_ceil(1000)));
    }
    // Both replicas refuse: neither counts on its own.
    assert!(answers[4].status == 503 && answers[5].status == 503);
    a.kill_9();
    b.kill_9();
}
