//! The `oidc` section of the token file: which identity provider the hub trusts, as which
//! client, and which of a person's groups give which role and scope. Every problem is
//! reported at once, each starting with the field it is about (`oidc.groups[1].role: ...`).

use std::collections::HashSet;

use fleetscope_model::GroupPath;
use openidconnect::url::{Host, Url};
use serde_yaml_ng::{Mapping, Value};

use super::super::fields::{describe_key, string_field};
use super::super::Role;

/// The path of the pages' sign-in callback; `redirectUrl` must name it.
pub const CALLBACK_PATH: &str = "/ui/oidc/callback";

/// The fields the `oidc` section may have.
const FIELDS: [&str; 10] = [
    "issuer",
    "clientId",
    "clientSecret",
    "redirectUrl",
    "audiences",
    "scopes",
    "groupsClaim",
    "nameClaim",
    "clockSkewSeconds",
    "groups",
];

/// The fields an entry of `oidc.groups` may have.
const GROUP_FIELDS: [&str; 3] = ["group", "role", "scope"];

/// The most clock skew a token's times are allowed, in seconds.
pub const MAX_CLOCK_SKEW_SECONDS: u64 = 300;

/// The identity provider the hub trusts, as the token file gives it.
#[derive(Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// The issuer: its discovery document is at `<issuer>/.well-known/openid-configuration`,
    /// and every token's `iss` must equal it.
    pub issuer: String,
    /// The hub's client id at the provider; ID tokens carry it as their audience.
    pub client_id: String,
    /// The client secret, for a confidential client; without it the hub signs in as a public
    /// client (PKCE protects the code either way).
    pub client_secret: Option<String>,
    /// Where the provider sends a browser back to: the hub's `/ui/oidc/callback`.
    pub redirect_url: String,
    /// The `aud` values a token may carry besides the client id (access tokens minted for
    /// the hub's API).
    pub audiences: Vec<String>,
    /// The scopes the pages ask for; `openid` always among them.
    pub scopes: Vec<String>,
    /// The claim that carries a person's groups; a dotted name reaches into objects
    /// (`realm_access.roles`).
    pub groups_claim: String,
    /// The claim a person is named by in logs and on the pages; without it
    /// `preferred_username`, then `email`, then `sub`.
    pub name_claim: Option<String>,
    /// How far a token's `exp` and `nbf` may be off, in seconds.
    pub clock_skew_seconds: u64,
    /// Which groups give which role and scope, in the file's order: the first whose group a
    /// person has decides.
    pub groups: Vec<GroupRule>,
}

/// The secret stays out of debug output.
impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("redirect_url", &self.redirect_url)
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

/// One entry of `oidc.groups`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRule {
    /// A value of the groups claim.
    pub group: String,
    /// What a person with that group may do.
    pub role: Role,
    /// The subtree they see; `None` sees the whole fleet.
    pub scope: Option<GroupPath>,
}

impl OidcConfig {
    /// Every `aud` value a token may carry: the client id, then `audiences`.
    pub fn accepted_audiences(&self) -> Vec<String> {
        let mut all = vec![self.client_id.clone()];
        for audience in &self.audiences {
            if !all.contains(audience) {
                all.push(audience.clone());
            }
        }
        all
    }

    /// The first rule whose group is among `groups`.
    pub fn rule_for<'a>(&self, groups: impl IntoIterator<Item = &'a str>) -> Option<&GroupRule> {
        let held: HashSet<&str> = groups.into_iter().collect();
        self.groups
            .iter()
            .find(|rule| held.contains(rule.group.as_str()))
    }

    /// Whether `other` talks to the same provider as the same client, so that what was
    /// discovered and fetched for one serves the other.
    pub fn same_provider(&self, other: &OidcConfig) -> bool {
        self.issuer == other.issuer
            && self.client_id == other.client_id
            && self.client_secret == other.client_secret
            && self.redirect_url == other.redirect_url
    }
}

