//! What `fleetscope import` starts from: the clusters that report and the app objects they
//! run, as the store holds them, and the match rules in force.

use std::collections::BTreeMap;

use fleetscope_model::matching::{MatchRule, MatchRules};
use fleetscope_model::{Labels, ObjectKind};
use fleetscope_store::Store;

/// Fleetscope's own entry object on a cluster it renders for: never an app.
pub const ENTRY_OBJECT: &str = "fleetscope-render-group";

/// One cluster as the inventory knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownCluster {
    pub group: String,
    pub environment: String,
    /// `flux`, `argocd`, or what an auto-registered cluster reported (often `unknown`).
    pub reconciler: String,
    /// Its labels, Fleetscope's own (`fleetscope.io/…`) left out.
    pub labels: Labels,
}

/// One live app object on one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningObject {
    pub cluster: String,
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
    /// The app it is stored as: from its stamps or a match rule; `None` when no rule took it.
    pub app: Option<String>,
    /// Its version as stored (for an object no rule took, what its kind's default reads).
    pub version: Option<String>,
    /// Stamped by the renderer (it carries a content hash).
    pub stamped: bool,
}

/// Everything the store says runs.
#[derive(Debug, Clone, Default)]
pub struct FleetFacts {
    /// Every cluster that reported or is in the inventory (and not removed), by id.
    pub clusters: BTreeMap<String, Option<KnownCluster>>,
    pub objects: Vec<RunningObject>,
    /// The newest published match rules, per app.
    pub rules: BTreeMap<String, Vec<MatchRule>>,
}

/// Clusters whose objects are read in one query.
const CLUSTERS_PER_READ: usize = 500;

/// Reads the inventory, the clusters that sent heartbeats, every live app object of those
/// clusters and the newest match rules.
pub async fn read(store: &Store) -> anyhow::Result<FleetFacts> {
    let mut facts = FleetFacts::default();
    for row in store.inventory_rows().await? {
        if row.removed != 0 {
            continue;
        }
        let labels = row
            .label_keys
            .iter()
            .zip(&row.label_values)
            .filter(|(key, _)| !key.starts_with("fleetscope.io/"))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        facts.clusters.insert(
            row.cluster_id,
            Some(KnownCluster {
                group: row.group_path,
                environment: row.environment,
                reconciler: row.reconciler,
                labels,
            }),
        );
    }
    for heartbeat in store.latest_heartbeats().await? {
        facts.clusters.entry(heartbeat.cluster_id).or_insert(None);
    }
    let ids: Vec<&str> = facts.clusters.keys().map(String::as_str).collect();
    let mut objects = Vec::new();
    for chunk in ids.chunks(CLUSTERS_PER_READ) {
        for row in store.observed_for_clusters(chunk).await? {
            let Some(kind) = ObjectKind::parse(&row.object_kind) else {
                continue;
            };
            if row.deleted != 0 || !kind.is_app_object() || row.object_name == ENTRY_OBJECT {
                continue;
            }
            objects.push(RunningObject {
                cluster: row.cluster_id,
                kind,
                namespace: row.object_namespace,
                name: row.object_name,
                app: Some(row.app).filter(|app| !app.is_empty()),
                version: Some(row.version).filter(|v| !v.is_empty()),
                stamped: !row.content_hash.is_empty(),
            });
        }
    }
    facts.objects = objects;
    if let Some(row) = store.latest_match_rules().await? {
        let rules: MatchRules = serde_json::from_str(&row.rules)
            .map_err(|err| anyhow::anyhow!("the published match rules do not read: {err}"))?;
        for app in rules.apps {
            facts.rules.insert(app.app.to_string(), app.rules);
        }
    }
    Ok(facts)
}
