//! The refresher's reads and the object records, tested on rows made here.

use std::collections::BTreeMap;

use fleetscope_store::{ClusterRow, ObservedRow};

use super::arrivals::{bounded_until, observed_source, WRITER_SILENT_AFTER};
use super::*;
use crate::fleet::{Made, Staged};

fn inventory_row(id: &str, env: &str, labels: &[(&str, &str)]) -> ClusterRow {
    ClusterRow {
        cluster_id: id.into(),
        group_path: "emea/de".into(),
        group_prefixes: vec!["emea".into(), "emea/de".into()],
        environment: env.into(),
        reconciler: "flux".into(),
        label_keys: labels.iter().map(|(k, _)| (*k).into()).collect(),
        label_values: labels.iter().map(|(_, v)| (*v).into()).collect(),
        updated_at: 0,
        version: 1,
        removed: 0,
    }
}

#[test]
fn clusters_with_the_same_labels_share_one_copy_across_inventory_reads() {
    let mut fleet = Fleet::default();
    // As the renderer writes them: each cluster's own id among its labels.
    let row = |id: &str, env: &str, tier: &str| {
        inventory_row(
            id,
            env,
            &[("fleetscope.io/cluster", id), ("tier", tier), ("zone", "a")],
        )
    };
    fleet.set_inventory(vec![
        row("a", "prod", "standard"),
        row("b", "stage", "standard"),
        inventory_row("c", "prod", &[("tier", "standard"), ("zone", "a")]),
        inventory_row("d", "prod", &[("zone", "a"), ("tier", "standard")]),
    ]);
    let info = |fleet: &Fleet, id: &str| fleet.clusters[id].info.clone().unwrap();
    // The same labels, in any order, are one list.
    assert!(Arc::ptr_eq(
        &info(&fleet, "c").labels,
        &info(&fleet, "d").labels
    ));
    assert!(!Arc::ptr_eq(
        &info(&fleet, "a").labels,
        &info(&fleet, "b").labels
    ));
    // Every label reads back as given.
    let b = info(&fleet, "b");
    assert_eq!(
        b.labels(&fleet.symbols),
        BTreeMap::from(
            [
                ("fleetscope.io/cluster", "b"),
                ("tier", "standard"),
                ("zone", "a")
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        )
    );
    assert_eq!(b.label("fleetscope.io/cluster", &fleet.symbols), Some("b"));
    assert_eq!(b.label("tier", &fleet.symbols), Some("standard"));
    assert_eq!(b.label("region", &fleet.symbols), None);
    assert_eq!(
        info(&fleet, "c").label("fleetscope.io/cluster", &fleet.symbols),
        None
    );
    // Read again: the list already held is taken over, and one no cluster uses is let go.
    let held = info(&fleet, "c").labels.clone();
    fleet.set_inventory(vec![inventory_row(
        "e",
        "prod",
        &[("tier", "standard"), ("zone", "a")],
    )]);
    assert!(Arc::ptr_eq(&held, &info(&fleet, "e").labels));
    assert_eq!(fleet.upkeep.label_sets.len(), 1);
}

#[test]
fn refresh_reads_arrivals_only_after_a_recent_complete_read() {
    let now = Instant::now() + Duration::from_secs(24 * 3_600);
    assert_eq!(observed_source(None, now), ObservedSource::Latest);
    assert_eq!(
        observed_source(Some(now - Duration::from_secs(1)), now),
        ObservedSource::Arrivals
    );
    assert_eq!(
        observed_source(Some(now - Duration::from_secs(4 * 3_600)), now),
        ObservedSource::Arrivals
    );
    // Past what the arrivals keep (less an hour of margin): read everything again.
    assert_eq!(
        observed_source(Some(now - Duration::from_secs(5 * 3_600)), now),
        ObservedSource::Latest
    );
}

fn horizon(writer: &str, first: u32, visible: u32, silent: i64) -> ArrivalHorizon {
    ArrivalHorizon {
        writer: writer.into(),
        first_stamp: first,
        visible_before: visible,
        silent_seconds: silent,
        published_at: u32::try_from(10_000 - silent).unwrap(),
    }
}

/// Where the cursor has read writer `name` to, and whether it waited for it.
fn read_before(cursor: &ArrivalCursor, name: &str) -> (u32, bool) {
    let read = cursor.writers[name];
    (read.read_before, read.live)
}

/// Reads the cursor chooses over a sequence of horizons, each then marked done.
fn reads(cursor: &mut ArrivalCursor, steps: &[Vec<ArrivalHorizon>]) -> Vec<ArrivalRead> {
    steps
        .iter()
        .map(|h| {
            let read = cursor.next_read(h);
            cursor.advance(h);
            read
        })
        .collect()
}

#[test]
fn arrivals_are_read_from_horizon_to_horizon_without_overlap() {
    let mut cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0)]);
    let between = |from, until| ArrivalRead::Between { from, until };
    assert_eq!(
        reads(
            &mut cursor,
            &[
                vec![horizon("a", 10, 103, 0)],
                vec![horizon("a", 10, 103, 1)],
                vec![horizon("a", 10, 104, 0)],
            ]
        ),
        [between(100, 103), between(103, 103), between(103, 104)]
    );
}

