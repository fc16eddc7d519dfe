//! The group cells: chunked per-app counters, shared cells, and counting by difference
//! against counting from scratch.

use super::*;

fn counted(prefixes: &[u32], env: u32, stale: bool, pairs: &[(u32, DriftState)]) -> Counted {
    Counted::new(
        prefixes.to_vec(),
        env,
        stale,
        pairs
            .iter()
            .map(|(app, state)| {
                CountedPair::new(
                    *app,
                    *state,
                    Some(100 + app),
                    (*state != DriftState::Missing).then_some(200 + app),
                )
            })
            .collect(),
        None,
    )
}

#[test]
fn a_counted_pair_takes_12_bytes_and_keeps_its_app_and_state() {
    assert_eq!(size_of::<CountedPair>(), 12);
    for (i, state) in DriftState::ALL.iter().enumerate() {
        let app = [0, 1, 12_345, (1 << STATE_SHIFT) - 1][i % 4];
        let pair = CountedPair::new(app, *state, None, Some(3));
        assert_eq!((pair.app(), pair.state()), (app, *state));
    }
    assert_eq!(size_of::<AppCell>(), 64);
    let pair = CountedPair::new(1, DriftState::Missing, Some(7), None);
    assert_eq!(
        (pair.desired_version(), pair.observed_version()),
        (Some(7), None)
    );
}

/// A cluster of group `prefixes` with a pair of every app in `apps`, each in sync.
fn with_apps(prefixes: &[u32], apps: impl Iterator<Item = u32>) -> Counted {
    let pairs: Vec<(u32, DriftState)> = apps.map(|a| (a, DriftState::InSync)).collect();
    counted(prefixes, 7, false, &pairs)
}

fn check_chunks(cell: &Cell) {
    let apps: Vec<u32> = cell.apps().map(|(a, _)| a).collect();
    assert!(apps.windows(2).all(|w| w[0] < w[1]), "sorted: {apps:?}");
    assert!(cell
        .chunks
        .iter()
        .all(|c| !c.is_empty() && c.len() <= CELL_CHUNK));
}

#[test]
fn a_cell_chunks_its_apps_and_reads_back_what_it_counted() {
    // Apps counted in and out in a scrambled order: the chunked cell always equals one
    // counted from scratch, keeps its chunks sorted, none empty or over-full.
    let order: Vec<u32> = (0..120u32).map(|i| (i * 37) % 120).collect();
    let mut cells = Cells::new();
    let mut present: Vec<Counted> = Vec::new();
    for app in &order {
        let c = with_apps(&[0], std::iter::once(*app));
        apply(&mut cells, &c, true);
        present.push(c);
        check_chunks(&cells[&(0, 7)]);
    }
    assert_eq!(cells, from_scratch(&present));
    assert!(cells[&(0, 7)].chunks.len() >= 120 / CELL_CHUNK);
    for app in [5u32, 0, 119, 64, 65, 66, 67] {
        assert!(cells[&(0, 7)].app(app).is_some());
    }
    assert!(cells[&(0, 7)].app(500).is_none());
    for (k, app) in order.iter().enumerate().rev().step_by(3) {
        let at = present.iter().position(|c| c.pair(*app).is_some()).unwrap();
        apply(&mut cells, &present.remove(at), false);
        check_chunks(&cells[&(0, 7)]);
        assert!(cells[&(0, 7)].app(*app).is_none(), "step {k}");
    }
    assert_eq!(cells, from_scratch(&present));
}

#[test]
fn one_changed_pair_copies_one_chunk_of_a_shared_cell() {
    let before = with_apps(&[0, 1], 0..100);
    let mut cells = from_scratch([&before]);
    // Apps counted in symbol order fill their chunks: all but the last are full.
    let chunks = &cells[&(0, 7)].chunks;
    assert_eq!(chunks.len(), 100usize.div_ceil(CELL_CHUNK));
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c.len() == CELL_CHUNK));
    let published = cells.clone();
    let mut pairs: Vec<CountedPair> = before.pairs().copied().collect();
    pairs[40] = CountedPair::new(40, DriftState::OutOfSync, Some(999), Some(240));
    let after = Counted::new(vec![0, 1], 7, false, pairs, Some(&before));
    // The cluster's new record shares all but one of its chunks of pairs.
    let shared = |a: &Counted, b: &Counted| {
        a.chunks
            .iter()
            .zip(b.chunks.iter())
            .filter(|(x, y)| Arc::ptr_eq(x, y))
            .count()
    };
    assert!(Arc::ptr_eq(&after.prefixes, &before.prefixes));
    assert_eq!(shared(&before, &after), before.chunks.len() - 1);
    replace(&mut cells, Some(&before), Some(&after));
    assert_eq!(cells, from_scratch([&after]));
    for key in [(0, 7), (1, 7)] {
        let (old, new) = (&published[&key], &cells[&key]);
        let kept = old
            .chunks
            .iter()
            .zip(new.chunks.iter())
            .filter(|(x, y)| Arc::ptr_eq(x, y))
            .count();
        assert_eq!(kept, old.chunks.len() - 1, "cell {key:?}");
        assert_eq!(
            new.app(40).unwrap().versions(Side::Desired).next(),
            Some((999, 1))
        );
        assert_eq!(
            old.app(40).unwrap().versions(Side::Desired).next(),
            Some((140, 1))
        );
    }
    // Counted again unchanged, the record is the same chunks.
    let again = Counted::new(
        vec![0, 1],
        7,
        false,
        after.pairs().copied().collect(),
        Some(&after),
    );
    assert_eq!(shared(&after, &again), after.chunks.len());
    assert!(changed_pairs(&after, &again).is_empty());
}

