//! The match rules in force at the collector: read from the newest render's `match_rules` row
//! now and then, and applied to every app object a report carries without stamps.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use fleetscope_model::matching::{
    Candidate, MatchIndex, MatchRule, MatchRules, Matched, ObjectFacts,
};
use fleetscope_model::{AppName, ObservedItem};
use fleetscope_store::Store;

use crate::protocol::ValidReport;

/// How often the collector reads the match rules again.
pub const MATCH_RULES_REFRESH: Duration = Duration::from_secs(10);

/// One set of rules, ready to resolve objects.
#[derive(Debug, Default)]
pub struct LoadedRules {
    pub index: MatchIndex,
    /// The digest the render published with them; `None` before any render published rules.
    pub digest: Option<String>,
    /// How many apps have rules.
    pub apps: usize,
}

impl LoadedRules {
    /// Rules from a published row's JSON, with its digest.
    pub fn from_published(digest: String, json: &str) -> Result<LoadedRules, String> {
        let rules: MatchRules = serde_json::from_str(json)
            .map_err(|err| format!("the published match rules do not read: {err}"))?;
        Ok(LoadedRules {
            index: MatchIndex::new(&rules),
            digest: Some(digest),
            apps: rules.apps.len(),
        })
    }
}

/// What resolving one report did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// Objects without stamps that a rule gave an app.
    pub matched: u64,
    /// Objects without stamps that no rule took.
    pub unmatched: u64,
    /// Objects a rule gave an app whose stamped object the cluster holds: left unmanaged.
    pub stamped_won: u64,
}

/// The rules in force, replaced whole when a newer render published others.
#[derive(Debug, Clone, Default)]
pub struct RulesInForce {
    current: Arc<RwLock<Arc<LoadedRules>>>,
}

impl RulesInForce {
    pub fn get(&self) -> Arc<LoadedRules> {
        self.current.read().expect("match rules lock").clone()
    }

    pub fn replace(&self, rules: LoadedRules) {
        *self.current.write().expect("match rules lock") = Arc::new(rules);
    }

    /// Reads the newest rules once; replaces those in force when their digest differs.
    pub async fn read(&self, store: &Store) -> Result<bool, String> {
        let Some(row) = store
            .latest_match_rules()
            .await
            .map_err(|err| err.to_string())?
        else {
            return Ok(false);
        };
        if self.get().digest.as_deref() == Some(row.digest.as_str()) {
            return Ok(false);
        }
        let loaded = LoadedRules::from_published(row.digest, &row.rules)?;
        tracing::info!(
            render_id = row.render_id,
            apps = loaded.apps,
            "match rules in force"
        );
        self.replace(loaded);
        Ok(true)
    }

    /// Reads the rules every `interval` until the last other holder of these rules is gone.
    pub fn watch(&self, store: Store, interval: Duration) {
        let weak = Arc::downgrade(&self.current);
        tokio::spawn(async move {
            loop {
                let Some(current) = weak.upgrade() else {
                    return;
                };
                let rules = RulesInForce { current };
                if let Err(err) = rules.read(&store).await {
                    tracing::warn!(error = %err, "reading the match rules failed; the ones in force stay");
                }
                drop(rules);
                tokio::time::sleep(interval).await;
            }
        });
    }
}

/// What resolving decided for one object without stamps.
enum Decision {
    Matched(Matched),
    /// No rule took it: the version the default `versionFrom` of its kind reads.
    Unmatched(Option<fleetscope_model::Version>),
}

static NO_FACTS: ObjectFacts = ObjectFacts {
    labels: std::collections::BTreeMap::new(),
    target_revision: String::new(),
    images: Vec::new(),
};