#[test]
fn a_read_bounded_in_rows_stops_between_seconds_and_always_progresses() {
    let per_second = [(100, 4), (101, 3), (103, 5), (107, 1)];
    // Everything fits: up to the horizon.
    assert_eq!(bounded_until(&per_second, 100, 110, 13), 110);
    // After the last whole second within the limit, before the one that would pass it.
    assert_eq!(bounded_until(&per_second, 100, 110, 12), 107);
    assert_eq!(bounded_until(&per_second, 100, 110, 7), 103);
    assert_eq!(bounded_until(&per_second, 100, 110, 6), 101);
    // A first second larger than the limit is read whole: the read still moves on.
    assert_eq!(bounded_until(&per_second, 100, 110, 2), 101);
    assert_eq!(bounded_until(&per_second[2..], 102, 110, 2), 104);
    // Nothing stamped: the horizon.
    assert_eq!(bounded_until(&[], 100, 110, 1), 110);
}

#[test]
fn a_bounded_read_moves_the_writers_to_where_it_stopped() {
    let mut cursor =
        ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0), horizon("b", 10, 120, 0)]);
    let now = [horizon("a", 10, 200, 0), horizon("b", 10, 200, 0)];
    let between = |from, until| ArrivalRead::Between { from, until };
    assert_eq!(cursor.next_read(&now), between(100, 200));
    cursor.advance_to(&now, 110);
    // a is read up to the stop; b was further already and stays where it was.
    assert_eq!(read_before(&cursor, "a"), (110, true));
    assert_eq!(read_before(&cursor, "b"), (120, true));
    assert_eq!(cursor.next_read(&now), between(110, 200));
    cursor.advance_to(&now, 150);
    assert_eq!(read_before(&cursor, "b"), (150, true));
    cursor.advance(&now);
    assert_eq!(read_before(&cursor, "a"), (200, true));
    assert_eq!(read_before(&cursor, "b"), (200, true));
}

#[test]
fn a_new_writer_is_read_from_its_first_stamp_and_holds_the_others_back() {
    let mut cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0)]);
    let between = |from, until| ArrivalRead::Between { from, until };
    assert_eq!(
        reads(
            &mut cursor,
            &[
                // b started at 95 (its clock is behind) and has nothing visible yet.
                vec![horizon("a", 10, 110, 0), horizon("b", 95, 95, 0)],
                // b's rows up to 111 are visible now: read from 95 again.
                vec![horizon("a", 10, 112, 0), horizon("b", 95, 111, 0)],
                vec![horizon("a", 10, 113, 0), horizon("b", 95, 113, 0)],
            ]
        ),
        [between(95, 95), between(95, 111), between(111, 113)]
    );
}

#[test]
fn a_silent_writer_is_not_waited_for_and_is_caught_up_when_back() {
    let mut cursor =
        ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0), horizon("b", 10, 100, 0)]);
    let between = |from, until| ArrivalRead::Between { from, until };
    let silent = WRITER_SILENT_AFTER + 1;
    assert_eq!(
        reads(
            &mut cursor,
            &[
                vec![horizon("a", 10, 101, 0), horizon("b", 10, 101, 0)],
                // b stops publishing at 101 (stalled): a goes on alone.
                vec![horizon("a", 10, 140, 0), horizon("b", 10, 101, silent)],
                vec![horizon("a", 10, 150, 0), horizon("b", 10, 101, silent)],
                // b is back: its rows since 101 are read again.
                vec![horizon("a", 10, 160, 0), horizon("b", 10, 155, 0)],
                vec![horizon("a", 10, 170, 0), horizon("b", 10, 170, 0)],
            ]
        ),
        [
            between(100, 101),
            between(101, 140),
            between(140, 150),
            between(101, 155),
            between(155, 170),
        ]
    );
}

