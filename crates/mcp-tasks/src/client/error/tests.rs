use super::*;

fn rpc(code: i64) -> Box<RpcError> {
    Box::new(RpcError {
        code,
        message: "no".into(),
        data: None,
    })
}

#[test]
fn every_group_has_its_kind_and_name() {
    let cases = [
        (
            Error::Rpc {
                method: "tools/call",
                error: rpc(-32603),
            },
            ErrorKind::Refused,
            "refused",
        ),
        (
            Error::UnknownTask {
                method: "tasks/get",
                error: rpc(INVALID_PARAMS),
            },
            ErrorKind::Refused,
            "refused",
        ),
        (
            Error::protocol(ProtocolViolation::UnexpectedTask, None),
            ErrorKind::Protocol,
            "protocol",
        ),
        (
            Error::CallInputRequired {
                unanswered: Unanswered::Returned,
            },
            ErrorKind::Task,
            "task",
        ),
        (
            Error::InvalidInputResponse {
                key: "k".into(),
                reason: "r".into(),
            },
            ErrorKind::Input,
            "input",
        ),
        (
            Error::Transport {
                method: "tasks/get",
                source: Box::new(ServiceError::TransportClosed),
            },
            ErrorKind::Transport,
            "transport",
        ),
        (
            Error::AnswerTooLarge {
                method: "tasks/get",
                bound: 1 << 20,
                size: None,
            },
            ErrorKind::TooLarge,
            "too_large",
        ),
        (
            Error::ConnectTimeout(Duration::from_secs(1)),
            ErrorKind::Connect,
            "connect",
        ),
        (Error::Usage("no"), ErrorKind::Usage, "usage"),
        (
            Error::NotReady {
                status: TaskStatus::Working,
                missing: "a result",
            },
            ErrorKind::Usage,
            "usage",
        ),
    ];
    for (error, kind, name) in cases {
        assert_eq!(error.kind(), kind, "{error}");
        assert_eq!(error.kind().to_string(), name);
    }
}

#[test]
fn a_timeout_names_its_stage_and_never_the_task_id() {
    let state =
        TaskState::from_json(serde_json::json!({"taskId": "secret-7", "status": "working"}))
            .unwrap();
    let cases = [
        (Stage::Call { round: 1 }, "during tools/call ("),
        (Stage::Call { round: 3 }, "during tools/call round 3"),
        (
            Stage::InputHandler {
                key: "name".into(),
                round: None,
            },
            "the input handler for key \"name\" (",
        ),
        (
            Stage::InputResolver {
                keys: vec!["a".into()],
                round: Some(2),
            },
            "the input resolver for key \"a\" (asked by tools/call round 2)",
        ),
        (
            Stage::InputResolver {
                keys: vec!["a".into(), "b".into()],
                round: None,
            },
            "the input resolver for keys [\"a\", \"b\"]",
        ),
        (
            Stage::Request {
                method: "tasks/get",
            },
            "during tasks/get",
        ),
        (Stage::Pause, "the pause before the next read"),
        (Stage::Journal, "during the journal write"),
    ];
    for (stage, expected) in cases {
        let error = Error::Timeout {
            task_id: Some(state.id.clone()),
            waited: Duration::from_millis(1500),
            last_state: Some(Box::new(state.clone())),
            stage: stage.clone(),
        };
        let text = error.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(
            text.contains("1.5s") && text.contains("last status: working"),
            "{text}"
        );
        assert!(!text.contains("secret-7") && !format!("{error:?}").contains("secret-7"));
        assert_eq!(error.timeout_stage(), Some(&stage));
        assert_eq!(error.task_id(), Some(&state.id));
    }
    let before_a_task = Error::Timeout {
        task_id: None,
        waited: Duration::ZERO,
        last_state: None,
        stage: Stage::Call { round: 2 },
    };
    assert_eq!(before_a_task.task_id(), None);
    assert!(
        before_a_task
            .to_string()
            .ends_with("during tools/call round 2 (no task was made)")
    );
}

fn sent(error: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Transport {
        method: "tasks/get",
        source: Box::new(ServiceError::TransportSend(
            rmcp::transport::DynamicTransportError::from_parts(
                "test",
                std::any::TypeId::of::<()>(),
                Box::new(error),
            ),
        )),
    }
}

#[test]
fn a_stdio_answer_that_is_not_json_rpc_is_retried_a_few_times() {
    let stdio = Error::protocol(
        ProtocolViolation::UnusableAnswers {
            method: "tasks/get",
            attempts: 1,
        },
        None,
    );
    assert_eq!(stdio.retry(), Retry::Garbage);
    assert_eq!(
        Error::protocol(ProtocolViolation::UnexpectedTask, None).retry(),
        Retry::No
    );
    let lost = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    assert_eq!(sent(lost).retry(), Retry::Fault);
    let not_json = serde_json::from_str::<Value>("<html>").unwrap_err();
    assert_eq!(sent(not_json).retry(), Retry::Garbage);
}

