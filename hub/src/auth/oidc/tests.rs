//! The mapping of a verified token's claims to a caller. The verification itself, against
//! issuers served by the tests, is tested in `hub-tests` (`oidc`).

use serde_json::{json, Value};

use super::*;
use crate::auth::Role;

fn oidc(issuer: &str) -> Oidc {
    let text = format!(
        "issuer: {issuer}
clientId: fleetscope
redirectUrl: http://127.0.0.1:1/ui/oidc/callback
groups:
  - {{group: fleet-admins, role: admin}}
  - {{group: team-de, role: read, scope: emea/de}}
"
    );
    let mut problems = Vec::new();
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let config = config::parse(&value, &mut problems).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    Oidc::new(config)
}

#[test]
fn names_come_from_the_name_claim_and_dotted_groups_claims_reach_into_objects() {
    let mut oidc = oidc("http://127.0.0.1:1");
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "preferred_username": "dora\u{1b}[31m", "groups": "team-de"})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(principal.name, "dora[31m", "control characters are dropped");
    oidc.config.groups_claim = "realm_access.roles".into();
    oidc.config.name_claim = Some("email".into());
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "email": "a@example.test", "realm_access": {"roles": ["fleet-admins"]}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(
        (principal.name.as_str(), principal.role),
        ("a@example.test", Role::Admin)
    );
    // Without the name claim, the subject names the caller.
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "realm_access": {"roles": ["fleet-admins"]}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(principal.name, "u-1");
}

#[test]
fn the_first_mapped_group_decides_and_a_token_without_one_has_no_role() {
    let oidc = oidc("http://127.0.0.1:1");
    let claims = |groups: Value| {
        json!({"sub": "u-1", "groups": groups})
            .as_object()
            .unwrap()
            .clone()
    };
    let scoped = oidc
        .principal(&claims(json!(["other", "team-de"])))
        .unwrap();
    assert_eq!(scoped.role, Role::Read);
    assert_eq!(
        scoped.scope.map(|s| s.to_string()).as_deref(),
        Some("emea/de")
    );
    let admin = oidc
        .principal(&claims(json!(["team-de", "fleet-admins"])))
        .unwrap();
    assert_eq!((admin.role, admin.scope), (Role::Admin, None));
    assert_eq!(
        oidc.principal(&claims(json!(["nobody"]))),
        Err(Refusal::NoRole)
    );
    assert_eq!(oidc.principal(&claims(json!(42))), Err(Refusal::NoRole));
    assert!(!looks_like_jwt("a-static-token-0123456789"));
    assert!(!looks_like_jwt("a.b.c"));
}