#[test]
fn without_horizons_arrivals_are_read_with_the_overlap() {
    let mut cursor = ArrivalCursor::default();
    assert_eq!(cursor.next_read(&[]), ArrivalRead::Overlap);
    // Writers all silent: the overlap too.
    let silent = WRITER_SILENT_AFTER + 1;
    cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, silent)]);
    assert_eq!(
        cursor.next_read(&[horizon("a", 10, 100, silent)]),
        ArrivalRead::Overlap
    );
}

fn row(cluster: &str, name: &str, seq: u64) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.into(),
        object_kind: "HelmRelease".into(),
        object_namespace: "flux-system".into(),
        object_name: name.into(),
        app: name.into(),
        version: "1.0.0".into(),
        content_hash: String::new(),
        applied_revision: "1.0.0".into(),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: 100,
        observed_at: 100,
        received_at: 100,
        change_seq: seq,
        deleted: 0,
    }
}

#[test]
fn ties_on_the_change_number_resolve_the_same_way_in_any_order() {
    let a = ObservedRow {
        version: "1.1.0".into(),
        ..row("c1", "checkout", 5)
    };
    let b = ObservedRow {
        version: "1.0.0".into(),
        health: "degraded".into(),
        ..row("c1", "checkout", 5)
    };
    let held = |rows: &[&ObservedRow]| {
        let mut fleet = Fleet::default();
        for r in rows {
            let expected = fleet.is_newer(r);
            assert_eq!(fleet.apply_observed(r), expected);
        }
        let object = fleet.parts.unpack(&fleet.clusters["c1"].objects[0]);
        fleet.symbols.text(object.version).to_owned()
    };
    // Same number and arrival second: the content decides ("healthy" > "degraded").
    assert_eq!(held(&[&a, &b]), "1.1.0");
    assert_eq!(held(&[&b, &a]), "1.1.0");
    // Same number, later arrival: the later one.
    let later = ObservedRow {
        received_at: 101,
        ..b.clone()
    };
    assert_eq!(held(&[&a, &later]), "1.0.0");
    assert_eq!(held(&[&later, &a]), "1.0.0");
}

#[test]
fn a_record_gives_back_every_change_number_and_message_it_was_given() {
    let numbers = [
        0,
        1,
        u64::from(u32::MAX),
        1 << 32,
        (1 << 32) + 1,
        u64::MAX - 1,
    ];
    let mut fleet = Fleet::default();
    for (i, seq) in numbers.into_iter().enumerate() {
        let message = format!("message {i}");
        let r = ObservedRow {
            message: message.clone(),
            ..row("c1", "checkout", seq)
        };
        assert!(
            fleet.apply_observed(&r),
            "{seq} is newer than the one before"
        );
        let object = fleet.parts.unpack(&fleet.clusters["c1"].objects[0]);
        assert_eq!(object.seq, seq);
        assert_eq!(fleet.symbols.text(object.message), message);
    }
    // Numbers that differ only in their high half compare as numbers.
    assert!(!fleet.is_newer(&row("c1", "checkout", 1 << 32)));
    assert!(fleet.is_newer(&row("c1", "checkout", u64::MAX)));
}

