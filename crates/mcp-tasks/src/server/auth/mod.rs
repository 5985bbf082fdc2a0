//! Caller authentication by bearer token: [`BearerTokens`], a set of
//! tokens each with a label that names its caller.
//!
//! Over HTTP, [`StreamableHttpServer::with_bearer_tokens`] (or the
//! [`require_bearer_tokens`] layer on a router of your own) refuses every
//! request whose `Authorization: Bearer ...` is missing or unknown, on
//! every route, with HTTP 401, a JSON-RPC error and `WWW-Authenticate:
//! Bearer`; an accepted request carries [`Authenticated`] with its
//! principal, which [`default_principal`] uses. So the principal of an
//! authenticated caller is the label of its token, and the tasks it made
//! stay its own when its token is replaced by a new one with the same label.
//!
//! Tokens are compared in constant time: the presented token's SHA-256 is
//! compared with every entry's, word by word without a branch (no early
//! exit), so how long a refusal takes tells nothing about how much of a
//! token was right. The set keeps only
//! the digests, and neither its `Debug` nor any error shows a token.
//!
//! # The tokens file
//!
//! ```text
//! # mcp-tasks bearer tokens: TOKEN [LABEL], one a line
//! 7c1e5b3f0a9d4e2b8f6a1c3d5e7f9a0b   alice
//! 0f9e8d7c6b5a49382716a5b4c3d2e1f0   alice
//! d41d8cd98f00b204e9800998ecf8427e   ci-runner
//! 5ab2c7e19f3d4a6b8c0d2e4f6a8b0c1d
//! ```
//!
//! * One token a line, then optionally its label, separated by spaces or
//!   tabs. Blank lines and lines whose first character other than space is
//!   `#` are ignored. The file must be UTF-8 and hold at least one token.
//! * A token is what follows `Bearer ` in the header: 16 to 4096 characters
//!   from `A-Z a-z 0-9 - . _ ~ + /`, optionally ending in `=`s (RFC 6750's
//!   `b64token`). The same token may not appear twice.
//! * A label is 1 to 64 characters from `A-Z a-z 0-9 - . _ @ +` and is the
//!   caller's principal. Several tokens may share a label: that is how a
//!   token is rotated (add the new one, move the callers, remove the old).
//!   Labels have no `:`, so none looks like a principal the server makes
//!   itself (`authorization:...`, `http:anonymous`, `token-sha256:...`).
//! * A token without a label has the principal `token-sha256:` and the
//!   SHA-256 of the token in hex: its tasks are lost to it when it is
//!   replaced.
//!
//! A malformed line is refused with its number and what is wrong with it,
//! never with its text (a line whose fields are swapped would otherwise
//! print a token).
//!
//! [`StreamableHttpServer::with_bearer_tokens`]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/struct.StreamableHttpServer.html#method.with_bearer_tokens
//! [`require_bearer_tokens`]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/fn.require_bearer_tokens.html
//!
//! The auth wing: who a request comes from. Bearer tokens (here), OAuth
//! access tokens (`oauth`, feature `oauth`) and the [`Principal`] every
//! task is bound to (`principal`). It imports nothing else of the server
//! (the engine, the transports and the operator listener import it), only
//! the crate's task and store types and the telemetry leaf.

#[cfg(feature = "oauth")]
pub mod oauth;
pub(crate) mod principal;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};

use http::HeaderMap;
use rmcp::model::Extensions;
use sha2::Digest;
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::server::auth::principal::{
    Authenticated, Principal, PrincipalExtractor, default_principal, push_hex,
};

/// The shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;
/// The longest token accepted.
pub const MAX_TOKEN_CHARS: usize = 4096;
/// The longest label accepted.
pub const MAX_LABEL_CHARS: usize = 64;

/// A set of bearer tokens, each with the principal of its caller. See the
/// [module docs](self) for the file format and the comparison.
///
/// Clones share the set: [`BearerTokens::replace`] on one (a server
/// rereading its tokens file) changes what every clone accepts, from the
/// next request on. The builder [`BearerTokens::with_token`] makes a set of
/// its own.
#[derive(Clone, Default)]
pub struct BearerTokens {
    entries: Arc<RwLock<Arc<[Entry]>>>,
}

#[derive(Clone)]
struct Entry {
    /// The token's SHA-256, as four words (compared word by word).
    digest: [u64; 4],
    principal: Principal,
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokens")
            .field("tokens", &self.len())
            .finish_non_exhaustive()
    }
}

