use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn change(render_id: u64, cluster: &str, from: &str, to: &str) -> DesiredVersionChangeRow {
    DesiredVersionChangeRow {
        app: "web".into(),
        render_id,
        cluster_id: cluster.into(),
        from_version: from.into(),
        to_version: to.into(),
    }
}

/// The change rows that take the clusters from `before` to `after` (cluster → version).
fn changes_between(
    render_id: u64,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<DesiredVersionChangeRow> {
    let clusters: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    clusters
        .into_iter()
        .filter_map(|c| {
            let from = before.get(c).map_or("", String::as_str);
            let to = after.get(c).map_or("", String::as_str);
            (from != to).then(|| change(render_id, c, from, to))
        })
        .collect()
}

fn find<'a>(rollouts: &'a Rollouts, render_id: u64, version: &str) -> &'a Rollout {
    let app = &rollouts.apps["web"];
    app.rollouts
        .iter()
        .find(|r| r.render_id == render_id && r.version == version)
        .unwrap_or_else(|| panic!("a rollout of {version} by render {render_id}"))
}

#[test]
fn waves_a_join_a_rollback_and_a_removal() {
    let mut rows = Vec::new();
    for c in ["a", "b", "c", "d", "e", "f"] {
        rows.push(change(1, c, "", "1.0"));
    }
    // Three waves of 2.0.
    for (render, clusters) in [(2, ["a", "b"]), (3, ["c", "d"]), (4, ["e", "f"])] {
        for c in clusters {
            rows.push(change(render, c, "1.0", "2.0"));
        }
    }
    // A new cluster while 2.0 is out: it joins the newest rollout of 2.0.
    rows.push(change(5, "g", "", "2.0"));
    // The last wave rolled back, and `a` taken away.
    for c in ["e", "f", "g"] {
        rows.push(change(6, c, "2.0", "1.0"));
    }
    rows.push(change(7, "a", "2.0", ""));
    let web = &from_rows(&rows);

    let first = find(web, 1, "1.0");
    assert_eq!(first.targeted_at_start, 6);
    assert_eq!(first.from_versions, BTreeMap::from([(String::new(), 6)]));
    assert_eq!((first.superseded, first.first_superseded_by), (6, Some(2)));
    assert_eq!(first.targeted_now(), 0);

    for (render, wave) in [(2, "first"), (3, "second"), (4, "third")] {
        let rollout = find(web, render, "2.0");
        assert_eq!(rollout.targeted_at_start, 2, "{wave} wave");
        assert_eq!(
            rollout.from_versions,
            BTreeMap::from([("1.0".to_owned(), 2)])
        );
    }
    let third = find(web, 4, "2.0");
    assert_eq!(
        third.joined, 1,
        "g joined the newest rollout of its version"
    );
    assert_eq!(
        (third.rolled_back, third.first_rolled_back_by),
        (3, Some(6))
    );
    assert_eq!(third.targeted_now(), 0);
    assert_eq!(
        web.apps["web"]
            .rollouts
            .iter()
            .filter(|r| r.render_id == 5)
            .count(),
        0,
        "a join starts no rollout"
    );

    let back = find(web, 6, "1.0");
    assert_eq!(back.from_versions, BTreeMap::from([("2.0".to_owned(), 3)]));
    let first_wave = find(web, 2, "2.0");
    assert_eq!((first_wave.removed, first_wave.targeted_now()), (1, 1));
    assert_eq!(web.owner_of("web", "a"), None);
    assert_eq!(web.owner_of("web", "b"), Some(first_wave));
    assert_eq!(web.owner_of("web", "e"), Some(back));
}

#[test]
fn a_version_nobody_had_is_a_rollout_of_its_own_even_from_nothing() {
    let rows = vec![
        change(1, "a", "", "1.0"),
        change(2, "b", "", "1.1"),
        change(3, "c", "", "1.0"),
    ];
    let web = &from_rows(&rows);
    assert_eq!(find(web, 2, "1.1").targeted_at_start, 1);
    assert_eq!(find(web, 1, "1.0").joined, 1);
    assert_eq!(web.apps["web"].rollouts.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever renders come, the records agree with the fleet as it ends: every cluster that
    /// desires the app belongs to one rollout, of the version it desires; each rollout's
    /// clusters now are the ones that belong to it; and every cluster a render moved is counted
    /// once at a start or as a join.
    #[test]
    fn records_agree_with_the_fleet_they_end_in(
        renders in prop::collection::vec(
            prop::collection::vec(prop::option::of(0u8..3), 6),
            1..8,
        )
    ) {
        let mut state: BTreeMap<String, String> = BTreeMap::new();
        let mut rows = Vec::new();
        let mut moves = 0u32;
        for (i, versions) in renders.iter().enumerate() {
            let next: BTreeMap<String, String> = versions
                .iter()
                .enumerate()
                .filter_map(|(c, v)| v.map(|v| (format!("c{c}"), format!("1.{v}"))))
                .collect();
            let changed = changes_between(i as u64 + 1, &state, &next);
            moves += changed.iter().filter(|r| !r.to_version.is_empty()).count() as u32;
            rows.extend(changed);
            state = next;
        }
        let all = from_rows(&rows);
        let web = all.apps.get("web").cloned().unwrap_or_default();
        let owners: BTreeMap<String, usize> = web
            .owners()
            .map(|(n, index)| (all.clusters.name(n).to_owned(), index))
            .collect();
        prop_assert_eq!(
            owners.keys().cloned().collect::<Vec<_>>(),
            state.keys().cloned().collect::<Vec<_>>()
        );
        for (cluster, index) in &owners {
            prop_assert_eq!(&web.rollouts[*index].version, &state[cluster]);
        }
        for (index, rollout) in web.rollouts.iter().enumerate() {
            let owned = owners.values().filter(|i| **i == index).count() as u32;
            prop_assert_eq!(rollout.targeted_now(), owned, "{:?}", rollout);
        }
        let counted: u32 = web.rollouts.iter().map(|r| r.targeted_at_start + r.joined).sum();
        prop_assert_eq!(counted, moves);
    }
}
