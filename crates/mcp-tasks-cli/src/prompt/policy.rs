//! The input policy: `--input MODE` and its `--answer FIELD=VALUE` values.

use std::collections::BTreeMap;

use anyhow::bail;

/// How input requests are answered (`--input` and `--answer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InputPolicy {
    /// Ask on the terminal (blocking; the caller runs it off the runtime).
    Prompt,
    /// Accept: forms are filled from these `--answer` values (field name to
    /// raw text) and the schema's defaults; URL requests are accepted.
    Accept(BTreeMap<String, String>),
    /// Decline every elicitation.
    Decline,
    /// Answer nothing: the caller reports the input requirement.
    Fail,
}

impl InputPolicy {
    /// The policy for `--input MODE` with these `--answer FIELD=VALUE`
    /// values (split at the first `=`). `--answer` goes with `accept` only.
    pub(crate) fn parse(mode: &str, answers: &[String]) -> anyhow::Result<Self> {
        let policy = match mode {
            "prompt" => Self::Prompt,
            "decline" => Self::Decline,
            "fail" => Self::Fail,
            "accept" => {
                let mut values = BTreeMap::new();
                for answer in answers {
                    let Some((field, value)) = answer.split_once('=') else {
                        bail!("--answer {answer:?} must look like FIELD=VALUE");
                    };
                    if field.is_empty() {
                        bail!("--answer {answer:?} has no field name before '='");
                    }
                    if values.insert(field.to_owned(), value.to_owned()).is_some() {
                        bail!("--answer {field}=... is given more than once");
                    }
                }
                return Ok(Self::Accept(values));
            }
            other => {
                bail!("--input {other:?} is not a mode: use prompt, accept, decline or fail")
            }
        };
        if !answers.is_empty() {
            bail!("--answer is used only with --input accept (this is --input {mode})");
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::accept;
    use super::*;

    #[test]
    fn parse_policies() {
        assert_eq!(
            InputPolicy::parse("prompt", &[]).unwrap(),
            InputPolicy::Prompt
        );
        assert_eq!(
            InputPolicy::parse("decline", &[]).unwrap(),
            InputPolicy::Decline
        );
        assert_eq!(InputPolicy::parse("fail", &[]).unwrap(), InputPolicy::Fail);
        let InputPolicy::Accept(values) = accept(&["a=1", "b=x=y", "c="]) else {
            panic!("not accept");
        };
        let expected: BTreeMap<String, String> = [("a", "1"), ("b", "x=y"), ("c", "")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(values, expected);
        let bad = [
            ("maybe", vec![], "not a mode"),
            ("accept", vec!["novalue"], "FIELD=VALUE"),
            ("accept", vec!["=1"], "no field name"),
            ("accept", vec!["a=1", "a=2"], "more than once"),
            ("decline", vec!["a=1"], "only with --input accept"),
            ("prompt", vec!["a=1"], "only with --input accept"),
        ];
        for (mode, answers, expected) in bad {
            let answers: Vec<String> = answers.into_iter().map(str::to_owned).collect();
            let error = InputPolicy::parse(mode, &answers).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }
}