/// Why a tokens file, or a token given to [`BearerTokens::with_token`], was
/// refused. No message shows a token or any text of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// The file could not be read.
    #[error("cannot read the tokens file")]
    Read(#[source] std::io::Error),
    /// A line (counted from 1) is not `TOKEN [LABEL]`.
    #[error("line {line}: {problem}")]
    Malformed {
        /// The line, counted from 1.
        line: usize,
        /// What is wrong with it.
        problem: MalformedLine,
    },
    /// A line repeats the token of an earlier one.
    #[error("line {line}: the same token as line {first}")]
    Duplicate {
        /// The line, counted from 1.
        line: usize,
        /// The earlier line with that token.
        first: usize,
    },
    /// The file holds no token, so every caller would be refused.
    #[error("the tokens file holds no token")]
    Empty,
}

/// What is wrong with a line of a tokens file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedLine {
    /// The line is not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// More than a token and a label.
    #[error("more than two fields (TOKEN [LABEL])")]
    TooManyFields,
    /// The token is shorter than [`MIN_TOKEN_CHARS`].
    #[error("the token is shorter than {MIN_TOKEN_CHARS} characters")]
    TokenTooShort,
    /// The token is longer than [`MAX_TOKEN_CHARS`].
    #[error("the token is longer than {MAX_TOKEN_CHARS} characters")]
    TokenTooLong,
    /// The token has a character a bearer token cannot have.
    #[error("the token has a character outside A-Z a-z 0-9 - . _ ~ + / (and = at its end)")]
    TokenCharacter,
    /// The label is longer than [`MAX_LABEL_CHARS`].
    #[error("the label is longer than {MAX_LABEL_CHARS} characters")]
    LabelTooLong,
    /// The label has a character a label cannot have.
    #[error("the label has a character outside A-Z a-z 0-9 - . _ @ +")]
    LabelCharacter,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unauthorized {
    /// No `Authorization: Bearer ...` header (none, another scheme, or
    /// several `Authorization` headers).
    Missing,
    /// A bearer token that is not in the set.
    Unknown,
}

impl Unauthorized {
    /// The `WWW-Authenticate` challenge for this refusal (RFC 6750 §3: an
    /// unknown token is `invalid_token`; a request without one gets the
    /// bare challenge).
    pub fn challenge(self) -> &'static str {
        match self {
            Self::Missing => "Bearer realm=\"mcp-tasks\"",
            Self::Unknown => "Bearer realm=\"mcp-tasks\", error=\"invalid_token\"",
        }
    }

    /// A sentence for the JSON-RPC error.
    pub fn message(self) -> &'static str {
        match self {
            Self::Missing => "Unauthorized: this server needs an Authorization: Bearer token",
            Self::Unknown => "Unauthorized: the bearer token is not valid",
        }
    }
}