/// Every object of a fleet, as text.
fn objects_of(fleet: &Fleet) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for (id, cluster) in fleet.clusters.iter() {
        for rec in cluster.objects.iter() {
            let o = fleet.parts.unpack(rec);
            let t = |n: u32| fleet.symbols.text(n).to_owned();
            all.push((
                format!("{id}/{}/{}/{}", o.kind.as_str(), t(o.namespace), t(o.name)),
                format!(
                    "{} {} {} {} {:?} {:?} {} {} {} {} {} {} {}",
                    t(o.app),
                    t(o.version),
                    t(o.content_hash),
                    t(o.revision),
                    o.health,
                    o.sync,
                    t(o.reason),
                    t(o.message),
                    o.transitioned_at,
                    o.observed_at,
                    o.received_at,
                    o.seq,
                    o.deleted
                ),
            ));
        }
    }
    all.sort();
    all
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Staged rows, placed in batches sorted by cluster, make the fleet that applying each
    /// row in the order read makes (duplicates, ties on the change number, deletions and
    /// kinds that are not app objects included).
    #[test]
    fn staged_rows_make_the_fleet_applied_rows_make(
        rows in proptest::collection::vec(
            (0..5usize, 0..4usize, 0..3u64, 0..3u32, 0..3usize, 0..2u8, 0..4usize),
            0..120,
        ),
        limit in 1..40usize,
    ) {
        let kinds = ["HelmRelease", "Kustomization", "Application", "GitRepository"];
        let healths = ["healthy", "progressing", "failed"];
        let rows: Vec<ObservedRow> = rows
            .into_iter()
            .map(|(cluster, name, seq, received, health, deleted, kind)| ObservedRow {
                object_kind: kinds[kind].into(),
                health: healths[health].into(),
                version: format!("1.{health}.0"),
                received_at: 100 + received,
                deleted,
                ..row(&format!("c{cluster}"), &format!("app-{name}"), seq)
            })
            .collect();
        let mut applied = Fleet::default();
        for r in &rows {
            applied.apply_observed(r);
        }
        let mut staged_fleet = Fleet::default();
        let mut staged = Staged::with_limit(limit);
        for r in &rows {
            staged_fleet.stage_observed(&r.borrowed(), &mut staged);
        }
        staged_fleet.place_staged(&mut staged);
        proptest::prop_assert_eq!(objects_of(&staged_fleet), objects_of(&applied));
        proptest::prop_assert_eq!(staged_fleet.objects, applied.objects);
        proptest::prop_assert_eq!(staged_fleet.observed_watermark, applied.observed_watermark);

        // Half the rows made apart (as on the thread reading arrivals) in batches of
        // `limit`, taken between the others.
        let mut mixed = Fleet::default();
        let symbols = mixed.symbols.clone();
        let mut memo = crate::symbols::InternMemo::default();
        let mut made = Made::default();
        let mut staged = Staged::with_limit(limit);
        for (i, r) in rows.iter().enumerate() {
            if i % 2 == 0 {
                mixed.stage_observed(&r.borrowed(), &mut staged);
            } else {
                Fleet::make_object(&symbols, &mut memo, &r.borrowed(), &mut made);
                if made.len() >= limit {
                    mixed.stage_made(std::mem::take(&mut made), &mut staged);
                }
            }
        }
        mixed.stage_made(made, &mut staged);
        mixed.place_staged(&mut staged);
        proptest::prop_assert_eq!(objects_of(&mixed), objects_of(&applied));
        proptest::prop_assert_eq!(mixed.objects, applied.objects);
        proptest::prop_assert_eq!(mixed.observed_watermark, applied.observed_watermark);
    }
}

#[test]
fn only_rows_that_would_change_the_fleet_are_newer() {
    let mut fleet = Fleet::default();
    assert!(fleet.is_newer(&row("c1", "checkout", 5)), "unknown cluster");
    assert!(fleet.apply_observed(&row("c1", "checkout", 5)));
    assert!(
        !fleet.is_newer(&row("c1", "checkout", 5)),
        "already applied"
    );
    assert!(!fleet.is_newer(&row("c1", "checkout", 4)), "older");
    assert!(fleet.is_newer(&row("c1", "checkout", 6)), "a later change");
    assert!(fleet.is_newer(&row("c1", "payments", 1)), "another object");
    assert!(fleet.is_newer(&row("c2", "checkout", 1)), "another cluster");
    assert!(!fleet.is_newer(&ObservedRow {
        object_kind: "Secret".into(),
        ..row("c1", "x", 9)
    }));
    // What is_newer says equals what apply_observed does.
    for (name, seq) in [("checkout", 5), ("checkout", 7), ("payments", 2)] {
        let r = row("c1", name, seq);
        let expected = fleet.is_newer(&r);
        assert_eq!(fleet.apply_observed(&r), expected, "{name} {seq}");
    }
}
