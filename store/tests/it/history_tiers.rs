//! Checkpoints thinned by age, with retention and the trimming of arrivals run as the collector
//! runs them: every moment from the oldest checkpoint kept on is still answered exactly. Nine
//! days of random changes (late and out-of-order ones, deletions) on a few clusters, hourly
//! checkpoints, then the default tiers, retention and trimming; answers at moments in every tier
//! (whole fleet, one cluster, one app), from the arrivals kept for the hourly tier and from
//! `observed_transitions` before it, equal each object's newest row received by then, computed
//! from every row written.

use std::collections::BTreeMap;

use fleetscope_model::Timestamp;
use fleetscope_store::past::{ObservedPart, ObservedScope, WindowSource};
use fleetscope_store::thinning::CheckpointTiers;
use fleetscope_store::{ObservedRef, ObservedRow};
use fleetscope_testkit::TestStore;

const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
/// Midnight UTC.
const DAY0: i64 = 20_834 * DAY;
const DAYS: i64 = 9;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

type ObjectKey = (String, String, String, String);

/// What decides which of an object's rows is newest (the store's `OBSERVED_ORDER`; the text
/// columns nested, in order, which compares the same).
type OrderKey = (u64, u32, u8, [String; 8], u32, u32);

fn order_key(row: &ObservedRef<'_>) -> OrderKey {
    (
        row.change_seq,
        row.received_at,
        row.deleted,
        [
            row.health,
            row.sync,
            row.version,
            row.content_hash,
            row.applied_revision,
            row.app,
            row.reason,
            row.message,
        ]
        .map(str::to_owned),
        row.transitioned_at,
        row.observed_at,
    )
}

fn object_key(row: &ObservedRef<'_>) -> ObjectKey {
    (
        row.cluster_id.to_owned(),
        row.object_kind.to_owned(),
        row.object_namespace.to_owned(),
        row.object_name.to_owned(),
    )
}

/// Random changes over the days: per object a run of changes with rising change numbers,
/// received at random moments; a tenth arrive hours late, after newer ones.
fn history(rng: &mut Rng) -> Vec<ObservedRow> {
    let mut rows = Vec::new();
    for cluster in 0..6 {
        for (object, (kind, app)) in [
            ("HelmRelease", "checkout"),
            ("Kustomization", "cart"),
            ("Application", "search"),
            ("GitRepository", ""),
        ]
        .into_iter()
        .enumerate()
        {
            let mut seq = 0;
            let changes = 20 + rng.below(40);
            for _ in 0..changes {
                seq += 1 + rng.below(3);
                let mut received = DAY0 + rng.below((DAYS * DAY) as u64) as i64;
                if rng.below(10) == 0 {
                    received = (received + 3 * HOUR + rng.below(20 * HOUR as u64) as i64)
                        .min(DAY0 + DAYS * DAY - 1);
                }
                let health = ["healthy", "progressing", "degraded"][rng.below(3) as usize];
                rows.push(ObservedRow {
                    cluster_id: format!("c{cluster}"),
                    object_kind: kind.into(),
                    object_namespace: "shop".into(),
                    object_name: format!("o{object}"),
                    app: app.into(),
                    version: format!("1.{}.0", rng.below(4)),
                    content_hash: format!("h{}", rng.below(4)),
                    applied_revision: format!("r{seq}"),
                    health: health.into(),
                    sync: "synced".into(),
                    reason: String::new(),
                    message: format!("change {seq}"),
                    transitioned_at: received as u32,
                    observed_at: (received - rng.below(600) as i64) as u32,
                    received_at: received as u32,
                    change_seq: seq,
                    deleted: u8::from(rng.below(15) == 0),
                });
            }
        }
    }
    // Stamped by its agent before the midnight that becomes the oldest moment kept, received
    // after it.
    let mut late = rows[0].clone();
    late.change_seq = 1_000;
    late.observed_at = (DAY0 + DAY - 300) as u32;
    late.received_at = (DAY0 + DAY + 120) as u32;
    late.message = "stamped the day before".into();
    rows.push(late);
    // Answered from `observed_transitions` (partitioned by the agent's day): one spooled by its
    // agent for two days, one stamped by a clock 20 hours ahead.
    let of = |cluster: &str, kind: &str| {
        rows.iter()
            .find(|row| row.cluster_id == cluster && row.object_kind == kind)
            .cloned()
            .unwrap()
    };
    let mut spooled = of("c1", "Kustomization");
    spooled.change_seq = 1_000;
    spooled.deleted = 0;
    spooled.received_at = (DAY0 + 4 * DAY + 5 * HOUR) as u32;
    spooled.observed_at = spooled.received_at - 2 * DAY as u32;
    spooled.message = "spooled for two days".into();
    let mut ahead = of("c2", "Application");
    ahead.change_seq = 1_000;
    ahead.deleted = 0;
    ahead.received_at = (DAY0 + 4 * DAY + 5 * HOUR + 60) as u32;
    ahead.observed_at = ahead.received_at + 20 * HOUR as u32;
    ahead.message = "stamped ahead".into();
    rows.push(spooled);
    rows.push(ahead);
    rows
}