impl BearerTokens {
    /// An empty set: refuses every caller until tokens are added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a tokens file (see the [module docs](self)); warns, naming the
    /// file, when other users may read it
    /// ([`private_files::warn_if_exposed`](crate::private_files::warn_if_exposed)).
    ///
    /// # Errors
    ///
    /// When the file cannot be read, has a malformed line or a repeated
    /// token, or holds no token.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TokensError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(TokensError::Read)?;
        // Not being able to tell is no reason to refuse the file.
        let _ = crate::private_files::warn_if_exposed(path);
        Self::parse(&bytes)
    }

    /// Reads the text of a tokens file (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// As [`BearerTokens::read`], less reading.
    pub fn parse(text: &[u8]) -> Result<Self, TokensError> {
        let mut entries = Vec::new();
        let mut seen: HashMap<[u64; 4], usize> = HashMap::new();
        for (index, line) in text.split(|&byte| byte == b'\n').enumerate() {
            let number = index + 1;
            let malformed = |problem| TokensError::Malformed {
                line: number,
                problem,
            };
            let line = std::str::from_utf8(line).map_err(|_| malformed(MalformedLine::NotUtf8))?;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_ascii_whitespace();
            let (Some(token), label) = (fields.next(), fields.next()) else {
                continue;
            };
            if fields.next().is_some() {
                return Err(malformed(MalformedLine::TooManyFields));
            }
            let entry = Entry::new(token, label).map_err(malformed)?;
            if let Some(&first) = seen.get(&entry.digest) {
                return Err(TokensError::Duplicate {
                    line: number,
                    first,
                });
            }
            seen.insert(entry.digest, number);
            entries.push(entry);
        }
        if entries.is_empty() {
            return Err(TokensError::Empty);
        }
        Ok(Self::of(entries))
    }

    /// Adds `token` with `label` (`None`: the principal is the token's
    /// digest, see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// A token or label outside the rules of a tokens file (reported as
    /// line 0), or a token already in the set.
    pub fn with_token(self, token: &str, label: Option<&str>) -> Result<Self, TokensError> {
        let entry = Entry::new(token, label)
            .map_err(|problem| TokensError::Malformed { line: 0, problem })?;
        let mut entries = self.current().to_vec();
        if entries.iter().any(|known| known.digest == entry.digest) {
            return Err(TokensError::Duplicate { line: 0, first: 0 });
        }
        entries.push(entry);
        Ok(Self::of(entries))
    }

    /// Accepts the tokens of `other` instead of these, in this set and
    /// every clone of it (see [`BearerTokens`]); requests already
    /// authenticated keep their principal.
    pub fn replace(&self, other: &BearerTokens) {
        let entries = other.current();
        *self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = entries;
    }

    /// How many tokens the set holds.
    pub fn len(&self) -> usize {
        self.current().len()
    }

    /// Whether the set holds no token (and so refuses everyone).
    pub fn is_empty(&self) -> bool {
        self.current().is_empty()
    }

    fn of(entries: Vec<Entry>) -> Self {
        Self {
            entries: Arc::new(RwLock::new(entries.into())),
        }
    }

    /// The entries now (a reader never waits on a replace for longer than
    /// the swap of one pointer).
    fn current(&self) -> Arc<[Entry]> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The principal of `token`, if it is in the set; compared in constant
    /// time against every entry (so the time grows with the set: about a
    /// nanosecond per token, plus one SHA-256 of the presented token).
    pub fn verify(&self, token: &str) -> Option<Principal> {
        let presented = digest(token);
        let entries = self.current();
        let mut found = u32::MAX;
        for (index, entry) in entries.iter().enumerate() {
            // Branch-free: every word of every entry is looked at.
            let differs = entry
                .digest
                .iter()
                .zip(presented)
                .fold(0u64, |bits, (known, sent)| bits | (known ^ sent));
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            found.conditional_assign(&index, differs.ct_eq(&0));
        }
        entries
            .get(usize::try_from(found).unwrap_or(usize::MAX))
            .map(|entry| entry.principal.clone())
    }

    /// The principal of a request with these headers, or why it has none.
    ///
    /// # Errors
    ///
    /// [`Unauthorized::Missing`] without exactly one `Authorization: Bearer`
    /// header, [`Unauthorized::Unknown`] for a token not in the set.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Unauthorized> {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(Unauthorized::Missing);
        };
        let token = bearer_token(value.as_bytes()).ok_or(Unauthorized::Missing)?;
        self.verify(token).ok_or(Unauthorized::Unknown)
    }

    /// A [`PrincipalExtractor`] for a server that does not refuse callers
    /// itself: the [`Authenticated`] principal when a layer set one, else
    /// the label of a known bearer token, else [`default_principal`] (so
    /// unknown callers are still kept apart). To refuse them, put
    /// [`require_bearer_tokens`] in front.
    ///
    /// [`require_bearer_tokens`]: https://docs.rs/mcp-tasks/latest/mcp_tasks/server/http/fn.require_bearer_tokens.html
    pub fn principal_extractor(self: &Arc<Self>) -> PrincipalExtractor {
        let tokens = Arc::clone(self);
        Arc::new(move |extensions: &Extensions| {
            let known = extensions
                .get::<http::request::Parts>()
                .filter(|parts| parts.extensions.get::<Authenticated>().is_none())
                .and_then(|parts| tokens.authenticate(&parts.headers).ok());
            known.unwrap_or_else(|| default_principal(extensions))
        })
    }
}

impl Entry {
    fn new(token: &str, label: Option<&str>) -> Result<Self, MalformedLine> {
        check_token(token)?;
        let principal = match label {
            Some(label) => {
                check_label(label)?;
                Principal::new(label)
            }
            None => {
                let bytes: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
                let mut name = String::from("token-sha256:");
                push_hex(&mut name, &bytes);
                Principal::new(name)
            }
        };
        Ok(Self {
            digest: digest(token),
            principal,
        })
    }
}