#[test]
fn adding_then_taking_out_leaves_nothing() {
    let a = counted(
        &[0, 1, 2],
        7,
        false,
        &[(10, DriftState::InSync), (11, DriftState::Missing)],
    );
    let b = counted(&[0, 1, 3], 8, true, &[(10, DriftState::Stale)]);
    let mut cells = Cells::new();
    apply(&mut cells, &a, true);
    apply(&mut cells, &b, true);
    let fleet = &cells[&(0, ANY_ENVIRONMENT)];
    assert_eq!(fleet.counts.clusters, 2);
    assert_eq!(fleet.counts.stale_clusters, 1);
    assert_eq!(
        fleet.app(10).unwrap().pairs()[state_index(DriftState::InSync)],
        1
    );
    let versions = |app: u32, side| fleet.app(app).unwrap().versions(side).collect::<Vec<_>>();
    assert_eq!(versions(10, Side::Desired), vec![(110, 2)]);
    assert_eq!(versions(10, Side::Running), vec![(210, 2)]);
    assert_eq!(versions(11, Side::Desired), vec![(111, 1)]);
    assert_eq!(versions(11, Side::Running), vec![]);
    assert_eq!(cells[&(2, 7)].counts.clusters, 1);
    assert!(!cells.contains_key(&(2, 8)));
    apply(&mut cells, &a, false);
    assert_eq!(cells, from_scratch([&b]));
    apply(&mut cells, &b, false);
    assert!(cells.is_empty());
}

#[test]
fn a_single_environment_shares_its_cell_with_all_environments_until_another_comes() {
    use DriftState::*;
    let a = counted(&[0, 1], 7, false, &[(10, InSync), (11, Missing)]);
    let b = counted(&[0, 1], 7, false, &[(10, OutOfSync)]);
    let mut cells = from_scratch([&a, &b]);
    let shared = |cells: &Cells, prefix| {
        Arc::ptr_eq(&cells[&(prefix, 7)], &cells[&(prefix, ANY_ENVIRONMENT)])
    };
    assert!(shared(&cells, 0) && shared(&cells, 1));
    // A change counted once, seen under both keys, and still one cell.
    let b2 = counted(&[0, 1], 7, true, &[(10, InSync), (12, Progressing)]);
    replace(&mut cells, Some(&b), Some(&b2));
    assert_eq!(cells, from_scratch([&a, &b2]));
    assert!(shared(&cells, 1));
    assert_eq!(cells[&(1, ANY_ENVIRONMENT)].counts.stale_clusters, 1);
    // Another environment in group 1: its cells of all environments go their own way.
    let c = counted(&[0, 1], 8, false, &[(10, Failed)]);
    apply(&mut cells, &c, true);
    assert_eq!(cells, from_scratch([&a, &b2, &c]));
    assert!(!shared(&cells, 1));
    assert_eq!(cells[&(1, ANY_ENVIRONMENT)].counts.clusters, 3);
    assert_eq!(cells[&(1, 7)].counts.clusters, 2);
    // Changing the single-environment cluster again changes only what it counts in.
    let a2 = counted(&[0, 1], 7, false, &[(10, InSync), (11, InSync)]);
    replace(&mut cells, Some(&a), Some(&a2));
    assert_eq!(cells, from_scratch([&a2, &b2, &c]));
    // Everything taken out leaves nothing, shared or not.
    for cluster in [&a2, &b2, &c] {
        apply(&mut cells, cluster, false);
    }
    assert!(cells.is_empty());
}

