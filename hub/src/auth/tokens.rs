//! The token file: its parsing and validation into an [`Auth`], every problem in it reported
//! at once with the entry and field it is about.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use fleetscope_model::GroupPath;
use fleetscope_runtime::tokens::{self, TokenDigest};
use serde_yaml_ng::{Mapping, Value};

use super::fields::{describe_key, string_field};
use super::oidc::Oidc;
use super::{Principal, Role};

/// Why a token file could not be used: the same errors as for the collector's token file.
pub use fleetscope_runtime::tokens::TokenFileError as AuthError;
/// The shortest token accepted, as for the collector's agent tokens.
pub use fleetscope_runtime::tokens::MIN_TOKEN_LEN;

/// The longest caller name accepted; names go into logs.
pub const MAX_NAME_LEN: usize = 128;

/// The fields an entry of the token file may have.
const ENTRY_FIELDS: [&str; 5] = ["name", "token", "tokenSha256", "role", "scope"];

/// The callers a token file admits, by the SHA-256 of their token.
#[derive(Clone)]
pub struct TokenTable {
    by_digest: HashMap<TokenDigest, Principal>,
}

impl TokenTable {
    /// Every caller of the file, sorted by name.
    pub fn principals(&self) -> Vec<&Principal> {
        let mut all: Vec<&Principal> = self.by_digest.values().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The caller whose token is `token`, if the file admits one.
    pub(super) fn find(&self, token: &str) -> Option<&Principal> {
        self.by_digest.get(&tokens::digest(token))
    }
}

/// Digests stay out of debug output; names are enough to tell tables apart.
impl fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.principals().iter().map(|p| &p.name))
            .finish()
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Local use only: every request is [`Principal::insecure`], whatever it sends.
    Insecure,
    /// Each request must bring a token the table admits, or a JWT of the identity provider.
    Secured(Secured),
}

/// The callers a token file admits: its tokens and, when it has an `oidc` section, the people
/// its identity provider signs in.
#[derive(Clone)]
pub struct Secured {
    pub(super) tokens: TokenTable,
    pub(super) oidc: Option<Arc<Oidc>>,
}

impl fmt::Debug for Secured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_tuple("Secured");
        out.field(&self.tokens);
        if let Some(oidc) = &self.oidc {
            out.field(&oidc.config.issuer);
        }
        out.finish()
    }
}

impl Auth {
    /// Reads a token file, reporting every problem in it at once.
    pub fn load(path: &Path) -> Result<Auth, AuthError> {
        tokens::load(path, Auth::parse)
    }

    /// Reads the text of a token file. On failure, returns every problem found, each starting
    /// with the entry and field it is about (`tokens[2].role: ...`, `oidc.issuer: ...`).
    pub fn parse(text: &str) -> Result<Auth, Vec<String>> {
        let document: Value = serde_yaml_ng::from_str(text).map_err(|err| vec![err.to_string()])?;
        let top = match &document {
            Value::Mapping(top) => top,
            Value::Null => {
                return Err(vec![
                    "the file is empty; expected a `tokens` list or an `oidc` section".into(),
                ])
            }
            _ => {
                return Err(vec![
                    "expected a mapping with a `tokens` list or an `oidc` section".into(),
                ])
            }
        };
        let mut problems = Vec::new();
        for key in top.keys() {
            if !matches!(key.as_str(), Some("tokens" | "oidc")) {
                problems.push(format!(
                    "{}; expected `tokens` or `oidc`",
                    describe_key(key)
                ));
            }
        }
        let oidc = match top.get("oidc") {
            None | Some(Value::Null) => None,
            Some(section) => super::oidc::config::parse(section, &mut problems),
        };
        let has_oidc = top.get("oidc").is_some_and(|v| !v.is_null());
        let entries: &[Value] = match top.get("tokens") {
            Some(Value::Sequence(entries)) if entries.is_empty() && !has_oidc => {
                problems.push("tokens: the list is empty; every request would be refused".into());
                &[]
            }
            Some(Value::Sequence(entries)) => entries,
            None | Some(Value::Null) if has_oidc => &[],
            Some(Value::Null) | None => {
                problems.push("tokens: missing (give tokens, an oidc section, or both)".into());
                &[]
            }
            Some(_) => {
                problems.push("tokens: expected a list of entries".into());
                &[]
            }
        };
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut digests: HashMap<TokenDigest, usize> = HashMap::new();
        let mut by_digest: HashMap<TokenDigest, Principal> = HashMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let at = format!("tokens[{index}]");
            let Value::Mapping(fields) = entry else {
                problems.push(format!(
                    "{at}: expected a mapping with name, role and token or tokenSha256"
                ));
                continue;
            };
            if let Some(name) = fields.get("name").and_then(Value::as_str) {
                match names.entry(name) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{at}.name: {name:?} is already the name of tokens[{}]",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                    }
                }
            }
            let checked = check_entry(fields, &at, &mut problems);
            if let Some(digest) = checked.digest {
                match digests.entry(digest) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{at}: the same token is already given to tokens[{}]",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                        if let Some(principal) = checked.principal {
                            by_digest.insert(digest, principal);
                        }
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(Auth::Secured(Secured {
                tokens: TokenTable { by_digest },
                oidc: oidc.map(|config| Arc::new(Oidc::new(config))),
            }))
        } else {
            Err(problems)
        }
    }

    /// Whether every request is let in as [`Principal::insecure`].
    pub fn is_insecure(&self) -> bool {
        matches!(self, Auth::Insecure)
    }

    /// The identity provider people sign in with, if the token file names one.
    pub fn oidc(&self) -> Option<&Arc<Oidc>> {
        match self {
            Auth::Secured(secured) => secured.oidc.as_ref(),
            Auth::Insecure => None,
        }
    }

    /// Whether the token file gives any token (the pages offer the token form only then).
    pub fn has_tokens(&self) -> bool {
        matches!(self, Auth::Secured(secured) if !secured.tokens.by_digest.is_empty())
    }

    /// Keeps what `previous` discovered and fetched of the identity provider when this file
    /// names the same provider and client.
    pub fn carry_over(&mut self, previous: &Auth) {
        if let (Auth::Secured(next), Some(before)) = (self, previous.oidc()) {
            if let Some(oidc) = next.oidc.as_mut().and_then(Arc::get_mut) {
                oidc.carry_over(before);
            }
        }
    }
}

