//! Objects Fleetscope did not render: how an app's reconciler objects are recognised on a
//! cluster when they carry none of the renderer's stamps, and where their running version is
//! read.
//!
//! The platform repo gives each app a list of [`MatchRule`]s; the renderer publishes them as
//! one [`MatchRules`]; the central collector builds a [`MatchIndex`] from it and resolves every
//! unstamped Kustomization, HelmRelease or Application an agent reports ([`Candidate`]) to an
//! app and a version before the row is stored. From there on the object is the app's object
//! like any stamped one, with no content hash, so drift compares versions alone.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::ids::{AppName, Version};
use crate::selector::{validate_label_key, validate_labels, Labels};
pub use crate::state::ObjectFacts;
use crate::state::ObjectKind;

crate::string_enum::string_enum!(
    /// Where an unstamped object's running version is read.
    VersionFrom {
        /// The applied revision without SemVer build metadata (a `+` and what follows): for a
        /// HelmRelease the chart version of the release Helm runs, for an Argo CD Application
        /// of a Helm chart its synced chart version.
        ChartVersion = "chartVersion",
        /// The applied revision as the reconciler writes it.
        Revision = "revision",
        /// The applied revision's name part, before `@`: a Git tag or branch, an OCI tag.
        RevisionName = "revisionName",
        /// The applied revision's digest, after `@` and the algorithm (`sha1:`, `sha256:`).
        RevisionDigest = "revisionDigest",
        /// An Argo CD Application's `spec.source.targetRevision` (the first source's).
        TargetRevision = "targetRevision",
        /// The tag of an image the object reports running (Argo CD `status.summary.images`).
        ImageTag = "imageTag",
        /// The value of one of the object's labels.
        Label = "label",
    }
);

impl VersionFrom {
    /// The source used when a rule names none, by the object's kind.
    pub fn default_for(kind: ObjectKind) -> VersionFrom {
        match kind {
            ObjectKind::HelmRelease => VersionFrom::ChartVersion,
            ObjectKind::Application => VersionFrom::TargetRevision,
            _ => VersionFrom::RevisionName,
        }
    }
}

/// One way to recognise an app's object. Every part given must hold; a rule names at least a
/// name or a label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchRule {
    /// `Kustomization`, `HelmRelease` or `Application`; any of the three when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ObjectKind>,
    /// The object's name, or a pattern where `*` stands for any run of characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The object's namespace; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels the object carries, every one with this value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Where the version is read; by kind when absent ([`VersionFrom::default_for`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_from: Option<VersionFrom>,
    /// For `imageTag`: the image repository whose tag is the version
    /// (`ghcr.io/stefanprodan/podinfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// For `label`: the label whose value is the version (`app.kubernetes.io/version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Cut from the front of the version read, when it starts with it (`v`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim_prefix: Option<String>,
}

