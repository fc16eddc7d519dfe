//! Desired state into a real ClickHouse: what each cluster should run, with reasons and commit;
//! later renders write only what changed, and apps taken away are marked removed.

use fleetscope_model::Timestamp;
use fleetscope_renderer::{desired, render};
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn desired_state_lands_in_clickhouse_incrementally() {
    let test = TestStore::start().await;
    let store = &test.store;
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();

    let first = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &first, 1, Timestamp(1_800_000_000))
        .await
        .unwrap();
    assert_eq!(
        (
            published.desired_rows,
            published.removed_rows,
            published.membership_rows,
            published.cluster_rows
        ),
        (12, 0, 7, 7)
    );
    let lab = store.desired_for_cluster("lab-01").await.unwrap();
    let summary: Vec<(&str, &str, Vec<String>)> = lab
        .iter()
        .map(|r| (r.app.as_str(), r.version.as_str(), r.reasons.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "checkout",
                "1.5.0-rc.1",
                vec![
                    "policy/all-stores".to_owned(),
                    "policy/checkout-canary".to_owned()
                ]
            ),
            (
                "metrics-agent",
                "0.9.3",
                vec!["policy/all-stores".to_owned()]
            ),
            ("payments", "2.0.1", vec!["policy/all-stores".to_owned()]),
        ]
    );
    assert!(lab
        .iter()
        .all(|r| r.commit == first.commit.head && r.content_hash.starts_with("sha256:")));
    assert_eq!(
        store.known_clusters().await.unwrap().len(),
        7,
        "the inventory came with it"
    );

    // Nothing changed: only the render itself is recorded.
    let same = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &same, 2, Timestamp(1_800_000_100))
        .await
        .unwrap();
    assert_eq!(
        (
            published.desired_rows,
            published.removed_rows,
            published.membership_rows,
            published.cluster_rows
        ),
        (0, 0, 0, 0)
    );

    // The metrics agent goes away everywhere: one removal per render group.
    let apps = platform.path().join("policies/baseline.yaml");
    std::fs::write(
        &apps,
        std::fs::read_to_string(&apps)
            .unwrap()
            .replace("values: [shop, platform]", "values: [shop]"),
    )
    .unwrap();
    let without = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &without, 3, Timestamp(1_800_000_200))
        .await
        .unwrap();
    assert!(published.removed_rows >= 1, "{published:?}");
    assert_eq!(
        published.cluster_rows, 0,
        "no cluster's inventory row changed, so none is written again: {published:?}"
    );
    let lab = store.desired_for_cluster("lab-01").await.unwrap();
    assert_eq!(
        lab.iter().map(|r| r.app.as_str()).collect::<Vec<_>>(),
        vec!["checkout", "payments"]
    );
    // Files of the removed app are gone from the work tree too.
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(out.path())
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        status.stdout.is_empty(),
        "work tree matches the commit: {}",
        String::from_utf8_lossy(&status.stdout)
    );
    let leftovers = std::fs::read_dir(out.path().join("render-groups"))
        .unwrap()
        .flat_map(|group| std::fs::read_dir(group.unwrap().path().join("apps")).unwrap())
        .filter(|file| file.as_ref().unwrap().file_name() == "metrics-agent.yaml")
        .count();
    assert_eq!(leftovers, 0);

    // A cluster taken out of the platform repo leaves the inventory, and so is not stale.
    let amer = platform.path().join("clusters/amer.yaml");
    let text = std::fs::read_to_string(&amer).unwrap();
    let toronto = text.find("---\nkind: Cluster\nid: toronto-01").unwrap();
    std::fs::write(&amer, &text[..toronto]).unwrap();
    assert!(store
        .known_clusters()
        .await
        .unwrap()
        .contains(&"toronto-01".to_owned()));
    let fewer = render(platform.path(), out.path()).unwrap();
    desired::publish(store, &fewer, 4, Timestamp(1_800_000_300))
        .await
        .unwrap();
    let known = store.known_clusters().await.unwrap();
    assert!(!known.contains(&"toronto-01".to_owned()), "{known:?}");
    assert!(known.contains(&"austin-01".to_owned()), "{known:?}");
    assert_eq!(known.len(), 6);
    let policy = fleetscope_model::DriftPolicy::default();
    let stale = store
        .stale_clusters(Timestamp(1_800_000_300), &policy, 100)
        .await
        .unwrap();
    assert!(
        stale.iter().all(|c| c.cluster_id != "toronto-01"),
        "{stale:?}"
    );
    assert_eq!(stale.len(), 6, "the others never reported: {stale:?}");
}