/// Each app object's newest row received at or before `at`, of one cluster or all.
fn expected(rows: &[ObservedRow], at: i64, cluster: Option<&str>) -> BTreeMap<ObjectKey, OrderKey> {
    let mut newest: BTreeMap<ObjectKey, OrderKey> = BTreeMap::new();
    for row in rows.iter().filter(|row| {
        i64::from(row.received_at) <= at
            && row.object_kind != "GitRepository"
            && cluster.is_none_or(|c| row.cluster_id == c)
    }) {
        let row = row.borrowed();
        let key = order_key(&row);
        let entry = newest
            .entry(object_key(&row))
            .or_insert_with(|| key.clone());
        if key > *entry {
            *entry = key;
        }
    }
    newest
}

/// [`expected`] of the objects of one app (each object here keeps its app).
fn expected_of_app(rows: &[ObservedRow], at: i64, app: &str) -> BTreeMap<ObjectKey, OrderKey> {
    let mut newest = expected(rows, at, None);
    newest.retain(|_, key| key.3[5] == app);
    newest
}

/// The answer at `at` for `scope`, with the window read where the store reads it (`None`) or
/// from `source`; and the checkpoint it started from.
async fn answered(
    store: &fleetscope_store::Store,
    at: i64,
    scope: ObservedScope<'_>,
    source: Option<WindowSource>,
) -> (Timestamp, BTreeMap<ObjectKey, OrderKey>) {
    let at = Timestamp(at);
    let base = store
        .checkpoints()
        .await
        .unwrap()
        .base_for(at)
        .expect("a checkpoint at or before every moment from the oldest on");
    let source = match source {
        Some(source) => source,
        None => store.window_source(base, scope).await.unwrap(),
    };
    let mut newest: BTreeMap<ObjectKey, OrderKey> = BTreeMap::new();
    store
        .observed_at_from(base, at, scope, ObservedPart::Both, source, |row| {
            let key = order_key(&row);
            let entry = newest
                .entry(object_key(&row))
                .or_insert_with(|| key.clone());
            if key > *entry {
                *entry = key;
            }
        })
        .await
        .unwrap();
    (base, newest)
}

