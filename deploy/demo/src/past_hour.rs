//! The hour before the demo started, simulated: what the collector would have stored had the
//! fleet been reporting all along, so that the hub's answers at a past moment (`at`) show a
//! fleet at work from the demo's first minute on, not one silent until the demo began.
//!
//! Written before the collector and the hub start, into the tables the collector writes: every
//! app object of every cluster that reports, as its agent reported it at the start of the hour
//! (received then, with the change number its next snapshot carries, so the collector finds it
//! unchanged), a heartbeat of each of those clusters every half stale threshold up to the start
//! (about 1.8 million rows at 30,000 clusters), and the observed-state checkpoint at the start
//! of the hour, from which the collector's own checkpoints follow on. An object still settling
//! when the demo starts was healthy at the start of the hour and changed since (its settling
//! state gets the next change number). Clusters that never report get nothing.

use fleetscope_loadtest::sim::{SimFleet, AGENT_VERSION};
use fleetscope_model::state::ObjectKind;
use fleetscope_model::{Health, Reconciler, Timestamp};
use fleetscope_store::{to_datetime, HeartbeatRow, ObservedRow, Store};

/// How far back the simulated history reaches.
pub const HISTORY_SECONDS: i64 = 3_600;

/// Rows per insert: bounds the demo's memory at 30,000 clusters and more.
const ROWS_PER_INSERT: usize = 200_000;

/// What [`write`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The start of the history: the checkpoint's moment, the oldest moment the hub answers.
    pub from: Timestamp,
    pub objects: u64,
    pub heartbeats: u64,
}

/// The reconciler an agent of this kind of cluster names in its reports (as the simulated
/// agents do).
fn reconciler(reconciler: Reconciler) -> (&'static str, &'static str) {
    match reconciler {
        Reconciler::Flux => ("flux", "v2.4.0"),
        Reconciler::ArgoCd => ("argocd", "v2.13.1"),
    }
}

/// The namespace the simulated agents report an object of this kind in.
fn namespace(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Application => "argocd",
        _ => "flux-system",
    }
}

/// Seconds between two simulated heartbeats of a cluster: half the stale threshold, so that no
/// reporting cluster looks stale at any moment of the history.
pub fn heartbeat_interval(stale_after: i64) -> i64 {
    (stale_after / 2).max(1)
}

/// Writes the hour before `now` (see the module's documentation) and takes its checkpoint.
/// Settling objects of `fleet` get their next change number.
pub async fn write(
    store: &Store,
    fleet: &mut SimFleet,
    now: Timestamp,
    stale_after: i64,
) -> anyhow::Result<Written> {
    // A whole minute, so that the moment printed reads as one.
    let from = Timestamp((now.seconds() - HISTORY_SECONDS).div_euclid(60) * 60);
    let received = to_datetime(from);
    let mut objects = Vec::new();
    let SimFleet { apps, clusters, .. } = fleet;
    for cluster in clusters.iter_mut().filter(|c| !c.never_seen) {
        let mut next_seq = cluster.change_seq;
        for object in &mut cluster.objects {
            let app = &apps[usize::from(object.app)];
            let mut row = ObservedRow {
                cluster_id: cluster.id.clone(),
                object_kind: object.kind.as_str().to_owned(),
                object_namespace: namespace(object.kind).to_owned(),
                object_name: app.clone(),
                app: app.clone(),
                version: object.version.to_string(),
                content_hash: object.content_hash.to_string(),
                applied_revision: object.revision.to_string(),
                health: object.health.as_str().to_owned(),
                sync: object.sync.as_str().to_owned(),
                reason: object.reason.to_owned(),
                message: object.message.to_owned(),
                transitioned_at: to_datetime(Timestamp(object.transitioned_at)),
                observed_at: received,
                received_at: received,
                change_seq: object.change_seq,
                deleted: 0,
            };
            if object.transitioned_at > from.seconds() {
                // Settling now: healthy at the start of the hour, since its version became
                // desired.
                let since = cluster
                    .wants
                    .iter()
                    .find(|w| w.app == object.app)
                    .map_or(from.seconds(), |w| w.since)
                    .min(from.seconds());
                row.health = Health::Healthy.as_str().to_owned();
                row.reason = "ReconciliationSucceeded".to_owned();
                row.message = String::new();
                row.transitioned_at = to_datetime(Timestamp(since));
                next_seq += 1;
                object.change_seq = next_seq;
            }
            objects.push(row);
        }
        cluster.change_seq = next_seq;
    }
    for part in objects.chunks(ROWS_PER_INSERT) {
        store.insert_rows(part).await?;
    }

    let every = heartbeat_interval(stale_after);
    let reporting: Vec<(&str, Reconciler)> = clusters
        .iter()
        .filter(|c| !c.never_seen)
        .map(|c| (c.id.as_str(), c.reconciler))
        .collect();
    let mut heartbeats = 0u64;
    let mut batch: Vec<HeartbeatRow> = Vec::with_capacity(ROWS_PER_INSERT);
    // Round by round, each cluster at its own offset within the interval (as agents started
    // at different moments do), from one interval before the start of the history, so that
    // every reporting cluster has a heartbeat within the interval at every moment of it.
    let mut round_start = from.seconds() - every;
    while round_start < now.seconds() {
        for (index, (id, kind)) in reporting.iter().enumerate() {
            let seen_at = round_start + index as i64 % every;
            if seen_at >= now.seconds() {
                continue;
            }
            let (name, version) = reconciler(*kind);
            batch.push(HeartbeatRow {
                cluster_id: (*id).to_owned(),
                seen_at: to_datetime(Timestamp(seen_at)),
                agent_version: AGENT_VERSION.to_owned(),
                reconciler_names: vec![name.to_owned()],
                reconciler_versions: vec![version.to_owned()],
            });
            if batch.len() == ROWS_PER_INSERT {
                store.insert_rows(&batch).await?;
                heartbeats += batch.len() as u64;
                batch.clear();
            }
        }
        round_start += every;
    }
    if !batch.is_empty() {
        store.insert_rows(&batch).await?;
        heartbeats += batch.len() as u64;
    }

    store.take_checkpoint(from).await?;
    Ok(Written {
        from,
        objects: objects.len() as u64,
        heartbeats,
    })
}
