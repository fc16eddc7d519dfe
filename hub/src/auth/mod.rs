//! Who may use the HTTP API, and how much of the fleet they see.
//!
//! A token file gives each caller a name (for logs), a role and, optionally, a group subtree
//! outside of which the caller sees nothing. Tokens are kept only as their SHA-256, the way the
//! central collector keeps agent tokens, and the file may give either the token itself or its
//! digest:
//!
//! ```yaml
//! tokens:
//!   - name: platform-admins
//!     tokenSha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//!     role: admin
//!   - name: team-de
//!     token: a-long-random-secret
//!     role: read
//!     scope: emea/de
//! ```
//!
//! [`require`] is the middleware: it turns `Authorization: Bearer <token>` into a [`Principal`]
//! in the request's extensions, where handlers find it (as `Extension<Principal>`, or with
//! [`Principal`] itself as the extractor). Which routes are open is the router's decision: it
//! puts the middleware only on the others.
//!
//! The module has three parts: this file holds the caller ([`Principal`] and its [`Role`]);
//! `tokens` reads the token file into an [`Auth`]; `middleware` authenticates requests with
//! it ([`require`], [`LiveAuth`], [`AuthRejection`](middleware::AuthRejection)).
//! `middleware` uses `tokens`, never the other way round.
//!
//! Reading the file, hashing tokens and reporting a bad file at start or on reload are shared
//! with the collector's agent tokens (`fleetscope_runtime::tokens`); roles and scopes are the
//! hub's own. Tokens never appear in logs, errors or response bodies.

use std::fmt;

use fleetscope_model::GroupPath;
use serde::Serialize;

mod fields;
#[cfg(test)]
mod fixtures;
mod middleware;
pub mod oidc;
mod tokens;

pub use middleware::{require, LiveAuth};
pub use tokens::Auth;

/// What a caller may do. `Admin` includes everything `Read` may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// May read every route the caller's scope allows.
    Read,
    /// Ranks above `Read`: allows everything `Read` allows.
    Admin,
}

impl Role {
    /// The role a token file names (`read` or `admin`), if it is one.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "read" => Some(Role::Read),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    /// The name of the role, as the token file and answers give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` may do.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Principal {
    /// The name the token file gives the caller; for logs, never a secret.
    pub name: String,
    /// What the caller may do.
    pub role: Role,
    /// The group subtree the caller is limited to; `None` sees the whole fleet.
    pub scope: Option<GroupPath>,
}

impl Principal {
    /// The principal of every request in insecure mode: an unscoped admin.
    pub fn insecure() -> Principal {
        Principal {
            name: "insecure".to_owned(),
            role: Role::Admin,
            scope: None,
        }
    }

    /// Whether `group` is visible to this caller: always when unscoped, otherwise when `group`
    /// is the scope or lies below it (segment-wise: scope `emea/de` does not see `emea/dev`).
    pub fn sees_group(&self, group: &GroupPath) -> bool {
        self.scope
            .as_ref()
            .is_none_or(|scope| group.is_within(scope))
    }

    /// The subtree every answer to this caller must be limited to, if any.
    pub fn scope_prefix(&self) -> Option<&GroupPath> {
        self.scope.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(path: &str) -> GroupPath {
        GroupPath::parse(path).unwrap()
    }

    #[test]
    fn admin_implies_read() {
        assert!(Role::Admin.allows(Role::Read));
        assert!(Role::Admin.allows(Role::Admin));
        assert!(Role::Read.allows(Role::Read));
        assert!(!Role::Read.allows(Role::Admin));
    }

    #[test]
    fn a_scope_limits_what_a_principal_sees() {
        let scoped = Principal {
            name: "team-de".into(),
            role: Role::Read,
            scope: Some(group("emea/de")),
        };
        assert_eq!(scoped.scope_prefix(), Some(&group("emea/de")));
        assert!(scoped.sees_group(&group("emea/de")));
        assert!(scoped.sees_group(&group("emea/de/berlin")));
        assert!(scoped.sees_group(&group("emea/de/berlin/store-1")));
        assert!(!scoped.sees_group(&group("emea")), "the parent");
        assert!(
            !scoped.sees_group(&group("emea/dev")),
            "a sibling with the scope as prefix"
        );
        assert!(!scoped.sees_group(&group("emea/fr")), "a sibling");
        assert!(
            !scoped.sees_group(&group("apac/emea/de")),
            "the same tail elsewhere"
        );

        let unscoped = Principal {
            name: "all".into(),
            role: Role::Read,
            scope: None,
        };
        assert_eq!(unscoped.scope_prefix(), None);
        assert!(unscoped.sees_group(&group("emea/dev")));
        assert!(unscoped.sees_group(&group("apac")));
    }
}