/// Reads the `oidc` section, adding each problem to `problems`; `None` when there is one.
pub fn parse(section: &Value, problems: &mut Vec<String>) -> Option<OidcConfig> {
    let before = problems.len();
    let Value::Mapping(fields) = section else {
        problems
            .push("oidc: expected a mapping with issuer, clientId, redirectUrl and groups".into());
        return None;
    };
    for key in fields.keys() {
        if !key.as_str().is_some_and(|key| FIELDS.contains(&key)) {
            problems.push(format!(
                "oidc: {}; expected one of {}",
                describe_key(key),
                FIELDS.join(", ")
            ));
        }
    }
    let issuer = required(fields, "issuer", problems)
        .and_then(|issuer| check_url(issuer, "oidc.issuer", problems).map(|_| issuer.to_owned()));
    let client_id = required(fields, "clientId", problems).and_then(|id| {
        if id.trim().is_empty() || id.chars().any(char::is_control) {
            problems.push("oidc.clientId: expected a client id without spaces at its ends or control characters".into());
            None
        } else {
            Some(id.to_owned())
        }
    });
    let client_secret = match text(fields, "clientSecret", problems) {
        Some(Some("")) => {
            problems.push("oidc.clientSecret: is empty; leave it out for a public client".into());
            None
        }
        Some(secret) => secret.map(str::to_owned),
        None => None,
    };
    let redirect_url = required(fields, "redirectUrl", problems).and_then(|redirect| {
        let url = check_url(redirect, "oidc.redirectUrl", problems)?;
        if url.path() != CALLBACK_PATH || url.query().is_some() || url.fragment().is_some() {
            problems.push(format!(
                "oidc.redirectUrl: must be the hub's {CALLBACK_PATH} (found path {:?})",
                url.path()
            ));
            return None;
        }
        Some(redirect.to_owned())
    });
    let audiences = strings(fields, "audiences", problems).unwrap_or_default();
    let mut scopes = strings(fields, "scopes", problems)
        .unwrap_or_else(|| vec!["openid".into(), "profile".into(), "email".into()]);
    for (i, scope) in scopes.iter().enumerate() {
        if scope.is_empty()
            || !scope
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            problems.push(format!(
                "oidc.scopes[{i}]: {scope:?} is not a scope (printable ASCII without spaces)"
            ));
        }
    }
    if !scopes.iter().any(|s| s == "openid") {
        scopes.insert(0, "openid".into());
    }
    let groups_claim = match text(fields, "groupsClaim", problems) {
        Some(Some(claim)) if claim_name_ok(claim) => claim.to_owned(),
        Some(Some(claim)) => {
            problems.push(format!("oidc.groupsClaim: {claim:?} is not a claim name"));
            String::new()
        }
        _ => "groups".to_owned(),
    };
    let name_claim = match text(fields, "nameClaim", problems) {
        Some(Some(claim)) if claim_name_ok(claim) => Some(claim.to_owned()),
        Some(Some(claim)) => {
            problems.push(format!("oidc.nameClaim: {claim:?} is not a claim name"));
            None
        }
        _ => None,
    };
    let clock_skew_seconds = match fields.get("clockSkewSeconds") {
        None | Some(Value::Null) => 30,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(seconds) if seconds <= MAX_CLOCK_SKEW_SECONDS => seconds,
            _ => {
                problems.push(format!(
                    "oidc.clockSkewSeconds: expected whole seconds from 0 to {MAX_CLOCK_SKEW_SECONDS}, found {n}"
                ));
                0
            }
        },
        Some(_) => {
            problems.push(format!(
                "oidc.clockSkewSeconds: expected whole seconds from 0 to {MAX_CLOCK_SKEW_SECONDS}"
            ));
            0
        }
    };
    let groups = group_rules(fields, problems);
    if problems.len() != before {
        return None;
    }
    Some(OidcConfig {
        issuer: issuer?,
        client_id: client_id?,
        client_secret,
        redirect_url: redirect_url?,
        audiences,
        scopes,
        groups_claim,
        name_claim,
        clock_skew_seconds,
        groups,
    })
}

