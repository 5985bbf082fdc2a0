//! Answering input requests (elicitation, sampling, roots), in a task
//! (`input_required` + `tasks/update`) or before one (an MRTR round).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    ClientResult, InputRequest, InputRequiredResult, InputResponses, NumberOrString, ServerRequest,
};
use rmcp::service::{RequestContext, Service};
use rmcp::{ClientHandler, RoleClient};
use serde::Serialize;
use serde_json::Value;

use super::deadline::Deadline;
use super::error::{Error, ProtocolViolation, Stage};
use super::unanswered::{InputKind, Unanswered};
use super::{AwaitOptions, TasksClient};
use crate::form::{ContentError, Elicited, Form};
use crate::task::RpcError;

/// A function that answers input requests: called with the requests not yet
/// answered in this wait (key to the `{method, params}` object as sent),
/// it returns responses by key. Keys it leaves out stay unanswered for now;
/// keys that were not offered are dropped, never sent. An [`InputError`]
/// ends the wait with [`Error::InputHandler`] naming its key, and nothing of
/// that round is sent.
pub type InputResolver = Arc<
    dyn Fn(BTreeMap<String, Value>) -> BoxFuture<'static, Result<InputResponses, InputError>>
        + Send
        + Sync,
>;

/// Why a resolver could not answer an input request (for example, a form
/// whose required field has no value to give). It ends the wait as
/// [`Error::InputHandler`].
#[derive(Debug)]
pub struct InputError {
    key: String,
    reason: Box<dyn std::error::Error + Send + Sync>,
}

impl InputError {
    /// The request under `key` cannot be answered, for `reason` (a message or an error).
    pub fn new(
        key: impl Into<String>,
        reason: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// The key of the input request.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "input request {:?} cannot be answered: {}",
            self.key, self.reason
        )
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.reason)
    }
}

impl From<InputError> for Error {
    fn from(error: InputError) -> Self {
        Self::InputHandler {
            key: error.key,
            source: error.reason,
        }
    }
}

/// How a wait answers input requests.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum InputMode {
    /// The rmcp `ClientHandler` the client was built with answers
    /// `elicitation/create`, `sampling/createMessage` and `roots/list`. A
    /// kind whose capability the handler does not declare, or that it
    /// answers with -32601, ends the wait with the input-required state,
    /// naming the missing handler ([`Unanswered::MissingHandler`]).
    #[default]
    Handlers,
    /// End the wait with the input-required state at once.
    Return,
    /// A resolver function answers.
    Resolver(InputResolver),
}