impl MatchRule {
    /// Every problem of the rule, each as (field, message), the field relative to the rule.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut problem = |field: &str, message: String| problems.push((field.to_owned(), message));
        if let Some(kind) = self.kind {
            if !kind.is_app_object() {
                problem(
                    "kind",
                    format!("{kind} is a source; a rule matches Kustomization, HelmRelease or Application"),
                );
            }
        }
        if self.name.is_none() && self.labels.is_empty() {
            problem(
                "",
                "a rule names the object (name) or a label it carries (labels); kind and namespace alone would take every such object".to_owned(),
            );
        }
        if let Some(name) = &self.name {
            let allowed =
                |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.*".contains(c);
            if name.is_empty() || name.len() > 253 {
                problem("name", format!("{name:?} must be 1 to 253 characters"));
            } else if let Some(bad) = name.chars().find(|c| !allowed(*c)) {
                problem(
                    "name",
                    format!("{name:?} has {bad:?}; a name is lowercase letters, digits, '-' and '.', with '*' for any run of them"),
                );
            }
        }
        if let Some(namespace) = &self.namespace {
            if let Err(err) = crate::ids::check_dns_label("namespace", namespace, 63) {
                problem("namespace", err.to_string());
            }
        }
        for err in validate_labels(&self.labels) {
            problem("labels", err.to_string());
        }
        let from = self.version_from;
        match (&self.image, from) {
            (None, Some(VersionFrom::ImageTag)) => problem(
                "image",
                "versionFrom imageTag needs the image repository whose tag is the version"
                    .to_owned(),
            ),
            (Some(image), Some(VersionFrom::ImageTag)) => {
                if image.is_empty() || image.len() > 255 || image.contains([':', '@', ' ']) {
                    problem("image", format!("{image:?} must be an image repository without tag or digest (ghcr.io/stefanprodan/podinfo)"));
                }
            }
            (Some(_), _) => problem(
                "image",
                "only versionFrom imageTag reads an image".to_owned(),
            ),
            (None, _) => {}
        }
        match (&self.label, from) {
            (None, Some(VersionFrom::Label)) => problem(
                "label",
                "versionFrom label needs the label whose value is the version".to_owned(),
            ),
            (Some(key), Some(VersionFrom::Label)) => {
                if let Err(err) = validate_label_key(key) {
                    problem("label", err.to_string());
                }
            }
            (Some(_), _) => problem("label", "only versionFrom label reads a label".to_owned()),
            (None, _) => {}
        }
        if let Some(prefix) = &self.trim_prefix {
            if prefix.is_empty()
                || prefix.len() > 32
                || !prefix.chars().all(|c| c.is_ascii_graphic())
            {
                problem(
                    "trimPrefix",
                    format!("{prefix:?} must be 1 to 32 printable characters without spaces"),
                );
            }
        }
        problems
    }

    /// Whether the rule takes this object (kind, namespace, name and labels; not the version).
    pub fn takes(&self, candidate: &Candidate<'_>) -> bool {
        self.kind.is_none_or(|kind| kind == candidate.kind)
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == candidate.namespace)
            && self
                .name
                .as_deref()
                .is_none_or(|pattern| glob(pattern, candidate.name))
            && self
                .labels
                .iter()
                .all(|(key, value)| candidate.facts.labels.get(key) == Some(value))
    }

    /// The version this rule reads from the object: `None` when the field is empty or what it
    /// holds is not a version.
    pub fn version(&self, candidate: &Candidate<'_>) -> Option<Version> {
        let from = self
            .version_from
            .unwrap_or_else(|| VersionFrom::default_for(candidate.kind));
        let revision = candidate.applied_revision;
        let text: &str = match from {
            VersionFrom::ChartVersion => revision.split('+').next().unwrap_or_default(),
            VersionFrom::Revision => revision,
            VersionFrom::RevisionName => {
                revision.rsplit_once('@').map_or(revision, |(name, _)| name)
            }
            VersionFrom::RevisionDigest => revision_digest(revision),
            VersionFrom::TargetRevision => &candidate.facts.target_revision,
            VersionFrom::ImageTag => {
                let image = self.image.as_deref().unwrap_or_default();
                candidate
                    .facts
                    .images
                    .iter()
                    .find_map(|reference| image_tag(reference, image))
                    .unwrap_or_default()
            }
            VersionFrom::Label => {
                let key = self.label.as_deref().unwrap_or_default();
                candidate.facts.labels.get(key).map_or("", String::as_str)
            }
        };
        let text = match &self.trim_prefix {
            Some(prefix) => text.strip_prefix(prefix.as_str()).unwrap_or(text),
            None => text,
        };
        if text.is_empty() {
            return None;
        }
        Version::parse(text).ok()
    }
}

/// `main@sha1:abc` → `abc`; `v1@sha256:def` → `def`; legacy `main/abc` → `abc`.
fn revision_digest(revision: &str) -> &str {
    if let Some((_, digest)) = revision.rsplit_once('@') {
        return digest.split_once(':').map_or(digest, |(_, hex)| hex);
    }
    if let Some((_, hex)) = revision.split_once(':') {
        return hex;
    }
    revision.rsplit_once('/').map_or(revision, |(_, hex)| hex)
}

/// The tag of `reference` when its repository is `image`: `ghcr.io/x/podinfo:6.5.0@sha256:…`
/// with `ghcr.io/x/podinfo` gives `6.5.0`.
fn image_tag<'a>(reference: &'a str, image: &str) -> Option<&'a str> {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let (repository, tag) = without_digest.rsplit_once(':')?;
    // A colon before the last slash is a registry's port, not a tag.
    if tag.contains('/') {
        return None;
    }
    (repository == image).then_some(tag)
}

/// `*` stands for any run of characters (none included); everything else is itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or_default();
    for part in parts {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

/// One unstamped object as the match rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub kind: ObjectKind,
    pub namespace: &'a str,
    pub name: &'a str,
    pub applied_revision: &'a str,
    pub facts: &'a ObjectFacts,
}

/// One app's rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRules {
    pub app: AppName,
    pub rules: Vec<MatchRule>,
}

/// Every app's rules, in app name order: what the renderer publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchRules {
    pub apps: Vec<AppRules>,
}

/// What an object resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub app: AppName,
    pub version: Option<Version>,
}

/// The rules ready to resolve objects: rules naming an exact name are found by it, the others
/// are tried in order. The first rule that takes an object, in app name order and then in each
/// app's order, decides.
#[derive(Debug, Clone, Default)]
pub struct MatchIndex {
    rules: Vec<(usize, MatchRule)>,
    apps: Vec<AppName>,
    by_name: HashMap<String, Vec<u32>>,
    open: Vec<u32>,
}