#[tokio::test]
async fn answers_at_moments_in_every_tier_equal_a_full_recomputation() {
    let test = TestStore::start().await;
    let store = &test.store;
    let mut rng = Rng(35);
    let rows = history(&mut rng);
    store.insert_rows(&rows).await.unwrap();

    // Hourly checkpoints over the nine days, as the collector takes them.
    let now = Timestamp(DAY0 + DAYS * DAY + HOUR);
    let mut at = DAY0;
    while at <= now.seconds() {
        store.take_checkpoint(Timestamp(at)).await.unwrap();
        at += HOUR;
    }
    let hourly = store.checkpoints().await.unwrap().taken.len();
    assert_eq!(hourly as i64, DAYS * 24 + 2);

    // The collector's upkeep: thinning, retention keeping 9 days (day 0 goes), the trimming
    // of arrivals.
    let tiers = CheckpointTiers::default();
    let thinned = store.thin_checkpoints(now, &tiers).await.unwrap();
    store.apply_retention(now, 9).await.unwrap();
    store.trim_arrivals(now, &tiers).await.unwrap();
    let kept: Vec<i64> = store
        .checkpoints()
        .await
        .unwrap()
        .taken
        .iter()
        .map(|t| t.seconds() - DAY0)
        .collect();
    // Day 0 is past retention; day 1 ended 7 days before `now`: its midnight alone; days 2–6
    // ended 48 hours or more before: every 6 hours; days 7, 8 and the two hours of day 9:
    // every hour.
    let mut want = vec![DAY];
    for day in 2..=6 {
        want.extend((0..4).map(|k| day * DAY + k * 6 * HOUR));
    }
    want.extend((7 * 24..=9 * 24 + 1).map(|h| h * HOUR));
    assert_eq!(kept, want);
    assert_eq!(
        thinned.len(),
        2 * 23 + 5 * 20,
        "days 0 and 1 lost 23 each (day 0's midnight was the oldest, and retention took it), days 2–6 lost 20 each"
    );

    // The thinned checkpoints' rows are deleted once the mutations finish.
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(store.database())
        .with_validation(false);
    let mut waited = 0;
    loop {
        let pending: u64 = client
            .query("SELECT count() FROM system.mutations WHERE database = ? AND NOT is_done")
            .bind(store.database())
            .fetch_one()
            .await
            .unwrap();
        if pending == 0 {
            break;
        }
        waited += 1;
        assert!(
            waited < 600,
            "the thinning mutations did not finish in 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let moments_stored: Vec<u32> = client
        .query("SELECT DISTINCT toUInt32(taken_at) AS t FROM observed_checkpoints ORDER BY t")
        .fetch_all()
        .await
        .unwrap();
    let moments_stored: Vec<i64> = moments_stored
        .into_iter()
        .map(|t| i64::from(t) - DAY0)
        .collect();
    assert_eq!(moments_stored, want, "only the kept checkpoints have rows");

    // Moments in every tier: on kept checkpoints, on thinned ones, just after either, and at
    // random; whole fleet and one cluster.
    let oldest = DAY0 + DAY;
    let mut moments = vec![
        oldest,
        oldest + 1,
        DAY0 + DAY + 23 * HOUR + 59 * 60,
        DAY0 + 3 * DAY + 5 * HOUR,
        DAY0 + 3 * DAY + 6 * HOUR,
        DAY0 + 3 * DAY + 11 * HOUR + 1_800,
        DAY0 + 7 * DAY + 13 * HOUR + 17,
        now.seconds(),
    ];
    moments.extend((0..30).map(|_| oldest + rng.below((now.seconds() - oldest) as u64) as i64));
    // Arrivals are kept from an hour before the hourly tier (day 7) on; moments whose
    // checkpoint is older are answered from `observed_transitions`.
    let hourly_from = DAY0 + 7 * DAY;
    assert_eq!(
        tiers.hourly_from(now).map(|t| t.seconds()),
        Some(hourly_from)
    );
    let oldest_arrival: u32 = client
        .query("SELECT min(received_at) FROM observed_arrivals")
        .fetch_one()
        .await
        .unwrap();
    assert!(
        i64::from(oldest_arrival) >= hourly_from - HOUR,
        "arrivals from {} on are dropped",
        i64::from(oldest_arrival) - DAY0
    );
    moments.extend([
        DAY0 + 4 * DAY + 5 * HOUR + 30,
        DAY0 + 4 * DAY + 5 * HOUR + 90,
        hourly_from - 1,
        hourly_from,
        hourly_from + 59 * 60,
    ]);
    let mut bases = std::collections::BTreeSet::new();
    let mut sources = std::collections::BTreeSet::new();
    for at in moments {
        let (base, fleet) = answered(store, at, ObservedScope::All, None).await;
        let source = store.window_source(base, ObservedScope::All).await.unwrap();
        assert_eq!(
            source == WindowSource::Arrivals,
            base.seconds() >= hourly_from,
            "at {}",
            at - DAY0
        );
        sources.insert(format!("{source:?}"));
        bases.insert(at - base.seconds() > 6 * HOUR);
        assert_eq!(
            fleet,
            expected(&rows, at, None),
            "the fleet at {} (from the checkpoint at, and {source:?} after, {})",
            at - DAY0,
            base.seconds() - DAY0
        );
        let cluster = format!("c{}", rng.below(6));
        let (_, one) = answered(store, at, ObservedScope::Cluster(&cluster), None).await;
        assert_eq!(
            one,
            expected(&rows, at, Some(&cluster)),
            "{cluster} at {}",
            at - DAY0
        );
        let app = ["checkout", "cart", "search"][rng.below(3) as usize];
        let (_, of_app) = answered(store, at, ObservedScope::App(app), None).await;
        assert_eq!(
            of_app,
            expected_of_app(&rows, at, app),
            "{app} at {}",
            at - DAY0
        );
        if source == WindowSource::Arrivals {
            // Where both are kept, the transitions answer the same.
            let (_, from_transitions) = answered(
                store,
                at,
                ObservedScope::All,
                Some(WindowSource::Transitions),
            )
            .await;
            assert_eq!(from_transitions, fleet, "at {}", at - DAY0);
        }
    }
    assert_eq!(
        sources.len(),
        2,
        "some moments answered from arrivals, some from transitions"
    );
    let (_, first_minutes) =
        answered(store, oldest + 300, ObservedScope::Cluster("c0"), None).await;
    assert_eq!(first_minutes, expected(&rows, oldest + 300, Some("c0")));
    assert!(
        first_minutes
            .values()
            .any(|key| key.3[7] == "stamped the day before"),
        "a row stamped before the oldest day kept and received after it is read"
    );
    let (_, spooled) = answered(store, DAY0 + 4 * DAY + 6 * HOUR, ObservedScope::All, None).await;
    for message in ["spooled for two days", "stamped ahead"] {
        assert!(
            spooled.values().any(|key| key.3[7] == message),
            "a row {message} is read from the transitions"
        );
    }
    assert_eq!(
        bases.len(),
        2,
        "some moments read more than 6 hours of arrivals (daily tier), some less"
    );

    // A moment before the oldest checkpoint kept has none to start from.
    assert_eq!(
        store
            .checkpoints()
            .await
            .unwrap()
            .base_for(Timestamp(oldest - 1)),
        None
    );
}