/// rmcp's real Streamable HTTP errors: with reqwest's error type (the
/// crate's own clients) they are told by type; with another client's,
/// by the names of rmcp's variants. A variant rmcp renames or removes
/// fails to build here, and one whose `Debug` changes fails the asserts.
#[cfg(feature = "http-client")]
#[test]
fn unusable_http_answers_are_told_from_rmcp_errors() {
    use rmcp::transport::streamable_http_client::StreamableHttpError as Http;

    fn unusable<E: std::error::Error + Send + Sync + 'static>() -> Vec<Http<E>> {
        vec![
            Http::UnexpectedContentType(Some("text/html".into())),
            Http::UnexpectedContentType(None),
            Http::UnexpectedServerResponse("HTTP 200: <html>".into()),
            Http::Deserialize(serde_json::from_str::<Value>("<html>").unwrap_err()),
            Http::ResponseBodyTooLarge { max_size: 1 },
        ]
    }
    fn usable<E: std::error::Error + Send + Sync + 'static>() -> Vec<Http<E>> {
        vec![
            Http::TransportChannelClosed,
            Http::UnexpectedEndOfStream,
            Http::SessionExpired,
            Http::ControlRequestTimeout,
            Http::Io(std::io::Error::other("reset")),
            Http::ServerDoesNotSupportSse,
        ]
    }
    /// An HTTP client error type other than reqwest's.
    #[derive(Debug, thiserror::Error)]
    #[error("another client failed")]
    struct OtherClient;

    for error in unusable::<reqwest::Error>() {
        let shown = format!("{error:?}");
        assert_eq!(sent(error).retry(), Retry::Garbage, "{shown}");
    }
    for error in unusable::<OtherClient>() {
        let shown = format!("{error:?}");
        assert!(unusable_by_name(&error), "{shown}");
        assert_eq!(sent(error).retry(), Retry::Garbage, "{shown}");
    }
    for error in usable::<reqwest::Error>() {
        let shown = format!("{error:?}");
        assert_eq!(sent(error).retry(), Retry::Fault, "{shown}");
    }
    for error in usable::<OtherClient>() {
        let shown = format!("{error:?}");
        assert!(!unusable_by_name(&error), "{shown}");
        assert_eq!(sent(error).retry(), Retry::Fault, "{shown}");
    }
    assert!(!unusable_by_name(&Http::<OtherClient>::Client(OtherClient)));
}

#[test]
fn an_answer_past_the_bound_is_told_from_a_refusal() {
    use crate::client::answer_bound::too_large_error;
    let error = Error::from_service(
        "tasks/get",
        ServiceError::McpError(too_large_error(1 << 20, Some(20_000_000))),
    );
    assert!(error.is_answer_too_large(), "{error:?}");
    assert_eq!(error.answer_bound(), Some(1 << 20));
    assert_eq!(error.rpc_error(), None, "not the server's error");
    assert_eq!(error.retry(), Retry::No, "the same answer would come again");
    assert_eq!(
        error.to_string(),
        "the answer to tasks/get is 20,000,000 bytes, past this client's limit of 1,048,576 \
         bytes (ConnectOptions::max_answer_bytes); it was not read"
    );
    let unknown = Error::from_service(
        "tasks/get",
        ServiceError::McpError(too_large_error(9, None)),
    );
    assert!(
        unknown
            .to_string()
            .starts_with("the answer to tasks/get is past this client's limit of 9 bytes")
    );
    let refused = Error::from_service(
        "tasks/get",
        ServiceError::McpError(rmcp::ErrorData::internal_error("no", None)),
    );
    assert_eq!(refused.answer_bound(), None);
}

#[test]
fn durations_in_messages_are_rounded_for_people() {
    let cases = [
        (Duration::ZERO, "0ms"),
        (Duration::from_millis(40), "40ms"),
        (Duration::from_nanos(1_001_550_807), "1.0s"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_millis(9_949), "9.9s"),
        (Duration::from_millis(9_950), "10s"),
        (Duration::from_millis(59_499), "59s"),
        (Duration::from_millis(59_500), "1m00s"),
        (Duration::from_secs(150), "2m30s"),
        (Duration::from_secs(3_599), "59m59s"),
        (Duration::from_secs(3_900), "1h05m"),
        (Duration::from_secs(100 * 3600), "100h00m"),
    ];
    for (duration, shown) in cases {
        assert_eq!(crate::task::human_duration(duration), shown, "{duration:?}");
    }
    let error = Error::Timeout {
        task_id: None,
        waited: Duration::from_nanos(1_001_550_807),
        last_state: None,
        stage: Stage::Call { round: 1 },
    };
    assert!(
        error.to_string().starts_with("gave up after 1.0s, during"),
        "{error}"
    );
    let error = Error::ConnectTimeout(Duration::from_millis(30_200));
    assert!(error.to_string().ends_with("within 30s"), "{error}");
}
