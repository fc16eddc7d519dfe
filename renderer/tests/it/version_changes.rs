//! What each render changes per cluster (`desired_version_changes`) and when its platform
//! commit was made (`platform_commits`), published into a real ClickHouse: the rows equal the
//! difference between every cluster's desired versions as the store answers them before and
//! after the render, through a version bump, clusters that move between render groups with and
//! without a version change, a cluster added and one taken away, and an app taken away.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use fleetscope_model::Timestamp;
use fleetscope_renderer::{desired, render};
use fleetscope_store::{DesiredVersionChangeRow, Store};
use fleetscope_testkit::TestStore;

/// (cluster, app) → desired version, for every cluster in `clusters`, as the store answers it.
async fn desired_versions(
    store: &Store,
    clusters: &BTreeSet<String>,
) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for cluster in clusters {
        for row in store.desired_for_cluster(cluster).await.unwrap() {
            out.insert((cluster.clone(), row.app), row.version);
        }
    }
    out
}

/// The rows a render from `before` to `after` should write, worked out from the two maps.
fn expected_changes(
    before: &BTreeMap<(String, String), String>,
    after: &BTreeMap<(String, String), String>,
    render_id: u64,
) -> Vec<DesiredVersionChangeRow> {
    let keys: BTreeSet<&(String, String)> = before.keys().chain(after.keys()).collect();
    let mut rows: Vec<DesiredVersionChangeRow> = keys
        .into_iter()
        .filter_map(|key| {
            let from = before.get(key).cloned().unwrap_or_default();
            let to = after.get(key).cloned().unwrap_or_default();
            (from != to).then(|| DesiredVersionChangeRow {
                app: key.1.clone(),
                render_id,
                cluster_id: key.0.clone(),
                from_version: from,
                to_version: to,
            })
        })
        .collect();
    rows.sort();
    rows
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Platform",
            "-c",
            "user.email=platform@example.com",
        ])
        .args(args)
        .env("GIT_COMMITTER_DATE", "2027-01-05T10:00:00Z")
        .env("GIT_AUTHOR_DATE", "2027-01-05T09:00:00Z")
        .output()
        .expect("git runs (Debian package git)");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} holds {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Renders the platform repo as it is now, publishes it as `render_id`, and checks the version
/// change rows against the store's answers before and after; returns how many rows it wrote.
async fn render_and_check(
    store: &Store,
    platform: &Path,
    out: &Path,
    render_id: u64,
    clusters: &mut BTreeSet<String>,
) -> Vec<DesiredVersionChangeRow> {
    let before = desired_versions(store, clusters).await;
    let outcome = render(platform, out).unwrap();
    clusters.extend(outcome.platform.clusters.keys().map(|c| c.to_string()));
    let published = desired::publish(store, &outcome, render_id, Timestamp(1_800_000_000))
        .await
        .unwrap();
    let after = desired_versions(store, clusters).await;
    let written = store
        .desired_version_changes(None, render_id - 1)
        .await
        .unwrap();
    assert_eq!(written, expected_changes(&before, &after, render_id));
    assert_eq!(published.version_change_rows, written.len());
    let counted = store
        .render_change_counts(render_id - 1, render_id)
        .await
        .unwrap();
    assert_eq!(
        counted
            .iter()
            .map(|c| (c.render_id, c.version_changes as usize))
            .collect::<Vec<_>>(),
        vec![(render_id, written.len())],
        "the render records how many change rows it wrote"
    );
    let held = store
        .stored_change_counts(render_id - 1, render_id)
        .await
        .unwrap();
    assert_eq!(
        held.iter()
            .map(|c| c.version_changes as usize)
            .sum::<usize>(),
        written.len(),
        "the store counts the same rows"
    );
    written
}

#[tokio::test]
async fn each_render_records_every_desired_version_it_changed_and_its_platform_commit() {
    let test = TestStore::start().await;
    let store = &test.store;
    let platform = crate::copy_of_example();
    let dir = platform.path();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "the platform"]);
    let head = git(dir, &["rev-parse", "HEAD"]);
    let out = tempfile::tempdir().unwrap();
    let mut clusters = BTreeSet::new();

    // The first render: every (cluster, app) from nothing to its version.
    let first = render_and_check(store, dir, out.path(), 1, &mut clusters).await;
    let first_clusters: BTreeSet<&str> = first.iter().map(|r| r.cluster_id.as_str()).collect();
    assert_eq!(
        first_clusters.len(),
        7,
        "every cluster of the platform: {first:#?}"
    );
    assert!(first.iter().all(|r| r.from_version.is_empty()));
    assert_eq!(
        store.platform_committed_at(&head).await.unwrap(),
        Some(1_799_143_200),
        "2027-01-05T10:00:00Z, the committer time"
    );
    let renders = store
        .renders_between(Timestamp(0), Timestamp(2_000_000_000), 10)
        .await
        .unwrap();
    assert_eq!(renders[0].platform_commit, head);

    // A version bump, a cluster that moves render group with the same versions (content
    // only), one that moves to the canary version, one taken away and one added.
    edit(
        &dir.join("apps/shop.yaml"),
        "version: 1.4.0",
        "version: 1.4.1",
    );
    let emea = dir.join("clusters/emea.yaml");
    edit(
        &emea,
        "id: berlin-02\ngroup: emea/de/berlin\nenvironment: prod\nreconciler: flux\n",
        "id: berlin-02\ngroup: emea/de/berlin\nenvironment: prod\nreconciler: flux\nlabels: {tier: flagship}\n",
    );
    edit(
        &emea,
        "id: munich-01\ngroup: emea/de/munich\nenvironment: prod",
        "id: munich-01\ngroup: emea/de/munich\nenvironment: stage",
    );
    let amer = dir.join("clusters/amer.yaml");
    let text = std::fs::read_to_string(&amer).unwrap();
    let toronto = text.find("---\nkind: Cluster\nid: toronto-01").unwrap();
    std::fs::write(
        &amer,
        format!(
            "{}---\nkind: Cluster\nid: denver-01\ngroup: amer/us/denver\nenvironment: prod\nreconciler: flux\nvalues: {{storeNumber: \"5002\"}}\n",
            &text[..toronto]
        ),
    )
    .unwrap();
    let second = render_and_check(store, dir, out.path(), 2, &mut clusters).await;
    let of = |cluster: &str, app: &str| {
        second
            .iter()
            .find(|r| r.cluster_id == cluster && r.app == app)
            .map(|r| (r.from_version.as_str(), r.to_version.as_str()))
    };
    assert_eq!(of("berlin-01", "checkout"), Some(("1.4.0", "1.4.1")));
    assert_eq!(of("berlin-02", "checkout"), Some(("1.4.0", "1.4.1")));
    assert_eq!(
        of("berlin-02", "payments"),
        None,
        "content alone is no version change"
    );
    assert_eq!(of("munich-01", "checkout"), Some(("1.4.0", "1.5.0-rc.1")));
    assert_eq!(
        of("lab-01", "checkout"),
        None,
        "pinned by the canary policy"
    );
    assert_eq!(of("toronto-01", "payments"), Some(("2.0.1", "")));
    assert_eq!(of("denver-01", "payments"), Some(("", "2.0.1")));

    // An app taken away everywhere, then a render that changes nothing.
    edit(
        &dir.join("policies/baseline.yaml"),
        "values: [shop, platform]",
        "values: [shop]",
    );
    let third = render_and_check(store, dir, out.path(), 3, &mut clusters).await;
    assert!(!third.is_empty());
    assert!(third
        .iter()
        .all(|r| r.app == "metrics-agent" && r.to_version.is_empty()));
    let fourth = render_and_check(store, dir, out.path(), 4, &mut clusters).await;
    assert!(fourth.is_empty(), "{fourth:#?}");

    // Written again (a publication retried), the rows are read once each.
    store.insert_rows(&third).await.unwrap();
    assert_eq!(store.desired_version_changes(None, 2).await.unwrap(), third);
}