impl MatchIndex {
    pub fn new(rules: &MatchRules) -> MatchIndex {
        let mut index = MatchIndex::default();
        let mut apps: Vec<&AppRules> = rules.apps.iter().collect();
        apps.sort_by(|a, b| a.app.cmp(&b.app));
        for app in apps {
            let app_index = index.apps.len();
            index.apps.push(app.app.clone());
            for rule in &app.rules {
                let at = index.rules.len() as u32;
                match rule.name.as_deref().filter(|name| !name.contains('*')) {
                    Some(name) => index.by_name.entry(name.to_owned()).or_default().push(at),
                    None => index.open.push(at),
                }
                index.rules.push((app_index, rule.clone()));
            }
        }
        index
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The app and version of an unstamped object, if a rule takes it.
    pub fn resolve(&self, candidate: &Candidate<'_>) -> Option<Matched> {
        if !candidate.kind.is_app_object() {
            return None;
        }
        let named = self
            .by_name
            .get(candidate.name)
            .map_or(&[][..], Vec::as_slice);
        let (mut a, mut b) = (named.iter().peekable(), self.open.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x < y => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => return None,
            };
            let (app, rule) = &self.rules[*next? as usize];
            if rule.takes(candidate) {
                return Some(Matched {
                    app: self.apps[*app].clone(),
                    version: rule.version(candidate),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(labels: &[(&str, &str)]) -> ObjectFacts {
        ObjectFacts {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..ObjectFacts::default()
        }
    }

    fn candidate<'a>(
        kind: ObjectKind,
        name: &'a str,
        revision: &'a str,
        facts: &'a ObjectFacts,
    ) -> Candidate<'a> {
        Candidate {
            kind,
            namespace: "apps",
            name,
            applied_revision: revision,
            facts,
        }
    }

    fn rules(apps: Vec<(&str, Vec<MatchRule>)>) -> MatchIndex {
        MatchIndex::new(&MatchRules {
            apps: apps
                .into_iter()
                .map(|(app, rules)| AppRules {
                    app: AppName::parse(app).unwrap(),
                    rules,
                })
                .collect(),
        })
    }

    fn named(name: &str) -> MatchRule {
        MatchRule {
            name: Some(name.to_owned()),
            ..MatchRule::default()
        }
    }

    #[test]
    fn globs() {
        for (pattern, text, expected) in [
            ("podinfo", "podinfo", true),
            ("podinfo", "podinfo-2", false),
            ("podinfo-*", "podinfo-2", true),
            ("podinfo-*", "podinfo-", true),
            ("podinfo-*", "podinfo", false),
            ("*-podinfo", "store-1-podinfo", true),
            ("*", "anything", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "acb", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
        ] {
            assert_eq!(glob(pattern, text), expected, "{pattern} {text}");
        }
    }

    #[test]
    fn the_first_rule_in_app_then_rule_order_decides() {
        let index = rules(vec![
            ("zeta", vec![named("podinfo")]),
            (
                "alpha",
                vec![MatchRule {
                    name: Some("pod*".into()),
                    ..MatchRule::default()
                }],
            ),
            ("mid", vec![named("other"), named("podinfo")]),
        ]);
        let none = ObjectFacts::default();
        let resolved = index
            .resolve(&candidate(
                ObjectKind::HelmRelease,
                "podinfo",
                "6.5.0",
                &none,
            ))
            .unwrap();
        assert_eq!(
            resolved.app.as_str(),
            "alpha",
            "alpha's pattern comes before mid's and zeta's names"
        );
        assert_eq!(resolved.version.unwrap().as_str(), "6.5.0");
        let resolved = index
            .resolve(&candidate(ObjectKind::HelmRelease, "other", "", &none))
            .unwrap();
        assert_eq!((resolved.app.as_str(), resolved.version), ("mid", None));
        assert!(index
            .resolve(&candidate(ObjectKind::HelmRelease, "nothing", "", &none))
            .is_none());
        assert!(
            index
                .resolve(&candidate(ObjectKind::GitRepository, "podinfo", "", &none))
                .is_none(),
            "sources stay sources"
        );
    }

    #[test]
    fn every_part_of_a_rule_must_hold() {
        let rule = MatchRule {
            kind: Some(ObjectKind::Kustomization),
            namespace: Some("apps".into()),
            labels: [("app.kubernetes.io/name".to_owned(), "shop".to_owned())].into(),
            ..MatchRule::default()
        };
        let index = rules(vec![("shop", vec![rule])]);
        let labelled = facts(&[("app.kubernetes.io/name", "shop"), ("tier", "web")]);
        let other = facts(&[("app.kubernetes.io/name", "shop2")]);
        assert!(index
            .resolve(&candidate(ObjectKind::Kustomization, "x", "", &labelled))
            .is_some());
        assert!(index
            .resolve(&candidate(ObjectKind::HelmRelease, "x", "", &labelled))
            .is_none());
        assert!(index
            .resolve(&candidate(ObjectKind::Kustomization, "x", "", &other))
            .is_none());
        let mut elsewhere = candidate(ObjectKind::Kustomization, "x", "", &labelled);
        elsewhere.namespace = "flux-system";
        assert!(index.resolve(&elsewhere).is_none());
    }

    #[test]
    fn versions_by_source() {
        let facts = ObjectFacts {
            labels: [("app.kubernetes.io/version".to_owned(), "v2.1.0".to_owned())].into(),
            target_revision: "v1.4.0".into(),
            images: vec![
                "docker.io/library/redis:7.2".into(),
                "registry.local:5000/shop/api:3.1.4@sha256:0123".into(),
            ],
        };
        let read = |kind, revision: &str, rule: MatchRule| {
            rule.version(&candidate(kind, "x", revision, &facts))
                .map(|v| v.as_str().to_owned())
        };
        let from = |version_from| MatchRule {
            version_from: Some(version_from),
            ..MatchRule::default()
        };
        let k = ObjectKind::Kustomization;
        assert_eq!(
            read(
                ObjectKind::HelmRelease,
                "1.2.0+0123456789ab",
                MatchRule::default()
            )
            .as_deref(),
            Some("1.2.0")
        );
        assert_eq!(
            read(k, "v1.2.0@sha256:abcd", MatchRule::default()).as_deref(),
            Some("v1.2.0")
        );
        assert_eq!(
            read(k, "main@sha1:abcd", from(VersionFrom::RevisionDigest)).as_deref(),
            Some("abcd")
        );
        assert_eq!(
            read(k, "main/abcd", from(VersionFrom::RevisionDigest)).as_deref(),
            Some("abcd")
        );
        assert_eq!(
            read(k, "sha256:ef01", from(VersionFrom::RevisionDigest)).as_deref(),
            Some("ef01")
        );
        assert_eq!(
            read(k, "main@sha1:abcd", from(VersionFrom::Revision)).as_deref(),
            Some("main@sha1:abcd")
        );
        assert_eq!(
            read(ObjectKind::Application, "abcd", MatchRule::default()).as_deref(),
            Some("v1.4.0")
        );
        let trimmed = MatchRule {
            trim_prefix: Some("v".into()),
            ..MatchRule::default()
        };
        assert_eq!(
            read(ObjectKind::Application, "abcd", trimmed).as_deref(),
            Some("1.4.0")
        );
        let image = |image: &str| MatchRule {
            version_from: Some(VersionFrom::ImageTag),
            image: Some(image.into()),
            ..MatchRule::default()
        };
        assert_eq!(
            read(k, "", image("registry.local:5000/shop/api")).as_deref(),
            Some("3.1.4")
        );
        assert_eq!(
            read(k, "", image("docker.io/library/redis")).as_deref(),
            Some("7.2")
        );
        assert_eq!(
            read(k, "", image("registry.local")),
            None,
            "a port is not a tag"
        );
        let label = MatchRule {
            version_from: Some(VersionFrom::Label),
            label: Some("app.kubernetes.io/version".into()),
            ..MatchRule::default()
        };
        assert_eq!(read(k, "", label).as_deref(), Some("v2.1.0"));
        assert_eq!(
            read(k, "", from(VersionFrom::Revision)),
            None,
            "nothing applied yet"
        );
        assert_eq!(
            read(k, "has space@sha1:1", MatchRule::default()),
            None,
            "not a version"
        );
    }

    #[test]
    fn rules_that_cannot_work_are_refused() {
        let problems = |rule: MatchRule| {
            rule.problems()
                .into_iter()
                .map(|(field, message)| format!("{field}: {message}"))
                .collect::<Vec<_>>()
        };
        assert!(problems(named("podinfo")).is_empty());
        assert_eq!(problems(MatchRule::default()).len(), 1);
        let bad = MatchRule {
            kind: Some(ObjectKind::GitRepository),
            name: Some("Pod_info".into()),
            namespace: Some("Apps".into()),
            version_from: Some(VersionFrom::ImageTag),
            label: Some("x".into()),
            trim_prefix: Some(String::new()),
            ..MatchRule::default()
        };
        let found = problems(bad);
        let fields: Vec<&str> = found.iter().map(|p| p.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            ["kind", "name", "namespace", "image", "label", "trimPrefix"],
            "{found:#?}"
        );
    }
}
