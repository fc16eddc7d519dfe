//! `rollout_records` and `rollout_clusters`: the hub writes its rollouts into the store as they
//! change, for the dashboards' rollout panels (docs/dashboards.md).

use std::sync::Arc;
use std::time::Duration;

use fleetscope_engine::rollout_records::RolloutRecorder;

use crate::params::ApiError;
use crate::state::AppState;

/// The most `rollout_clusters` rows one insert carries (give or take one app's): the first
/// write of a fleet holds a row for every (app, cluster) and goes in several.
pub const CLUSTER_ROWS_PER_INSERT: usize = 50_000;

/// What one [`write_rollout_records`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordsWritten {
    pub records: usize,
    pub clusters: usize,
    pub inserts: usize,
}

/// The writer's clock in milliseconds, above `last`: the versions of a row written twice
/// within a millisecond still order.
fn written_ms(last: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    now.max(last + 1)
}

/// Writes every rollout and (app, cluster) whose row changed since `recorder` last wrote, as
/// the fleet stands now; `recorder` keeps what was written, so a failed insert is tried again
/// whole at the next write.
pub async fn write_rollout_records(
    state: &Arc<AppState>,
    recorder: &mut RolloutRecorder,
    last_ms: &mut u64,
) -> Result<RecordsWritten, ApiError> {
    let mut written = RecordsWritten::default();
    loop {
        let stamp = written_ms(*last_ms);
        let changes = {
            let state = state.clone();
            let before = recorder.clone();
            tokio::task::spawn_blocking(move || {
                let (fleet, _) = state.view();
                before.changes(
                    &fleet,
                    &state.rollout_policy,
                    stamp,
                    CLUSTER_ROWS_PER_INSERT,
                )
            })
            .await
            .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))?
        };
        *last_ms = stamp;
        let store = state.index.store();
        if !changes.clusters.is_empty() {
            state
                .store_call(
                    "rollout clusters insert",
                    store.insert_rows(&changes.clusters),
                )
                .await?;
            written.inserts += 1;
        }
        if !changes.records.is_empty() {
            state
                .store_call(
                    "rollout records insert",
                    store.insert_rows(&changes.records),
                )
                .await?;
            written.inserts += 1;
        }
        written.records += changes.records.len();
        written.clusters += changes.clusters.len();
        let more = changes.more;
        recorder.written(changes);
        if !more {
            return Ok(written);
        }
    }
}

/// Writes the rollout records every `every` until the process ends.
pub fn spawn_rollout_records(state: Arc<AppState>, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut recorder = RolloutRecorder::default();
        let mut last_ms = 0;
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            match write_rollout_records(&state, &mut recorder, &mut last_ms).await {
                Ok(written) => tracing::debug!(?written, "rollout records written"),
                Err(err) => {
                    tracing::warn!(error = %err.message, "rollout records not written; trying again at the next write")
                }
            }
        }
    })
}