/// A render whose commit landed but whose desired state did not reach ClickHouse (it was down,
/// or the flag was forgotten) is published by the next run, though the platform repo did not
/// change; after that, a run publishes nothing.
#[tokio::test]
async fn the_cli_publishes_a_commit_clickhouse_does_not_have_yet() {
    let test = TestStore::start().await;
    let platform = crate::example();
    let out = tempfile::tempdir().unwrap();
    let args = |clickhouse: bool| fleetscope_renderer::args::RenderArgs {
        platform: platform.clone(),
        output: Some(out.path().to_owned()),
        push: false,
        dry_run: false,
        publish_only: false,
        clickhouse_url: clickhouse.then(|| test.server.url()),
        clickhouse_database: test.store.database().to_owned(),
        service: Default::default(),
        command: None,
    };
    fleetscope_renderer::args::run(args(false)).await.unwrap();
    assert_eq!(test.store.last_render_commit().await.unwrap(), None);
    let head = fleetscope_renderer::git::head_commit(&git2::Repository::open(out.path()).unwrap());
    assert!(head.is_some());

    fleetscope_renderer::args::run(args(true)).await.unwrap();
    assert_eq!(test.store.last_render_commit().await.unwrap(), head);
    assert_eq!(
        test.store
            .desired_for_cluster("lab-01")
            .await
            .unwrap()
            .len(),
        3
    );
    let renders = test
        .store
        .count_rows::<fleetscope_store::RenderRow>()
        .await
        .unwrap();
    assert_eq!(renders, 1);

    fleetscope_renderer::args::run(args(true)).await.unwrap();
    assert_eq!(
        test.store
            .count_rows::<fleetscope_store::RenderRow>()
            .await
            .unwrap(),
        1,
        "up to date everywhere: nothing published again"
    );
}

/// What the store holds as current reason sets and reason set membership, as the renderer's
/// own maps: reason set → app → (reasons, pin), and cluster → reason set.
type StoredReasons = (
    std::collections::BTreeMap<String, Vec<(String, Vec<String>, String)>>,
    std::collections::BTreeMap<String, String>,
);

async fn stored_reasons(store: &fleetscope_store::Store) -> StoredReasons {
    let mut sets: std::collections::BTreeMap<String, Vec<(String, Vec<String>, String)>> =
        Default::default();
    for row in store.reason_set_rows().await.unwrap() {
        if row.removed == 0 {
            sets.entry(row.reason_set)
                .or_default()
                .push((row.app, row.reasons, row.pinned_by));
        }
    }
    let members = store
        .current_reason_members()
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.removed == 0)
        .map(|m| (m.cluster_id, m.reason_set))
        .collect();
    (sets, members)
}

fn expected_reasons(outcome: &fleetscope_renderer::RenderOutcome) -> StoredReasons {
    let sets = outcome
        .assigned
        .reason_sets
        .iter()
        .filter(|(_, apps)| !apps.is_empty())
        .map(|(name, apps)| {
            let apps = apps
                .iter()
                .map(|a| {
                    (
                        a.app.to_string(),
                        a.reasons.clone(),
                        a.pinned_by.clone().unwrap_or_default(),
                    )
                })
                .collect();
            (name.clone(), apps)
        })
        .collect();
    let members = outcome
        .assigned
        .reason_set_of
        .iter()
        .map(|(cluster, set)| (cluster.to_string(), set.clone()))
        .collect();
    (sets, members)
}

/// Reason sets are published once per distinct explanation, only when they appear or go, and
/// each cluster's reason set only when it changes; the store's current state is always the
/// render's.
#[tokio::test]
async fn reason_sets_are_published_incrementally() {
    let test = TestStore::start().await;
    let store = &test.store;
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();

    let first = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &first, 1, Timestamp(1_800_000_000))
        .await
        .unwrap();
    let app_rows: usize = first.assigned.reason_sets.values().map(Vec::len).sum();
    assert_eq!(
        (published.reason_set_rows, published.reason_member_rows),
        (app_rows, 7)
    );
    assert!(
        first.assigned.reason_sets.len() < 7,
        "clusters share reason sets"
    );
    assert_eq!(stored_reasons(store).await, expected_reasons(&first));

    let same = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &same, 2, Timestamp(1_800_000_100))
        .await
        .unwrap();
    assert_eq!(
        (published.reason_set_rows, published.reason_member_rows),
        (0, 0)
    );

    // A pin of payments to its default version in Austin: nothing renders differently, but
    // Austin's explanation changes (a new reason set); one no cluster has any more must be
    // marked removed for the store to equal the render.
    let policies = platform.path().join("policies/baseline.yaml");
    std::fs::write(
        &policies,
        std::fs::read_to_string(&policies).unwrap()
            + "---\nkind: Policy\nname: austin-hold\npriority: 30\napps: {names: [payments]}\nclusters: {groups: [amer/us/austin]}\nversion: 2.0.1\n",
    )
    .unwrap();
    let pinned = render(platform.path(), out.path()).unwrap();
    let published = desired::publish(store, &pinned, 3, Timestamp(1_800_000_200))
        .await
        .unwrap();
    assert!(published.reason_member_rows >= 1, "{published:?}");
    assert_eq!(
        published.desired_rows, 0,
        "a pin to the default version renders nothing new"
    );
    let (sets, members) = stored_reasons(store).await;
    assert_eq!((sets.clone(), members.clone()), expected_reasons(&pinned));
    let austin = &sets[&members["austin-01"]];
    assert!(
        austin.contains(&(
            "payments".to_owned(),
            vec![
                "policy/all-stores".to_owned(),
                "policy/austin-hold".to_owned()
            ],
            "austin-hold".to_owned()
        )),
        "{austin:?}"
    );
}