impl InputMode {
    /// A resolver from an async closure (see [`InputResolver`]).
    pub fn resolver<F, Fut>(resolve: F) -> Self
    where
        F: Fn(BTreeMap<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<InputResponses, InputError>> + Send + 'static,
    {
        Self::Resolver(Arc::new(move |requests| Box::pin(resolve(requests))))
    }
}

impl InputMode {
    /// A resolver for forms (`elicitation/create` in form mode) that answers
    /// with typed values: `answer` is called with each form request in turn
    /// and returns an [`Elicited`] (accept with any `T: Serialize`, such as
    /// the struct the server's form was made from, decline or cancel). The
    /// library builds the wire answer and checks it against the form before
    /// anything is sent ([`Error::InvalidInputResponse`] when it does not
    /// fit). Requests that are not forms (sampling, roots, URL mode, a
    /// schema that cannot be read) stay unanswered, as with any resolver
    /// that leaves a key out.
    ///
    /// ```
    /// use mcp_tasks::form::Elicited;
    /// use mcp_tasks::InputMode;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Approval { approve: bool }
    ///
    /// let input = InputMode::forms(|request| async move {
    ///     Ok(if request.message().contains("deploy") {
    ///         Elicited::Accept(Approval { approve: true })
    ///     } else {
    ///         Elicited::Decline
    ///     })
    /// });
    /// # let _ = input;
    /// ```
    pub fn forms<T, F, Fut>(answer: F) -> Self
    where
        T: Serialize,
        F: Fn(FormRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Elicited<T>, InputError>> + Send + 'static,
    {
        let answer = Arc::new(answer);
        Self::resolver(move |requests: BTreeMap<String, Value>| {
            let answer = answer.clone();
            async move {
                let mut responses = InputResponses::new();
                for (key, request) in requests {
                    let Some(form) = FormRequest::read(&key, &request) else {
                        continue;
                    };
                    let elicited = answer(form).await?;
                    let wire = elicited
                        .to_wire()
                        .map_err(|error| InputError::new(key.clone(), error))?;
                    responses.insert(key, wire);
                }
                Ok(responses)
            }
        })
    }
}

/// A form the server asks to have filled in, as [`InputMode::forms`] hands
/// it over: its key, message and [`Form`], and the request as sent.
#[derive(Debug, Clone)]
pub struct FormRequest {
    key: String,
    message: String,
    form: Form,
    request: Value,
}

impl FormRequest {
    /// Reads the input request `request` under `key` if it is a form whose
    /// schema can be read.
    pub fn read(key: &str, request: &Value) -> Option<Self> {
        if request.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            return None;
        }
        let params = request.get("params")?;
        if !matches!(
            params.get("mode").and_then(Value::as_str),
            None | Some("form")
        ) {
            return None;
        }
        let form = Form::from_value(params.get("requestedSchema")?).ok()?;
        Some(Self {
            key: key.to_owned(),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            form,
            request: request.clone(),
        })
    }

    /// The key of the input request.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What the server says to the user.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The form: its fields, in schema order.
    pub fn form(&self) -> &Form {
        &self.form
    }

    /// The request as the server sent it (`{method, params}`).
    pub fn request(&self) -> &Value {
        &self.request
    }
}

impl fmt::Debug for InputMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Handlers => "Handlers",
            Self::Return => "Return",
            Self::Resolver(_) => "Resolver(..)",
        })
    }
}

impl<H: ClientHandler> TasksClient<H> {
    /// Answers `requests` as `options.input` says, each handler or the
    /// resolver cancelled at `deadline` ([`Error::Timeout`] naming it, with
    /// no task: the wait adds its own); `round` is the round of `tools/call`
    /// that asked (MRTR), `None` for a task's input. `Ok(Err(..))` means the
    /// input is not to be answered here, and why (return mode, or no
    /// handler). Every response returned has been validated and is for a
    /// key offered.
    pub(super) async fn answer_input(
        &self,
        requests: &BTreeMap<String, Value>,
        options: &AwaitOptions,
        deadline: &Deadline,
        round: Option<usize>,
    ) -> Result<Result<InputResponses, Unanswered>, Error> {
        let mut responses = match &options.input {
            InputMode::Return => return Ok(Err(Unanswered::Returned)),
            InputMode::Handlers => {
                match self.answer_with_handler(requests, deadline, round).await? {
                    Ok(responses) => responses,
                    Err(unanswered) => return Ok(Err(unanswered)),
                }
            }
            InputMode::Resolver(resolve) => {
                match deadline.within(resolve(requests.clone())).await {
                    Some(resolved) => resolved?,
                    None => {
                        let keys = requests.keys().cloned().collect();
                        return Err(deadline.timeout(
                            Stage::InputResolver { keys, round },
                            None,
                            None,
                        ));
                    }
                }
            }
        };
        responses.retain(|key, _| requests.contains_key(key));
        for (key, response) in &responses {
            validate_input_response(&requests[key], response).map_err(|reason| {
                Error::InvalidInputResponse {
                    key: key.clone(),
                    reason,
                }
            })?;
        }
        Ok(Ok(responses))
    }

