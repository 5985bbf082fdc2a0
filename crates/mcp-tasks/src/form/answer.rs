//! [`Elicited`]: the answer to a form, typed, on both sides of the wire.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The answer to an elicitation: accepted with its content, declined or
/// cancelled (the wire's `{"action": "accept", "content": {..}}`,
/// `{"action": "decline"}`, `{"action": "cancel"}`).
///
/// A server's tool gets one back from `server::TaskContext::elicit`; a
/// client's resolver gives one for each form (`client::InputMode::forms`).
/// (Not links: this module sits below both halves.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Elicited<T> {
    /// The user filled in the form.
    Accept(T),
    /// The user said no, explicitly.
    Decline,
    /// The user dismissed the form without choosing.
    Cancel,
}

/// Why a wire answer could not become an [`Elicited`], or the other way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// `action` is missing or not accept, decline or cancel.
    #[error("`action` must be accept, decline or cancel")]
    Action,
    /// The content does not have the shape of the type asked for.
    #[error("the content does not fit the type asked for: {0}")]
    Content(#[source] serde_json::Error),
    /// The accepted value does not serialize to a JSON object.
    #[error("the accepted value must serialize to a JSON object")]
    NotAnObject,
}

impl<T> Elicited<T> {
    /// The accepted content, if the form was accepted.
    pub fn accepted(self) -> Option<T> {
        match self {
            Self::Accept(content) => Some(content),
            Self::Decline | Self::Cancel => None,
        }
    }

    /// The wire's name of the action: `accept`, `decline` or `cancel`.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Accept(_) => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

impl<T: DeserializeOwned> Elicited<T> {
    /// Reads an answer as the wire carries it. An accept without `content`
    /// reads as an empty object.
    pub fn from_wire(answer: &Value) -> Result<Self, AnswerError> {
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {
                let content = answer
                    .get("content")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new()));
                serde_json::from_value(content)
                    .map(Self::Accept)
                    .map_err(AnswerError::Content)
            }
            Some("decline") => Ok(Self::Decline),
            Some("cancel") => Ok(Self::Cancel),
            _ => Err(AnswerError::Action),
        }
    }
}

impl<T: Serialize> Elicited<T> {
    /// The answer as the wire carries it.
    pub fn to_wire(&self) -> Result<Value, AnswerError> {
        let mut answer = Map::new();
        answer.insert("action".into(), Value::from(self.action()));
        if let Self::Accept(content) = self {
            match serde_json::to_value(content).map_err(AnswerError::Content)? {
                Value::Object(content) => {
                    answer.insert("content".into(), Value::Object(content));
                }
                _ => return Err(AnswerError::NotAnObject),
            }
        }
        Ok(Value::Object(answer))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Approval {
        approve: bool,
        note: Option<String>,
    }

    #[test]
    fn answers_round_trip_through_the_wire() {
        let accepted = Elicited::Accept(Approval {
            approve: true,
            note: None,
        });
        let wire = accepted.to_wire().unwrap();
        assert_eq!(
            wire,
            json!({"action": "accept", "content": {"approve": true, "note": null}})
        );
        assert_eq!(Elicited::<Approval>::from_wire(&wire).unwrap(), accepted);
        for answer in [Elicited::<Approval>::Decline, Elicited::Cancel] {
            let wire = answer.to_wire().unwrap();
            assert_eq!(wire, json!({"action": answer.action()}));
            assert_eq!(Elicited::<Approval>::from_wire(&wire).unwrap(), answer);
        }
    }

    #[test]
    fn bad_answers_are_errors() {
        assert!(matches!(
            Elicited::<Approval>::from_wire(&json!({"action": "maybe"})),
            Err(AnswerError::Action)
        ));
        assert!(matches!(
            Elicited::<Approval>::from_wire(
                &json!({"action": "accept", "content": {"approve": "yes"}})
            ),
            Err(AnswerError::Content(_))
        ));
        assert!(matches!(
            Elicited::Accept(3).to_wire(),
            Err(AnswerError::NotAnObject)
        ));
        assert_eq!(
            Elicited::<Map<String, Value>>::from_wire(&json!({"action": "accept"})).unwrap(),
            Elicited::Accept(Map::new())
        );
    }
}