#[test]
fn replacing_equals_counting_from_scratch() {
    use DriftState::*;
    let before = [
        counted(&[0, 1, 2], 7, false, &[(10, InSync), (11, Missing)]),
        counted(&[0, 1, 3], 8, true, &[(10, Stale)]),
        counted(&[0, 1, 2], 7, false, &[(11, InSync), (12, OutOfSync)]),
    ];
    // Each cluster in turn: a state changed, an app gone and one new, stale no more, only
    // stale no more, nothing changed, a move to another group and environment, out of the
    // inventory.
    let afters = [
        Some(counted(&[0, 1, 2], 7, false, &[(10, InSync), (11, InSync)])),
        Some(counted(&[0, 1, 3], 8, false, &[(12, Progressing)])),
        Some(counted(&[0, 1, 3], 8, false, &[(10, Stale)])),
        Some(before[2].clone()),
        Some(counted(&[0, 4], 9, true, &[(11, InSync), (12, OutOfSync)])),
        None,
    ];
    for (i, after) in afters.iter().enumerate() {
        for (j, old) in before.iter().enumerate() {
            let mut cells = from_scratch(&before);
            replace(&mut cells, Some(old), after.as_ref());
            let expected = from_scratch(
                before
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != j)
                    .map(|(_, c)| c)
                    .chain(after.as_ref()),
            );
            assert_eq!(cells, expected, "cluster {j} becoming case {i}");
        }
    }
    let mut cells = Cells::new();
    replace(&mut cells, None, Some(&before[0]));
    assert_eq!(cells, from_scratch([&before[0]]));
}

/// Which keys hold the same cell as the key of all environments of their prefix.
fn shared_keys(cells: &Cells) -> Vec<(u32, u32)> {
    let mut keys: Vec<(u32, u32)> = cells
        .iter()
        .filter(|((prefix, environment), one)| {
            *environment != ANY_ENVIRONMENT
                && cells
                    .get(&(*prefix, ANY_ENVIRONMENT))
                    .is_some_and(|all| Arc::ptr_eq(one, all))
        })
        .map(|(key, _)| *key)
        .collect();
    keys.sort_unstable();
    keys
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Cells built at once equal the cells of counting each cluster in one by one, shared
    /// between an environment and all environments where those are (groups nested and
    /// not, several environments in a prefix and one, stale clusters, pairs without a
    /// desired or a running version, apps a group's clusters do not all have).
    #[test]
    fn cells_built_at_once_equal_cells_counted_one_by_one(
        clusters in proptest::collection::vec(
            (
                0..5usize,
                0..3u32,
                proptest::bool::ANY,
                proptest::collection::btree_map(0..40u32, (0..8usize, 0..4u32, 0..4u32), 0..12),
            ),
            0..60,
        ),
    ) {
        // The fleet (0), two regions (1, 2), two groups in region 1 (3, 4), one in 2 (5).
        let groups: [&[u32]; 5] = [&[0], &[0, 1], &[0, 1, 3], &[0, 1, 4], &[0, 2, 5]];
        let counted: Vec<Counted> = clusters
            .iter()
            .map(|(group, environment, stale, pairs)| {
                Counted::new(
                    groups[*group].to_vec(),
                    100 + environment,
                    *stale,
                    pairs
                        .iter()
                        .map(|(app, (state, desired, running))| {
                            CountedPair::new(
                                *app,
                                DriftState::ALL[*state],
                                (*desired > 0).then_some(200 + desired),
                                (*running > 0).then_some(200 + running),
                            )
                        })
                        .collect(),
                    None,
                )
            })
            .collect();
        let one_by_one = from_scratch(&counted);
        let built = build(&counted);
        proptest::prop_assert_eq!(&built, &one_by_one);
        proptest::prop_assert_eq!(shared_keys(&built), shared_keys(&one_by_one));
        for cell in built.values() {
            check_chunks(cell);
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// A pass over clusters with one hint finds each cluster's pair of the app exactly as the
    /// search without a hint does, whether the clusters hold the same apps (the hint right),
    /// others (the app in another chunk or place) or not the app at all, across chunks.
    #[test]
    fn a_hinted_lookup_finds_what_the_search_finds(
        clusters in proptest::collection::vec(
            proptest::collection::btree_set(0..120u32, 0..110),
            1..20,
        ),
        apps in proptest::collection::vec(0..125u32, 1..6),
    ) {
        let counted: Vec<Counted> = clusters
            .iter()
            .map(|apps| {
                let pairs: Vec<(u32, DriftState)> = apps
                    .iter()
                    .map(|app| (*app, DriftState::ALL[*app as usize % 8]))
                    .collect();
                counted(&[0], 1, false, &pairs)
            })
            .collect();
        for app in apps {
            let mut hint = PairHint::default();
            for cluster in &counted {
                let near = cluster.pair_near(app, &mut hint).copied();
                proptest::prop_assert_eq!(near, cluster.pair(app).copied());
                if let Some(pair) = near {
                    proptest::prop_assert_eq!(pair.app(), app);
                    proptest::prop_assert_eq!(
                        cluster.chunks[hint.chunk][hint.at], pair,
                        "the hint is where the pair was found"
                    );
                }
            }
        }
    }
}