    /// Answers an MRTR `InputRequiredResult`; `Ok` holds the responses to
    /// retry with (empty when the server sent only `requestState`).
    pub(super) async fn answer_call_input(
        &self,
        result: &InputRequiredResult,
        options: &AwaitOptions,
        deadline: &Deadline,
        round: usize,
    ) -> Result<Result<InputResponses, Unanswered>, Error> {
        let requests: BTreeMap<String, Value> = result
            .input_requests
            .iter()
            .flatten()
            .map(|(key, request)| {
                (
                    key.clone(),
                    serde_json::to_value(request).unwrap_or(Value::Null),
                )
            })
            .collect();
        if requests.is_empty() {
            return Ok(Ok(InputResponses::new()));
        }
        self.answer_input(&requests, options, deadline, Some(round))
            .await
    }

    async fn answer_with_handler(
        &self,
        requests: &BTreeMap<String, Value>,
        deadline: &Deadline,
        round: Option<usize>,
    ) -> Result<Result<InputResponses, Unanswered>, Error> {
        let capabilities = self.capabilities();
        let mut parsed = Vec::with_capacity(requests.len());
        for (key, raw) in requests {
            let request: InputRequest = serde_json::from_value(raw.clone()).map_err(|error| {
                Error::protocol(
                    ProtocolViolation::MalformedInputRequest {
                        key: key.clone(),
                        reason: error.to_string(),
                    },
                    Some(raw.clone()),
                )
            })?;
            let declared = match &request {
                InputRequest::Elicitation(_) => capabilities.elicitation.is_some(),
                InputRequest::CreateMessage(_) => capabilities.sampling.is_some(),
                InputRequest::ListRoots(_) => capabilities.roots.is_some(),
                _ => false,
            };
            if !declared {
                return Ok(Err(Unanswered::MissingHandler {
                    key: key.clone(),
                    kind: InputKind::of(raw),
                    declared: false,
                }));
            }
            parsed.push((key, request, raw));
        }
        let mut responses = InputResponses::new();
        for (key, request, raw) in parsed {
            let missing = |declared| {
                Ok(Err(Unanswered::MissingHandler {
                    key: key.clone(),
                    kind: InputKind::of(raw),
                    declared,
                }))
            };
            let request = match request {
                InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
                InputRequest::CreateMessage(request) => {
                    ServerRequest::CreateMessageRequest(request)
                }
                InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request),
                _ => return missing(false),
            };
            let context = RequestContext::<RoleClient>::new(
                NumberOrString::String(key.as_str().into()),
                self.peer().clone(),
            );
            let handled = deadline
                .within(self.running.service().handle_request(request, context))
                .await;
            let Some(handled) = handled else {
                let stage = Stage::InputHandler {
                    key: key.clone(),
                    round,
                };
                return Err(deadline.timeout(stage, None, None));
            };
            let response = match handled {
                Ok(ClientResult::ElicitResult(result)) => serde_json::to_value(result),
                Ok(ClientResult::CreateMessageResult(result)) => serde_json::to_value(result),
                Ok(ClientResult::ListRootsResult(result)) => serde_json::to_value(result),
                Ok(other) => serde_json::to_value(other),
                Err(error) if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND => {
                    return missing(true);
                }
                Err(error) => {
                    return Err(InputError::new(key.clone(), RpcError::from(error)).into());
                }
            };
            responses.insert(key.clone(), response.unwrap_or(Value::Null));
        }
        Ok(Ok(responses))
    }
}