/// What could be made of one entry: its token's digest when the token is valid, its caller
/// when every field is.
struct Checked {
    digest: Option<TokenDigest>,
    principal: Option<Principal>,
}

/// Checks one entry, adding each problem found to `problems`. Values of `token` and
/// `tokenSha256` are never quoted in a problem.
fn check_entry(fields: &Mapping, at: &str, problems: &mut Vec<String>) -> Checked {
    let before = problems.len();
    for key in fields.keys() {
        if !key.as_str().is_some_and(|key| ENTRY_FIELDS.contains(&key)) {
            problems.push(format!(
                "{at}: {}; expected one of {}",
                describe_key(key),
                ENTRY_FIELDS.join(", ")
            ));
        }
    }
    let name = match string_field(fields, "name", at, problems) {
        Some(Some(name)) => match check_name(name) {
            Ok(()) => Some(name),
            Err(why) => {
                problems.push(format!("{at}.name: {why}"));
                None
            }
        },
        Some(None) => {
            problems.push(format!("{at}.name: missing"));
            None
        }
        None => None,
    };
    let token = string_field(fields, "token", at, problems);
    let token_sha256 = string_field(fields, "tokenSha256", at, problems);
    let digest = match (token, token_sha256) {
        (Some(Some(token)), Some(None)) => match check_token(token) {
            Ok(()) => Some(tokens::digest(token)),
            Err(why) => {
                problems.push(format!("{at}.token: {why}"));
                None
            }
        },
        (Some(None), Some(Some(hex))) => match tokens::parse_hex_digest(hex) {
            Ok(digest) => Some(digest),
            Err(why) => {
                problems.push(format!("{at}.tokenSha256: {why}"));
                None
            }
        },
        (Some(Some(_)), Some(Some(_))) | (Some(None), Some(None)) => {
            problems.push(format!("{at}: give exactly one of token and tokenSha256"));
            None
        }
        // One of the two is not a string; that is already reported.
        _ => None,
    };
    let role = match string_field(fields, "role", at, problems) {
        Some(Some(role)) => match Role::parse(role) {
            Some(role) => Some(role),
            None => {
                problems.push(format!(
                    "{at}.role: {role:?} is not a role; expected read or admin"
                ));
                None
            }
        },
        Some(None) => {
            problems.push(format!("{at}.role: missing; expected read or admin"));
            None
        }
        None => None,
    };
    let scope = match string_field(fields, "scope", at, problems) {
        Some(Some(scope)) => match GroupPath::parse(scope) {
            Ok(scope) => Some(Some(scope)),
            Err(err) => {
                problems.push(format!("{at}.scope: {err}"));
                None
            }
        },
        Some(None) => Some(None),
        None => None,
    };
    let principal = match (name, role, scope) {
        (Some(name), Some(role), Some(scope)) if problems.len() == before => Some(Principal {
            name: name.to_owned(),
            role,
            scope,
        }),
        _ => None,
    };
    Checked { digest, principal }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("is empty".into());
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!("is longer than {MAX_NAME_LEN} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("{name:?} contains a control character"));
    }
    Ok(())
}