/// The SHA-256 of `token` as four words.
fn digest(token: &str) -> [u64; 4] {
    let bytes: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
    let mut words = [0u64; 4];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        *word = u64::from_le_bytes(eight);
    }
    words
}

/// The token of an `Authorization` value `Bearer <token>` (scheme in any
/// case, one or more spaces), if it is one.
fn bearer_token(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ').trim_end();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn check_token(token: &str) -> Result<(), MalformedLine> {
    let length = token.chars().count();
    if length < MIN_TOKEN_CHARS {
        return Err(MalformedLine::TokenTooShort);
    }
    if length > MAX_TOKEN_CHARS {
        return Err(MalformedLine::TokenTooLong);
    }
    let body = token.trim_end_matches('=');
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/".contains(c);
    if body.is_empty() || !body.chars().all(allowed) {
        return Err(MalformedLine::TokenCharacter);
    }
    Ok(())
}

fn check_label(label: &str) -> Result<(), MalformedLine> {
    if label.chars().count() > MAX_LABEL_CHARS {
        return Err(MalformedLine::LabelTooLong);
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._@+".contains(c);
    if !label.chars().all(allowed) {
        return Err(MalformedLine::LabelCharacter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const ALICE: &str = "7c1e5b3f0a9d4e2b8f6a1c3d5e7f9a0b";
    const ALICE_NEXT: &str = "0f9e8d7c6b5a49382716a5b4c3d2e1f0";
    const BARE: &str = "5ab2c7e19f3d4a6b8c0d2e4f6a8b0c1d==";

    fn file() -> String {
        format!(
            "# comment\n\n  {ALICE}   alice\r\n{ALICE_NEXT}\talice\n   # indented comment\n{BARE}\n"
        )
    }

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(value).unwrap(),
        );
        headers
    }

    #[test]
    fn a_file_maps_tokens_to_labels() {
        let tokens = BearerTokens::parse(file().as_bytes()).unwrap();
        assert_eq!(tokens.len(), 3);
        assert_eq!(tokens.verify(ALICE).unwrap().as_str(), "alice");
        assert_eq!(tokens.verify(ALICE_NEXT).unwrap().as_str(), "alice");
        let bare = tokens.verify(BARE).unwrap().as_str().to_owned();
        assert!(
            bare.starts_with("token-sha256:") && bare.len() == 13 + 64,
            "{bare}"
        );
        assert!(!bare.contains(BARE.trim_end_matches('=')));
        assert_eq!(tokens.verify("0000000000000000000000000000000000"), None);
        assert_eq!(
            tokens.verify(&ALICE[..31]),
            None,
            "a prefix is not the token"
        );
        assert_eq!(tokens.verify(""), None);
        let debug = format!("{tokens:?}");
        assert!(!debug.contains(ALICE) && debug.contains('3'), "{debug}");
    }

    #[test]
    fn a_replace_changes_every_clone_and_a_built_set_is_its_own() {
        let served = BearerTokens::parse(file().as_bytes()).unwrap();
        let clone = served.clone();
        let built = served
            .clone()
            .with_token(&"b".repeat(20), Some("bob"))
            .unwrap();
        assert_eq!((served.len(), built.len()), (3, 4));
        assert!(clone.verify(ALICE).is_some());
        served.replace(
            &BearerTokens::new()
                .with_token(ALICE_NEXT, Some("alice"))
                .unwrap(),
        );
        assert_eq!(
            clone.verify(ALICE),
            None,
            "the old token is refused by every clone"
        );
        assert_eq!(clone.verify(ALICE_NEXT).unwrap().as_str(), "alice");
        assert_eq!(
            built.len(),
            4,
            "a set built with with_token is not replaced"
        );
    }

    #[test]
    fn headers_are_read_as_rfc_6750_says() {
        let tokens = BearerTokens::parse(file().as_bytes()).unwrap();
        for good in [
            format!("Bearer {ALICE}"),
            format!("bearer {ALICE}"),
            format!("BEARER   {ALICE}"),
        ] {
            assert_eq!(
                tokens.authenticate(&headers(&good)).unwrap().as_str(),
                "alice",
                "{good}"
            );
        }
        assert_eq!(
            tokens.authenticate(&HeaderMap::new()),
            Err(Unauthorized::Missing)
        );
        for missing in [
            format!("Basic {ALICE}"),
            "Bearer".to_owned(),
            ALICE.to_owned(),
        ] {
            assert_eq!(
                tokens.authenticate(&headers(&missing)),
                Err(Unauthorized::Missing),
                "{missing}"
            );
        }
        assert_eq!(
            tokens.authenticate(&headers("Bearer 11111111111111111111")),
            Err(Unauthorized::Unknown)
        );
        let mut twice = headers(&format!("Bearer {ALICE}"));
        twice.append(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {ALICE_NEXT}")).unwrap(),
        );
        assert_eq!(tokens.authenticate(&twice), Err(Unauthorized::Missing));
        assert!(Unauthorized::Unknown.challenge().starts_with("Bearer "));
    }

    #[test]
    fn malformed_files_name_the_line_and_never_the_token() {
        let secret = "s3cr3t-s3cr3t-s3cr3t";
        let cases: Vec<(String, &str)> = vec![
            (
                format!("{ALICE} alice\nshort alice\n"),
                "line 2: the token is shorter than 16",
            ),
            (
                format!("\n\n{secret} alice extra"),
                "line 3: more than two fields",
            ),
            (
                format!("{secret}! alice"),
                "line 1: the token has a character",
            ),
            (
                format!("{secret}=x alice"),
                "line 1: the token has a character",
            ),
            (
                format!("{secret} al:ice"),
                "line 1: the label has a character",
            ),
            (
                format!("{secret} {}", "a".repeat(65)),
                "line 1: the label is longer",
            ),
            (
                format!("{secret} a\n# c\n{secret} b"),
                "line 3: the same token as line 1",
            ),
            (
                format!("{} a", "a".repeat(4097)),
                "line 1: the token is longer",
            ),
            ("# nothing\n\n".to_owned(), "holds no token"),
            // The label and the token swapped: the "label" is the secret.
            (format!("alice {secret}:x"), "line 1: the token is shorter"),
        ];
        for (text, expected) in cases {
            let error = BearerTokens::parse(text.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error:?} for {text:?}");
            assert!(
                !error.contains("s3cr3t") && !error.contains(ALICE),
                "{error}"
            );
        }
        let mut bad = b"x\n".to_vec();
        bad.extend_from_slice(&[0xff, 0xfe, b'\n']);
        let error = BearerTokens::parse(&bad).unwrap_err().to_string();
        assert_eq!(error, "line 1: the token is shorter than 16 characters");
        let error = BearerTokens::parse(&bad[2..]).unwrap_err().to_string();
        assert_eq!(error, "line 1: not UTF-8 text");
    }

    #[test]
    fn tokens_added_in_code_follow_the_same_rules() {
        let tokens = BearerTokens::new()
            .with_token(ALICE, Some("alice"))
            .unwrap()
            .with_token(BARE, None)
            .unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(matches!(
            tokens.with_token(ALICE, Some("bob")),
            Err(TokensError::Duplicate { .. })
        ));
        assert!(matches!(
            BearerTokens::new().with_token("short", None),
            Err(TokensError::Malformed {
                problem: MalformedLine::TokenTooShort,
                ..
            })
        ));
        assert!(BearerTokens::new().is_empty());
        assert_eq!(
            BearerTokens::new().authenticate(&headers(&format!("Bearer {ALICE}"))),
            Err(Unauthorized::Unknown)
        );
    }

    #[test]
    fn the_extractor_prefers_what_a_layer_established() {
        let tokens = Arc::new(BearerTokens::parse(file().as_bytes()).unwrap());
        let extract = tokens.principal_extractor();
        let request = |value: Option<&str>, marked: Option<&str>| {
            let mut builder = http::Request::builder();
            if let Some(value) = value {
                builder = builder.header(http::header::AUTHORIZATION, value);
            }
            let (mut parts, ()) = builder.body(()).unwrap().into_parts();
            if let Some(marked) = marked {
                parts
                    .extensions
                    .insert(Authenticated::new(Principal::new(marked)));
            }
            let mut extensions = Extensions::new();
            extensions.insert(parts);
            extensions
        };
        let alice = format!("Bearer {ALICE}");
        assert_eq!(extract(&request(Some(&alice), None)).as_str(), "alice");
        assert_eq!(
            extract(&request(Some(&alice), Some("layer"))).as_str(),
            "layer"
        );
        let unknown = extract(&request(Some("Bearer 1111111111111111"), None));
        assert!(unknown.as_str().starts_with("authorization:"), "{unknown}");
        assert_eq!(extract(&request(None, None)).as_str(), "http:anonymous");
        assert_eq!(extract(&Extensions::new()).as_str(), "process");
    }
}
