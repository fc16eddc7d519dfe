//! What a render changes per cluster: for every (cluster, app) whose desired version the render
//! changes, one `desired_version_changes` row from the version desired before to the one
//! desired after (`""` for "not desired"). Rollouts are read from these rows.
//!
//! A cluster's desired version is its render group's: before the render, the group of its live
//! membership row and that group's live desired row in the store; after, the group the render
//! assigns and its assignment. Content changes that keep the version are not version changes.

use std::collections::BTreeMap;

use fleetscope_store::queries::CurrentDesiredRow;
use fleetscope_store::DesiredVersionChangeRow;

use crate::RenderOutcome;

/// App → version of one render group, before or after the render.
type Versions<'a> = BTreeMap<&'a str, &'a str>;

/// An app whose version differs: (app, from version, to version).
type Difference<'a> = (&'a str, &'a str, &'a str);

/// Every app whose version differs between two groups' versions (`""` where one side does not
/// have the app).
fn differences<'a>(before: &Versions<'a>, after: &Versions<'a>) -> Vec<Difference<'a>> {
    let mut out = Vec::new();
    for (app, to) in after {
        let from = before.get(app).copied().unwrap_or("");
        if from != *to {
            out.push((*app, from, *to));
        }
    }
    for (app, from) in before {
        if !after.contains_key(app) {
            out.push((*app, *from, ""));
        }
    }
    out
}

/// The versions of `group` in `of`; none for no group or one `of` does not have.
fn versions<'a>(of: &BTreeMap<&'a str, Versions<'a>>, group: Option<&str>) -> Versions<'a> {
    group.and_then(|g| of.get(g)).cloned().unwrap_or_default()
}

/// The rows of every (cluster, app) whose desired version `outcome` changes from what the store
/// holds (`desired`: (render group, app) → its current row; `members`: cluster → (render
/// group, removed), as `desired::Current` reads them), by cluster, then in the order the
/// differences of its two groups list them. Worked out once per distinct (group before, group after),
/// so a render that moves the whole fleet costs a few comparisons and one row per change.
pub fn version_change_rows(
    outcome: &RenderOutcome,
    desired: &BTreeMap<(String, String), CurrentDesiredRow>,
    members: &BTreeMap<String, (String, u8)>,
    render_id: u64,
) -> Vec<DesiredVersionChangeRow> {
    let mut before_of: BTreeMap<&str, Versions> = BTreeMap::new();
    for ((group, app), row) in desired {
        if row.removed == 0 {
            before_of
                .entry(group.as_str())
                .or_default()
                .insert(app.as_str(), row.version.as_str());
        }
    }
    let after_of: BTreeMap<&str, Versions> = outcome
        .assigned
        .groups
        .iter()
        .map(|(group, content)| {
            let versions = content
                .assignments
                .iter()
                .map(|a| (a.app.as_str(), a.version.as_str()))
                .collect();
            (group.as_str(), versions)
        })
        .collect();
    let mut worked_out: BTreeMap<(Option<&str>, Option<&str>), Vec<Difference>> = BTreeMap::new();
    let mut pairs: BTreeMap<&str, (Option<&str>, Option<&str>)> = BTreeMap::new();
    for (cluster, (group, removed)) in members {
        if *removed == 0 {
            pairs.entry(cluster.as_str()).or_default().0 = Some(group.as_str());
        }
    }
    for (cluster, group) in &outcome.assigned.members {
        pairs.entry(cluster.as_str()).or_default().1 = Some(group.as_str());
    }
    let mut rows = Vec::new();
    for (cluster, (before, after)) in pairs {
        let changes = worked_out.entry((before, after)).or_insert_with(|| {
            differences(&versions(&before_of, before), &versions(&after_of, after))
        });
        rows.extend(
            changes
                .iter()
                .map(|(app, from, to)| DesiredVersionChangeRow {
                    app: (*app).to_owned(),
                    render_id,
                    cluster_id: cluster.to_owned(),
                    from_version: (*from).to_owned(),
                    to_version: (*to).to_owned(),
                }),
        );
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_every_app_whose_version_moved() {
        let before: Versions = [("a", "1"), ("b", "1"), ("c", "1")].into_iter().collect();
        let after: Versions = [("a", "1"), ("b", "2"), ("d", "1")].into_iter().collect();
        assert_eq!(
            differences(&before, &after),
            vec![("b", "1", "2"), ("d", "", "1"), ("c", "1", "")]
        );
        assert!(differences(&after, &after).is_empty());
    }
}