fn check_token(token: &str) -> Result<(), String> {
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!("shorter than {MIN_TOKEN_LEN} characters"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "contains a character a request cannot send (use printable ASCII without spaces)"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{hex, sample_file, ADMIN_TOKEN};
    use super::*;

    fn tokens() -> Auth {
        Auth::parse(&sample_file()).unwrap()
    }

    #[test]
    fn every_problem_in_the_file_is_reported_at_once() {
        let secret = "a-secret-that-must-not-leak";
        let text = format!(
            "tokens:
  - name: ok
    token: abcdefghijklmnopq
    role: read
  - name: ok
    token: bcdefghijklmnopqr
    role: read
  - name: bad-role
    token: cdefghijklmnopqrs
    role: owner
  - name: bad-scope
    token: defghijklmnopqrs
    role: read
    scope: emea//de
  - name: bad-hex
    tokenSha256: {secret}
    role: admin
  - name: short
    token: short
    role: read
  - name: both
    token: efghijklmnopqrstu
    tokenSha256: {}
  - role: read
    tokn: fghijklmnopqrstuv
  - name: same-token
    token: abcdefghijklmnopq
    role: admin
  - name: spaced
    token: \"{secret} x\"
    role: read
  - name: [not, text]
    token: ghijklmnopqrstuvw
    role: 3
  - just a string
",
            hex("x")
        );
        let problems = Auth::parse(&text).unwrap_err();
        let expected = [
            "tokens[1].name: \"ok\" is already the name of tokens[0]",
            "tokens[2].role: \"owner\" is not a role; expected read or admin",
            "tokens[3].scope: group path \"emea//de\" has an empty segment at position 1 (leading, trailing or doubled '/')",
            "tokens[4].tokenSha256: expected 64 hex digits, found 27 characters",
            "tokens[5].token: shorter than 16 characters",
            "tokens[6]: give exactly one of token and tokenSha256",
            "tokens[6].role: missing; expected read or admin",
            "tokens[7]: unknown field \"tokn\"; expected one of name, token, tokenSha256, role, scope",
            "tokens[7].name: missing",
            "tokens[7]: give exactly one of token and tokenSha256",
            "tokens[8]: the same token is already given to tokens[0]",
            "tokens[9].token: contains a character a request cannot send (use printable ASCII without spaces)",
            "tokens[10].name: expected a string",
            "tokens[10].role: expected a string",
            "tokens[11]: expected a mapping with name, role and token or tokenSha256",
        ];
        assert_eq!(problems, expected, "{problems:#?}");
        assert!(problems.iter().all(|p| !p.contains(secret)));
    }

    #[test]
    fn the_shape_of_the_file_is_checked() {
        assert_eq!(
            Auth::parse("tokens: []\nextra: 1\n").unwrap_err(),
            [
                "unknown field \"extra\"; expected `tokens` or `oidc`",
                "tokens: the list is empty; every request would be refused",
            ]
        );
        assert_eq!(
            Auth::parse("token:\n  - name: a\n").unwrap_err(),
            [
                "unknown field \"token\"; expected `tokens` or `oidc`",
                "tokens: missing (give tokens, an oidc section, or both)"
            ]
        );
        assert_eq!(
            Auth::parse("tokens: abc\n").unwrap_err(),
            ["tokens: expected a list of entries"]
        );
        assert_eq!(
            Auth::parse("").unwrap_err(),
            ["the file is empty; expected a `tokens` list or an `oidc` section"]
        );
        assert_eq!(
            Auth::parse("- a\n").unwrap_err(),
            ["expected a mapping with a `tokens` list or an `oidc` section"]
        );
        let syntax = Auth::parse("tokens: [\n").unwrap_err();
        assert_eq!(syntax.len(), 1);
        assert!(syntax[0].contains("line"), "{syntax:?}");
        let bad_hex = Auth::parse(&format!(
            "tokens:\n  - name: a\n    tokenSha256: {}zz\n    role: read\n",
            &hex("x")[..62]
        ))
        .unwrap_err();
        assert_eq!(
            bad_hex,
            ["tokens[0].tokenSha256: expected 64 hex digits, found another character at position 62"]
        );
    }

    #[test]
    fn debug_output_names_callers_only() {
        let debug = format!("{:?}", tokens());
        assert_eq!(
            debug,
            "Secured(Secured([\"platform-admins\", \"team-de\", \"viewers\"]))"
        );
    }

    #[test]
    fn load_names_the_file_in_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.yaml");
        std::fs::write(
            &path,
            format!("tokens:\n  - name: a\n    token: {ADMIN_TOKEN}\n    role: admin\n"),
        )
        .unwrap();
        let Auth::Secured(secured) = Auth::load(&path).unwrap() else {
            panic!("a token file gives tokens");
        };
        let names: Vec<&str> = secured
            .tokens
            .principals()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["a"]);

        std::fs::write(&path, "tokens:\n  - name: a\n  - name: b\n    role: x\n").unwrap();
        let err = Auth::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "token file {}:
  tokens[0]: give exactly one of token and tokenSha256
  tokens[0].role: missing; expected read or admin
  tokens[1]: give exactly one of token and tokenSha256
  tokens[1].role: \"x\" is not a role; expected read or admin",
                path.display()
            )
        );

        let missing = dir.path().join("absent.yaml");
        let err = Auth::load(&missing).unwrap_err();
        assert!(matches!(err, AuthError::Read { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("reading token file {}: ", missing.display())),
            "{err}"
        );
    }
}
