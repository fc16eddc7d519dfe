//! `explain`: why each app is, or is not, desired on a cluster.

use std::fmt::Write;

use fleetscope_model::{AppName, ClusterId};

use crate::assign::Assigned;
use crate::validate::Platform;

/// A readable account for one cluster (and optionally one app).
pub fn explain(
    platform: &Platform,
    assigned: &Assigned,
    cluster: &ClusterId,
    app: Option<&AppName>,
) -> anyhow::Result<String> {
    let entry = platform.clusters.get(cluster).ok_or_else(|| {
        anyhow::anyhow!("cluster {:?} is not in the platform repo", cluster.as_str())
    })?;
    if let Some(app) = app {
        anyhow::ensure!(
            platform.apps.contains_key(app),
            "application {:?} is not in the platform repo",
            app.as_str()
        );
    }
    let group = &assigned.members[cluster];
    // Reasons are per cluster (clusters with equal content may have got it for different reasons).
    let assignments = crate::assign::assign_cluster(platform, cluster)
        .map_err(|errors| anyhow::anyhow!("{}", errors[0]))?;
    let labels = platform.effective_labels(entry);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster {cluster} (group {}, environment {}, {}) → render group {group}",
        entry.group, entry.environment, entry.reconciler
    );
    let _ = writeln!(
        out,
        "labels: {}",
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (name, app_entry) in &platform.apps {
        if app.is_some_and(|a| a != name) {
            continue;
        }
        match assignments.iter().find(|a| &a.app == name) {
            Some(a) => {
                let version = match &a.pinned_by {
                    Some(policy) => format!("{} (pinned by policy/{policy})", a.version),
                    None => format!("{} (the app's default)", a.version),
                };
                let _ = writeln!(
                    out,
                    "  {name}: desired, version {version}; because {}",
                    a.reasons.join(", then ")
                );
            }
            None => {
                let apps_of = crate::assign::policy_apps(platform);
                let selecting: Vec<String> = platform
                    .policies
                    .iter()
                    .zip(&apps_of)
                    .filter(|(_, apps)| apps.contains(name))
                    .map(|(policy, _)| {
                        format!(
                            "policy/{} does not select this cluster: {}",
                            policy.name,
                            policy.clusters.mismatches(&labels, &entry.group).join("; ")
                        )
                    })
                    .collect();
                let why = if selecting.is_empty() {
                    "no policy selects this app".to_owned()
                } else {
                    selecting.join("; ")
                };
                let _ = writeln!(out, "  {name}: not desired; {why}");
                let _ = app_entry;
            }
        }
    }
    Ok(out)
}