fn group_rules(fields: &Mapping, problems: &mut Vec<String>) -> Vec<GroupRule> {
    let entries = match fields.get("groups") {
        Some(Value::Sequence(entries)) if !entries.is_empty() => entries,
        Some(Value::Sequence(_)) => {
            problems
                .push("oidc.groups: the list is empty; nobody signing in would get a role".into());
            return Vec::new();
        }
        None | Some(Value::Null) => {
            problems.push("oidc.groups: missing; give the groups that get a role".into());
            return Vec::new();
        }
        Some(_) => {
            problems.push("oidc.groups: expected a list of entries with group and role".into());
            return Vec::new();
        }
    };
    let mut rules = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (index, entry) in entries.iter().enumerate() {
        let at = format!("oidc.groups[{index}]");
        let Value::Mapping(entry) = entry else {
            problems.push(format!(
                "{at}: expected a mapping with group, role and, optionally, scope"
            ));
            continue;
        };
        for key in entry.keys() {
            if !key.as_str().is_some_and(|key| GROUP_FIELDS.contains(&key)) {
                problems.push(format!(
                    "{at}: {}; expected one of {}",
                    describe_key(key),
                    GROUP_FIELDS.join(", ")
                ));
            }
        }
        let group = match entry.get("group") {
            Some(Value::String(group)) if !group.is_empty() => {
                if !seen.insert(group) {
                    problems.push(format!("{at}.group: {group:?} is already given a role above; the first entry would decide"));
                }
                Some(group.clone())
            }
            Some(Value::String(_)) => {
                problems.push(format!("{at}.group: is empty"));
                None
            }
            None | Some(Value::Null) => {
                problems.push(format!("{at}.group: missing"));
                None
            }
            Some(_) => {
                problems.push(format!("{at}.group: expected a string"));
                None
            }
        };
        let role = match entry.get("role") {
            Some(Value::String(role)) => Role::parse(role).or_else(|| {
                problems.push(format!(
                    "{at}.role: {role:?} is not a role; expected read or admin"
                ));
                None
            }),
            None | Some(Value::Null) => {
                problems.push(format!("{at}.role: missing; expected read or admin"));
                None
            }
            Some(_) => {
                problems.push(format!("{at}.role: expected a string"));
                None
            }
        };
        let scope = match entry.get("scope") {
            None | Some(Value::Null) => Some(None),
            Some(Value::String(scope)) => match GroupPath::parse(scope) {
                Ok(scope) => Some(Some(scope)),
                Err(err) => {
                    problems.push(format!("{at}.scope: {err}"));
                    None
                }
            },
            Some(_) => {
                problems.push(format!("{at}.scope: expected a string"));
                None
            }
        };
        if let (Some(group), Some(role), Some(scope)) = (group, role, scope) {
            rules.push(GroupRule { group, role, scope });
        }
    }
    rules
}

/// A required string field.
fn required<'a>(fields: &'a Mapping, field: &str, problems: &mut Vec<String>) -> Option<&'a str> {
    match text(fields, field, problems) {
        Some(Some(value)) => Some(value),
        Some(None) => {
            problems.push(format!("oidc.{field}: missing"));
            None
        }
        None => None,
    }
}

/// A field's text, as [`string_field`] reads it in the section.
fn text<'a>(
    fields: &'a Mapping,
    field: &str,
    problems: &mut Vec<String>,
) -> Option<Option<&'a str>> {
    string_field(fields, field, "oidc", problems)
}

/// A list of strings, `None` when absent (or wrong, with a problem added).
fn strings(fields: &Mapping, field: &str, problems: &mut Vec<String>) -> Option<Vec<String>> {
    match fields.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::Sequence(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.is_empty() => out.push(s.clone()),
                    _ => problems.push(format!(
                        "oidc.{field}[{i}]: expected a string that is not empty"
                    )),
                }
            }
            Some(out)
        }
        Some(_) => {
            problems.push(format!("oidc.{field}: expected a list of strings"));
            None
        }
    }
}

/// An absolute `https` URL, or `http` to a loopback address (a provider on the same machine);
/// without user name, password or fragment.
fn check_url(text: &str, at: &str, problems: &mut Vec<String>) -> Option<Url> {
    let url = match Url::parse(text) {
        Ok(url) => url,
        Err(err) => {
            problems.push(format!("{at}: {text:?} is not a URL: {err}"));
            return None;
        }
    };
    let loopback = match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(name)) => name == "localhost",
        None => false,
    };
    let problem = match url.scheme() {
        "https" => None,
        "http" if loopback => None,
        "http" => Some("must use https (http only to a loopback address)"),
        _ => Some("must be an https URL"),
    }
    .or_else(|| {
        (!url.username().is_empty() || url.password().is_some())
            .then_some("must not carry a user name or password")
    })
    .or_else(|| {
        url.fragment()
            .is_some()
            .then_some("must not have a fragment")
    });
    match problem {
        Some(problem) => {
            problems.push(format!("{at}: {text:?} {problem}"));
            None
        }
        None => Some(url),
    }
}

