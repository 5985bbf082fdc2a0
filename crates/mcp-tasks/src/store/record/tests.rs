//! Tests of the transition function and the record's serde form.

use serde_json::json;

use super::*;

fn record() -> TaskRecord {
    TaskRecord::new(
        TaskId::new("t"),
        Principal::new("o"),
        UnixMillis::new(1_000),
        Ttl::from_millis(10_000),
        Some(Duration::from_millis(100)),
    )
}

fn at(ms: u64) -> UnixMillis {
    UnixMillis::new(ms)
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn after(record: &TaskRecord, change: &Change, now: u64, retention: u64) -> TaskRecord {
    record
        .apply(change, at(now), ms(retention))
        .expect("applies")
        .into_record()
}

#[test]
fn terminal_states_never_change() {
    let done = after(&record(), &Change::Complete(json!({})), 2_000, 500);
    assert_eq!(done.status(), &TaskStatus::Completed);
    assert_eq!(done.expires_at(), Some(at(2_500)));
    for change in [
        Change::Cancel,
        Change::Expire,
        Change::Fail(json!({})),
        Change::StatusMessage("x".into()),
        Change::RequestCancel,
    ] {
        assert_eq!(
            done.apply(&change, at(3_000), ms(500)),
            Err(TransitionError::Terminal(TaskStatus::Completed))
        );
    }
}

#[test]
fn a_cancelled_task_says_who_cancelled_it_instead_of_its_last_progress() {
    let working = after(
        &record(),
        &Change::StatusMessage("3 of 20".into()),
        1_100,
        0,
    );
    // By its caller: tasks/cancel (then the runtime's Cancel), or the old
    // era's tasks/cancel, which cancels at once.
    let requested = after(&working, &Change::RequestCancel, 1_200, 0);
    assert_eq!(requested.status_message(), Some("3 of 20"), "still working");
    for cancelling in [&requested, &working] {
        let cancelled = after(cancelling, &Change::Cancel, 1_300, 500);
        assert_eq!(cancelled.status(), &TaskStatus::Cancelled);
        assert_eq!(
            cancelled.status_message(),
            Some(CANCELLED_BY_CALLER_MESSAGE)
        );
    }
    // By an operator.
    let requested = after(&working, &Change::RequestCancelByOperator, 1_200, 0);
    assert!(requested.cancel_requested() && requested.cancelled_by_operator());
    let cancelled = after(&requested, &Change::Cancel, 1_300, 500);
    assert_eq!(
        cancelled.status_message(),
        Some(CANCELLED_BY_OPERATOR_MESSAGE)
    );
    // The flag survives the record's serde form; records of older builds
    // (without it) read as cancelled by their caller.
    let json = serde_json::to_value(&requested).unwrap();
    assert_eq!(json["cancelled_by_operator"], true);
    assert_eq!(
        serde_json::from_value::<TaskRecord>(json).unwrap(),
        requested
    );
    let plain = serde_json::to_value(&working).unwrap();
    assert!(plain.get("cancelled_by_operator").is_none(), "{plain}");
}

#[test]
fn a_transition_expects_the_version_it_was_computed_from() {
    let one = record()
        .apply(&Change::StatusMessage("a".into()), at(1_100), ms(0))
        .unwrap();
    assert_eq!((one.expected_version(), one.record().version()), (0, 1));
    let two = one
        .record()
        .apply(&Change::StatusMessage("b".into()), at(1_000), ms(0))
        .unwrap();
    assert_eq!((two.expected_version(), two.record().version()), (1, 2));
    assert_eq!(
        two.record().updated_at(),
        at(1_100),
        "a change never moves lastUpdatedAt back"
    );
}

#[test]
fn input_keys_are_unique_and_partial_answers_keep_waiting() {
    let ask = |r: &TaskRecord, key: &str| {
        r.apply(
            &Change::RequestInput {
                key: key.into(),
                request: json!({"method": "roots/list"}),
            },
            at(1_500),
            ms(0),
        )
        .map(Transition::into_record)
    };
    let one = ask(&record(), "a").unwrap();
    let two = ask(&one, "b").unwrap();
    assert_eq!(two.status(), &TaskStatus::InputRequired);
    let partial = after(
        &two,
        &Change::ProvideInput([("a".into(), json!(1)), ("zzz".into(), json!(2))].into()),
        1_600,
        0,
    );
    assert_eq!(partial.status(), &TaskStatus::InputRequired);
    assert_eq!(partial.input_requests().keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(partial.input_responses().keys().collect::<Vec<_>>(), ["a"]);
    let all = after(
        &partial,
        &Change::ProvideInput([("b".into(), json!(3))].into()),
        1_700,
        0,
    );
    assert_eq!(all.status(), &TaskStatus::Working);
    assert_eq!(
        ask(&all, "a"),
        Err(TransitionError::DuplicateKey("a".into()))
    );
    assert_eq!(all.version(), 4);
}

#[test]
fn expiry_and_heartbeat() {
    let alive = after(&record(), &Change::ExtendTtl(ms(20_000)), 5_000, 0);
    assert_eq!(
        (alive.ttl(), alive.expires_at()),
        (Ttl::from_millis(24_000), Some(at(25_000)))
    );
    let shorter = after(&alive, &Change::ExtendTtl(ms(1)), 6_000, 0);
    assert_eq!(shorter.expires_at(), Some(at(25_000)));
    assert!(!shorter.is_due(at(24_999)) && shorter.is_due(at(25_000)));
    let expired = after(&alive, &Change::Expire, 30_000, 60_000);
    assert_eq!(expired.status(), &TaskStatus::Failed);
    assert_eq!(
        expired.error(),
        Some(&json!({"code": -32603, "message": "task expired"}))
    );
    assert_eq!(expired.expires_at(), Some(at(90_000)));
}

#[test]
fn runners_fence_their_writes_and_resumption_needs_a_call() {
    let (a, b) = (RunnerId::new("a"), RunnerId::new("b"));
    let call = json!({"name": "job", "arguments": {}});
    let run = record().with_runner(a.clone(), Some(call.clone()));
    assert_eq!(
        (run.runner(), run.resumable_call(), run.resumed()),
        (Some(&a), Some(&call), 0)
    );
    let asked = run
        .apply_as(
            &a,
            &Change::RequestInput {
                key: "k".into(),
                request: json!({"method": "roots/list"}),
            },
            at(1_100),
            ms(0),
        )
        .expect("its runner writes")
        .into_record();
    assert_eq!(
        asked.apply_as(&b, &Change::StatusMessage("x".into()), at(1_200), ms(0)),
        Err(TransitionError::NotRunner),
        "another runner is fenced off"
    );
    let resumed = after(&asked, &Change::Resume(b.clone()), 1_300, 0);
    assert_eq!((resumed.runner(), resumed.resumed()), (Some(&b), 1));
    assert_eq!(
        resumed.status(),
        &TaskStatus::InputRequired,
        "the question is kept"
    );
    assert_eq!(resumed.status_message(), Some(RESUMED_MESSAGE));
    assert_eq!(
        resumed.apply_as(&a, &Change::Complete(json!({})), at(1_400), ms(0)),
        Err(TransitionError::NotRunner),
        "the old runner cannot end it"
    );
    assert_eq!(
        record()
            .with_runner(a, None)
            .apply(&Change::Resume(b), at(1_100), ms(0)),
        Err(TransitionError::NotResumable)
    );
    let stopped = after(&run, &Change::RunnerStopped, 2_000, 500);
    assert_eq!(stopped.status(), &TaskStatus::Failed);
    assert_eq!(
        stopped.error(),
        Some(&json!({"code": -32603, "message": STOPPED_MESSAGE}))
    );
    // A record of a store without leases has no runner in its stored form.
    assert!(serde_json::to_value(record()).unwrap().get("run").is_none());
    let back: TaskRecord = serde_json::from_value(serde_json::to_value(&resumed).unwrap()).unwrap();
    assert_eq!(back, resumed);
}

#[test]
fn a_record_at_the_last_version_refuses_to_change_rather_than_overflow() {
    let mut value = serde_json::to_value(record()).unwrap();
    value["version"] = json!(u64::MAX);
    let last: TaskRecord = serde_json::from_value(value).unwrap();
    assert_eq!(
        last.apply(&Change::RequestCancel, at(2_000), ms(0)),
        Err(TransitionError::VersionExhausted)
    );
}

#[test]
fn the_stored_form_keeps_its_field_names() {
    let value = serde_json::to_value(record()).unwrap();
    assert_eq!(value["id"], "t");
    assert_eq!(value["owner"], "o");
    assert_eq!(value["created_at_ms"], 1_000);
    assert_eq!(value["ttl_ms"], 10_000);
    assert_eq!(value["poll_interval_ms"], 100);
    assert_eq!(value["expires_at_ms"], 11_000);
    let unlimited = TaskRecord::new(
        TaskId::new("u"),
        Principal::new("o"),
        at(1),
        Ttl::Unlimited,
        None,
    );
    let value = serde_json::to_value(&unlimited).unwrap();
    assert_eq!(
        (&value["ttl_ms"], &value["expires_at_ms"]),
        (&json!(null), &json!(null))
    );
    let back: TaskRecord = serde_json::from_value(value).unwrap();
    assert_eq!(back, unlimited);
}

#[test]
fn a_task_that_follows_activity_lives_its_idle_ttl_past_each_change() {
    // Created at 1 s with a 10 s TTL, at most 30 s of life.
    let live = record().with_lifetime(Some(ms(30_000)), true);
    assert_eq!(live.idle_ttl(), Some(ms(10_000)));
    assert_eq!(live.max_expires_at(), Some(at(31_000)));
    assert_eq!(live.expires_at(), Some(at(11_000)));
    // A keep-alive at 8 s: alive until 18 s, and ttlMs says so.
    let kept = after(&live, &Change::KeepAlive, 8_000, 0);
    assert_eq!(kept.expires_at(), Some(at(18_000)));
    assert_eq!(kept.ttl(), Ttl::Limited(ms(17_000)));
    // Any change is activity; asking for input at 9 s moves it to 19 s,
    // and then keep-alives are refused: only changes keep it alive.
    let asking = after(
        &kept,
        &Change::RequestInput {
            key: "k".into(),
            request: json!({}),
        },
        9_000,
        0,
    );
    assert_eq!(asking.expires_at(), Some(at(19_000)));
    assert_eq!(
        asking
            .apply(&Change::KeepAlive, at(12_000), ms(0))
            .unwrap_err(),
        TransitionError::NotWorking
    );
    // The maximum lifetime bounds keep-alives and explicit extensions.
    let late = after(&kept, &Change::KeepAlive, 25_000, 0);
    assert_eq!(late.expires_at(), Some(at(31_000)));
    let extended = after(&kept, &Change::ExtendTtl(ms(3_600_000)), 20_000, 0);
    assert_eq!(extended.expires_at(), Some(at(31_000)));
    // Never earlier than it was.
    let early = after(&late, &Change::StatusMessage("m".into()), 2_000, 0);
    assert_eq!(early.expires_at(), Some(at(31_000)));
}

#[test]
fn following_activity_keeps_unlimited_ttls_and_caps_long_ones() {
    let unlimited = TaskRecord::new(
        TaskId::new("u"),
        Principal::new("o"),
        at(0),
        Ttl::Unlimited,
        None,
    )
    .with_lifetime(Some(ms(5_000)), true);
    assert_eq!(unlimited.expires_at(), None);
    assert_eq!(
        after(&unlimited, &Change::KeepAlive, 9_000, 0).expires_at(),
        None
    );
    let capped = record().with_lifetime(Some(ms(4_000)), true);
    assert_eq!(capped.expires_at(), Some(at(5_000)));
    assert_eq!(capped.ttl(), Ttl::Limited(ms(4_000)));
    // Bounded, without following activity: changes do not extend it,
    // heartbeats do, up to the bound.
    let fixed = record().with_lifetime(Some(ms(20_000)), false);
    assert_eq!(fixed.idle_ttl(), None);
    let message = after(&fixed, &Change::StatusMessage("m".into()), 9_000, 0);
    assert_eq!(message.expires_at(), Some(at(11_000)));
    let beat = after(&fixed, &Change::ExtendTtl(ms(60_000)), 9_000, 0);
    assert_eq!(beat.expires_at(), Some(at(21_000)));
    // A record of an older build (no idle TTL) reads as before.
    let mut value = serde_json::to_value(record()).unwrap();
    let fields = value.as_object_mut().unwrap();
    fields.remove("idle_ttl_ms");
    fields.remove("max_expires_at_ms");
    let old: TaskRecord = serde_json::from_value(value).unwrap();
    assert_eq!(old.idle_ttl(), None);
    assert_eq!(
        after(&old, &Change::KeepAlive, 8_000, 0).expires_at(),
        Some(at(11_000))
    );
}

#[test]
fn a_checkpoint_is_kept_with_its_message_across_a_resume_and_dropped_at_the_end() {
    let (a, b) = (RunnerId::new("a"), RunnerId::new("b"));
    let run = record().with_runner(a, Some(json!({"name": "job"})));
    assert_eq!(run.checkpoint(), None);
    let kept = after(
        &run,
        &Change::Checkpoint {
            state: json!({"done": 2}),
            message: Some("step 3 of 5".into()),
        },
        1_100,
        0,
    );
    assert_eq!(kept.checkpoint(), Some(&json!({"done": 2})));
    assert_eq!(kept.status_message(), Some("step 3 of 5"));
    assert_eq!(kept.version(), run.version() + 1, "one write");
    // Without a message, the message stays; the state is replaced.
    let again = after(
        &kept,
        &Change::Checkpoint {
            state: json!({"done": 3}),
            message: None,
        },
        1_200,
        0,
    );
    assert_eq!(
        (again.checkpoint(), again.status_message()),
        (Some(&json!({"done": 3})), Some("step 3 of 5"))
    );
    let resumed = after(&again, &Change::Resume(b), 1_300, 0);
    assert_eq!(resumed.checkpoint(), Some(&json!({"done": 3})));
    // It survives the stored form, and a packed record.
    let stored: TaskRecord =
        serde_json::from_str(&serde_json::to_string(&resumed).expect("serializes"))
            .expect("reads back");
    assert_eq!(stored, resumed);
    assert_eq!(
        super::super::PackedRecord::pack(resumed.clone()).unpack(),
        resumed
    );
    let done = after(&resumed, &Change::Complete(json!({})), 1_400, 0);
    assert_eq!(done.checkpoint(), None, "a finished task keeps no state");
}

#[test]
fn a_hand_off_moves_a_resumable_task_to_another_runner_keeping_its_checkpoint() {
    let (a, b, c) = (RunnerId::new("a"), RunnerId::new("b"), RunnerId::new("c"));
    let run = record().with_runner(a.clone(), Some(json!({"name": "job"})));
    let kept = after(
        &run,
        &Change::Checkpoint {
            state: json!({"done": 4}),
            message: Some("step 5 of 8".into()),
        },
        1_100,
        0,
    );
    let handed = kept
        .apply_as(&a, &Change::HandOff(b.clone()), at(1_200), ms(0))
        .expect("its runner hands it off")
        .into_record();
    assert_eq!(handed.runner(), Some(&b));
    assert_eq!(handed.status(), &TaskStatus::Working);
    assert_eq!(handed.status_message(), Some(HANDED_OFF_MESSAGE));
    assert_eq!(handed.checkpoint(), Some(&json!({"done": 4})));
    assert_eq!(
        handed.resumed(),
        0,
        "counted when another server resumes it"
    );
    assert_eq!(
        handed.apply_as(&a, &Change::Fail(json!({})), at(1_300), ms(0)),
        Err(TransitionError::NotRunner),
        "the draining server cannot end it any more"
    );
    let resumed = handed
        .apply_as(&b, &Change::Resume(c.clone()), at(1_400), ms(0))
        .expect("the takeover names the runner it claimed")
        .into_record();
    assert_eq!((resumed.runner(), resumed.resumed()), (Some(&c), 1));
    assert_eq!(resumed.checkpoint(), Some(&json!({"done": 4})));
    assert_eq!(
        record()
            .with_runner(a.clone(), None)
            .apply_as(&a, &Change::HandOff(b), at(1_100), ms(0)),
        Err(TransitionError::NotResumable)
    );
}

#[test]
fn a_drain_waits_only_for_a_resumable_record_marked_so_and_its_first_checkpoint_is_kept() {
    let call = json!({"name": "job", "arguments": {"n": 1}});
    let plain = record().with_drain_wait(true);
    assert!(!plain.drain_waits(), "not resumable: nothing to wait for");
    let resumable = record()
        .with_runner(RunnerId::new("a"), Some(call))
        .with_drain_wait(true)
        .with_first_checkpoint(Some(json!({"upstream": "jobs"})));
    assert!(resumable.drain_waits());
    assert_eq!(resumable.checkpoint(), Some(&json!({"upstream": "jobs"})));
    // Both kept through a store's serialization, and through a resume.
    let stored: TaskRecord =
        serde_json::from_value(serde_json::to_value(&resumable).unwrap()).unwrap();
    assert!(stored.drain_waits());
    let resumed = stored
        .apply(&Change::Resume(RunnerId::new("b")), at(1_100), ms(0))
        .unwrap()
        .record;
    assert!(resumed.drain_waits());
    assert_eq!(resumed.checkpoint(), Some(&json!({"upstream": "jobs"})));
    // A record written before the flag existed reads without it.
    let mut old = serde_json::to_value(&resumable).unwrap();
    old["run"].as_object_mut().unwrap().remove("drain_wait");
    let old: TaskRecord = serde_json::from_value(old).unwrap();
    assert!(!old.drain_waits());
    assert!(
        !serde_json::to_string(&record().with_runner(RunnerId::new("a"), None))
            .unwrap()
            .contains("drain_wait"),
        "not written when false"
    );
}