/// Gives every app object of the report that carries no stamps the app and version the first
/// rule that takes it says, unless the cluster holds a stamped object of that app (the report's
/// `stamped_apps`, and the stamped objects in the report itself).
pub fn resolve(report: &mut ValidReport, rules: &LoadedRules) -> Resolved {
    let mut resolved = Resolved::default();
    if !report
        .items
        .iter()
        .any(ObservedItem::is_unstamped_app_object)
    {
        return resolved;
    }
    let stamped: BTreeSet<&AppName> = report
        .stamped_apps
        .iter()
        .chain(
            report
                .items
                .iter()
                .filter(|item| item.object.kind.is_app_object() && !item.deleted)
                .filter_map(|item| item.app.as_ref()),
        )
        .collect();
    let mut decided = Vec::with_capacity(report.items.len());
    for item in &report.items {
        if !item.is_unstamped_app_object() {
            decided.push(None);
            continue;
        }
        let facts = item.facts.as_deref().unwrap_or(&NO_FACTS);
        let candidate = Candidate {
            kind: item.object.kind,
            namespace: &item.object.namespace,
            name: &item.object.name,
            applied_revision: &item.applied_revision,
            facts,
        };
        match rules.index.resolve(&candidate) {
            Some(matched) if stamped.contains(&matched.app) => {
                resolved.stamped_won += 1;
                decided.push(None);
            }
            Some(matched) => {
                resolved.matched += 1;
                decided.push(Some(Decision::Matched(matched)));
            }
            None => {
                resolved.unmatched += 1;
                // No app, but the version its kind's default reads, so that what runs can be
                // told from the stored row (`fleetscope import` proposes it as the version).
                decided.push(Some(Decision::Unmatched(
                    MatchRule::default().version(&candidate),
                )));
            }
        }
    }
    for (item, decision) in report.items.iter_mut().zip(decided) {
        match decision {
            Some(Decision::Matched(matched)) => {
                item.app = Some(matched.app);
                item.version = matched.version;
                item.content_hash = None;
            }
            Some(Decision::Unmatched(version)) => item.version = version,
            None => {}
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use fleetscope_model::matching::{AppRules, MatchRule, MatchRules};
    use fleetscope_model::{
        AppName, ClusterId, Health, ObjectKind, ObjectRef, ObservedItem, SyncStatus, Timestamp,
        Version,
    };

    use super::{resolve, LoadedRules};
    use crate::protocol::{ReportKind, ValidReport};

    fn item(kind: ObjectKind, name: &str, revision: &str) -> ObservedItem {
        ObservedItem {
            cluster: ClusterId::parse("store-1").unwrap(),
            object: ObjectRef {
                kind,
                namespace: "shop".into(),
                name: name.into(),
            },
            app: None,
            version: None,
            content_hash: None,
            applied_revision: revision.into(),
            health: Health::Healthy,
            sync: SyncStatus::Unknown,
            reason: String::new(),
            message: String::new(),
            transitioned_at: Timestamp(1),
            observed_at: Timestamp(1),
            change_seq: 1,
            deleted: false,
            facts: None,
        }
    }

    /// A matched object gets the rule's app and version; one no rule takes keeps no app but
    /// the version its kind's default reads; a source is left as it came.
    #[test]
    fn objects_no_rule_takes_keep_the_version_their_kind_reads() {
        let rules = MatchRules {
            apps: vec![AppRules {
                app: AppName::parse("podinfo").unwrap(),
                rules: vec![MatchRule {
                    name: Some("podinfo".into()),
                    ..MatchRule::default()
                }],
            }],
        };
        let loaded = LoadedRules {
            index: fleetscope_model::matching::MatchIndex::new(&rules),
            digest: Some("d".into()),
            apps: 1,
        };
        let mut report = ValidReport {
            cluster: ClusterId::parse("store-1").unwrap(),
            agent_version: "0.1.0".into(),
            report_seq: 1,
            kind: ReportKind::Delta,
            reconcilers: Default::default(),
            change_seq_high: 0,
            items: vec![
                item(ObjectKind::HelmRelease, "podinfo", "6.5.0+0cc9a8446c95"),
                item(ObjectKind::HelmRelease, "ingress-nginx", "4.11.3+1a2b"),
                item(ObjectKind::Kustomization, "infra", "v1.2.0@sha1:3f4e5d6c"),
                item(ObjectKind::GitRepository, "infra", "v1.2.0@sha1:3f4e5d6c"),
            ],
            stamped_apps: vec![],
        };
        let resolved = resolve(&mut report, &loaded);
        assert_eq!((resolved.matched, resolved.unmatched), (1, 2));
        let got: Vec<(Option<&str>, Option<&str>)> = report
            .items
            .iter()
            .map(|i| {
                (
                    i.app.as_ref().map(AppName::as_str),
                    i.version.as_ref().map(Version::as_str),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("podinfo"), Some("6.5.0")),
                (None, Some("4.11.3")),
                (None, Some("v1.2.0")),
                (None, None),
            ]
        );
    }
}