/// A claim name: dotted segments of printable characters.
fn claim_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|segment| !segment.is_empty())
        && name.chars().all(|c| c.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<OidcConfig, Vec<String>> {
        let value: Value = serde_yaml_ng::from_str(text).unwrap();
        let mut problems = Vec::new();
        let config = parse(&value, &mut problems);
        match config {
            Some(config) if problems.is_empty() => Ok(config),
            _ => Err(problems),
        }
    }

    #[test]
    fn a_section_with_defaults_reads() {
        let config = parse_text(
            "issuer: https://login.example.com/realms/ops
clientId: fleetscope
redirectUrl: https://fleetscope.example.com/ui/oidc/callback
groups:
  - group: fleet-admins
    role: admin
  - group: team-de
    role: read
    scope: emea/de
",
        )
        .unwrap();
        assert_eq!(config.scopes, ["openid", "profile", "email"]);
        assert_eq!(config.groups_claim, "groups");
        assert_eq!(config.clock_skew_seconds, 30);
        assert_eq!(config.accepted_audiences(), ["fleetscope"]);
        assert_eq!(config.client_secret, None);
        let rule = config.rule_for(["team-de", "other"]).unwrap();
        assert_eq!(rule.scope, Some(GroupPath::parse("emea/de").unwrap()));
        // The first entry in the file decides for a person in both groups.
        assert_eq!(
            config.rule_for(["team-de", "fleet-admins"]).unwrap().role,
            Role::Admin
        );
        assert!(config.rule_for(["nobody"]).is_none());
    }

    #[test]
    fn every_problem_in_the_section_is_reported_and_the_secret_never_quoted() {
        let problems = parse_text(
            "issuer: http://login.example.com
clientId: \" \"
clientSecret: \"\"
redirectUrl: https://hub.example.com/ui/fleet
scopes: [openid, \"two words\"]
groupsClaim: \"a..b\"
clockSkewSeconds: 900
extra: 1
groups:
  - group: admins
    role: owner
  - group: admins
    role: read
    scope: emea//de
  - role: read
    colour: red
",
        )
        .unwrap_err();
        assert_eq!(
            problems,
            [
                "oidc: unknown field \"extra\"; expected one of issuer, clientId, clientSecret, redirectUrl, audiences, scopes, groupsClaim, nameClaim, clockSkewSeconds, groups",
                "oidc.issuer: \"http://login.example.com\" must use https (http only to a loopback address)",
                "oidc.clientId: expected a client id without spaces at its ends or control characters",
                "oidc.clientSecret: is empty; leave it out for a public client",
                "oidc.redirectUrl: must be the hub's /ui/oidc/callback (found path \"/ui/fleet\")",
                "oidc.scopes[1]: \"two words\" is not a scope (printable ASCII without spaces)",
                "oidc.groupsClaim: \"a..b\" is not a claim name",
                "oidc.clockSkewSeconds: expected whole seconds from 0 to 300, found 900",
                "oidc.groups[0].role: \"owner\" is not a role; expected read or admin",
                "oidc.groups[1].group: \"admins\" is already given a role above; the first entry would decide",
                "oidc.groups[1].scope: group path \"emea//de\" has an empty segment at position 1 (leading, trailing or doubled '/')",
                "oidc.groups[2]: unknown field \"colour\"; expected one of group, role, scope",
                "oidc.groups[2].group: missing",
            ]
        );
        let secret = parse_text(
            "issuer: https://login.example.com
clientId: fleetscope
clientSecret: a-secret-that-must-not-leak
redirectUrl: https://hub.example.com/ui/oidc/callback
groups: []
",
        )
        .unwrap_err();
        assert_eq!(
            secret,
            ["oidc.groups: the list is empty; nobody signing in would get a role"]
        );
    }

    #[test]
    fn a_loopback_provider_may_use_http_and_openid_is_always_asked() {
        let config = parse_text(
            "issuer: http://127.0.0.1:4444
clientId: fleetscope
redirectUrl: http://localhost:8080/ui/oidc/callback
scopes: [groups, email]
audiences: [fleetscope-api, fleetscope]
groups:
  - {group: g, role: read}
",
        )
        .unwrap();
        assert_eq!(config.scopes, ["openid", "groups", "email"]);
        assert_eq!(
            config.accepted_audiences(),
            ["fleetscope", "fleetscope-api"]
        );
        let debug = format!("{config:?}");
        assert!(debug.contains("127.0.0.1:4444"), "{debug}");
        for (url, problem) in [
            ("ftp://127.0.0.1/", "must be an https URL"),
            (
                "https://user:pw@login.example.com",
                "must not carry a user name or password",
            ),
            ("https://login.example.com/#x", "must not have a fragment"),
        ] {
            let problems = parse_text(&format!(
                "issuer: {url}\nclientId: c\nredirectUrl: https://h.example/ui/oidc/callback\ngroups: [{{group: g, role: read}}]\n"
            ))
            .unwrap_err();
            assert_eq!(problems, [format!("oidc.issuer: {url:?} {problem}")]);
        }
    }
}