/// Checks that `response` is a valid answer to the input request `request`
/// (the `{method, params}` object as the server sent it):
///
/// * `elicitation/create`: `action` is `accept`, `decline` or `cancel`;
///   `content` appears only with `accept` in form mode, where it must fit
///   the requested schema as [`Form::validate`](crate::form::Form::validate)
///   checks it (every required field, no unknown field, each value of its
///   field's type, bounds, options and format); a URL-mode accept has no
///   `content`; a form whose schema cannot be read, or an unknown mode,
///   has no valid answer but decline and cancel;
/// * `sampling/createMessage`: `role`, `content` and `model` are present;
/// * `roots/list`: `roots` is an array of objects with a string `uri`.
pub fn validate_input_response(request: &Value, response: &Value) -> Result<(), String> {
    let Some(fields) = response.as_object() else {
        return Err("a response must be a JSON object".into());
    };
    match request.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => {
            let content = fields.get("content");
            match fields.get("action").and_then(Value::as_str) {
                Some("accept") => {}
                Some("decline" | "cancel") if content.is_none() => return Ok(()),
                Some("decline" | "cancel") => {
                    return Err("`content` is allowed only when `action` is accept".into());
                }
                Some(other) => {
                    return Err(format!(
                        "`action` must be accept, decline or cancel, not {other:?}"
                    ));
                }
                None => return Err("`action` is missing".into()),
            }
            match request.pointer("/params/mode").and_then(Value::as_str) {
                None | Some("form") => {}
                Some("url") => {
                    return match content {
                        None => Ok(()),
                        Some(_) => {
                            Err("`content` is not allowed in answer to a URL request".into())
                        }
                    };
                }
                Some(other) => return Err(format!("unknown elicitation mode {other:?}")),
            }
            let schema = request
                .pointer("/params/requestedSchema")
                .unwrap_or(&Value::Null);
            let form = Form::from_value(schema).map_err(|error| {
                let mut reason = format!("the request's `requestedSchema` cannot be read: {error}");
                if let Some(source) = std::error::Error::source(&error) {
                    reason.push_str(&format!(": {source}"));
                }
                reason
            })?;
            let empty = serde_json::Map::new();
            let content = match content {
                None => &empty,
                Some(Value::Object(content)) => content,
                Some(_) => return Err("`content` must be an object".into()),
            };
            form.validate(content)
                .map(drop)
                .map_err(|error| match error {
                    ContentError::Missing { field } => {
                        format!("`content` lacks the required property {field:?}")
                    }
                    ContentError::Unknown { field } => {
                        format!("`content.{field}` is not a property of the requested schema")
                    }
                    ContentError::Invalid { field, problem } => {
                        format!("`content.{field}` {problem}")
                    }
                })
        }
        Some("sampling/createMessage") => {
            match fields.get("role").and_then(Value::as_str) {
                Some("user" | "assistant") => {}
                _ => return Err("`role` must be \"user\" or \"assistant\"".into()),
            }
            if !matches!(
                fields.get("content"),
                Some(Value::Object(_) | Value::Array(_))
            ) {
                return Err("`content` must be a content object or an array of them".into());
            }
            if !fields.get("model").is_some_and(Value::is_string) {
                return Err("`model` must be a string".into());
            }
            Ok(())
        }
        Some("roots/list") => {
            let Some(Value::Array(roots)) = fields.get("roots") else {
                return Err("`roots` must be an array".into());
            };
            if roots
                .iter()
                .all(|root| root.get("uri").is_some_and(Value::is_string))
            {
                Ok(())
            } else {
                Err("every root needs a string `uri`".into())
            }
        }
        Some(other) => Err(format!("unknown input request method {other:?}")),
        None => Err("the input request has no method".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form() -> Value {
        json!({"method": "elicitation/create", "params": {"message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}})
    }

    #[test]
    fn elicitation_responses() {
        let ok = [
            json!({"action": "accept", "content": {"name": "Ada"}}),
            json!({"action": "decline"}),
            json!({"action": "cancel"}),
        ];
        for response in ok {
            validate_input_response(&form(), &response).unwrap();
        }
        let bad = [
            (json!({"action": "maybe"}), "action"),
            (json!({}), "missing"),
            (
                json!({"action": "decline", "content": {"name": "x"}}),
                "only when",
            ),
            (json!({"action": "accept", "content": {}}), "required"),
            (
                json!({"action": "accept", "content": {"name": {"x": 1}}}),
                "content.name",
            ),
            (json!({"action": "accept", "content": "x"}), "object"),
            (json!("accept"), "JSON object"),
        ];
        for (response, expected) in bad {
            let error = validate_input_response(&form(), &response).unwrap_err();
            assert!(error.contains(expected), "{error} for {response}");
        }
        let url = json!({"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x"}});
        validate_input_response(&url, &json!({"action": "accept"})).unwrap();
        assert!(
            validate_input_response(&url, &json!({"action": "accept", "content": {}})).is_err()
        );
    }

    #[test]
    fn elicitation_content_must_fit_the_schema() {
        let request = |schema: Value| {
            json!({"method": "elicitation/create", "params": {"mode": "form", "message": "m",
                "requestedSchema": schema}})
        };
        let rich = request(json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3},
            "age": {"type": "integer", "minimum": 0},
            "size": {"type": "string", "enum": ["s", "l"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1},
            "email": {"type": "string", "format": "email"}
        }, "required": ["name"]}));
        let accept = |content: Value| json!({"action": "accept", "content": content});
        validate_input_response(
            &rich,
            &accept(
                json!({"name": "Ada", "age": 5.0, "size": "s", "tags": ["a"], "email": "a@b.co"}),
            ),
        )
        .unwrap();
        let bad = [
            (
                json!({"name": "Ada", "nick": "x"}),
                "`content.nick` is not a property",
            ),
            (json!({"name": 5}), "`content.name` must be a string"),
            (
                json!({"name": "Adelaide"}),
                "`content.name` must be at most 3 characters",
            ),
            (
                json!({"name": "Ada", "age": -1}),
                "`content.age` must be at least 0",
            ),
            (
                json!({"name": "Ada", "age": 1.5}),
                "`content.age` must be a whole number",
            ),
            (
                json!({"name": "Ada", "size": "m"}),
                "`content.size` \"m\" is not one of",
            ),
            (
                json!({"name": "Ada", "tags": ["a", "b"]}),
                "`content.tags` takes at most 1",
            ),
            (
                json!({"name": "Ada", "email": "ada"}),
                "`content.email` must be an email",
            ),
        ];
        for (content, expected) in bad {
            let error = validate_input_response(&rich, &accept(content.clone())).unwrap_err();
            assert!(error.contains(expected), "{error} for {content}");
        }
        // A schema that cannot be read as a form has no valid accept.
        let unreadable = [
            (
                request(json!({"type": "object", "properties": {"x": {"type": "object"}}})),
                "cannot hold",
            ),
            (
                request(json!({"type": "object", "properties": {}, "required": ["x"]})),
                "does not define",
            ),
            (
                json!({"method": "elicitation/create", "params": {"message": "m"}}),
                "not an object schema",
            ),
        ];
        for (request, expected) in unreadable {
            let error = validate_input_response(&request, &accept(json!({}))).unwrap_err();
            assert!(error.contains(expected), "{error}");
            validate_input_response(&request, &json!({"action": "decline"})).unwrap();
        }
        let future = json!({"method": "elicitation/create", "params": {"mode": "telepathy", "message": "m"}});
        assert!(
            validate_input_response(&future, &json!({"action": "accept"}))
                .unwrap_err()
                .contains("unknown elicitation mode")
        );
        validate_input_response(&future, &json!({"action": "cancel"})).unwrap();
    }

    #[test]
    fn sampling_and_roots_responses() {
        let sampling =
            json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}});
        validate_input_response(
            &sampling,
            &json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}),
        )
        .unwrap();
        assert!(
            validate_input_response(&sampling, &json!({"role": "assistant", "content": {}}))
                .unwrap_err()
                .contains("model")
        );
        let roots = json!({"method": "roots/list"});
        validate_input_response(&roots, &json!({"roots": [{"uri": "file:///a"}]})).unwrap();
        assert!(validate_input_response(&roots, &json!({"roots": [{"name": "a"}]})).is_err());
        assert!(validate_input_response(&json!({"method": "x/y"}), &json!({})).is_err());
    }
}
