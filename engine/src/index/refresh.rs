//! One refresh, step by step: the renderer's tables when their change markers moved (unless a
//! render is still being published), the observed rows that arrived since the last read
//! (applied one at a time as they stream in), the heartbeats, then the clock moved to now and
//! a new snapshot published.

use std::time::Instant;

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::queries::{ArrivalHorizon, ObservedSource};
use fleetscope_store::{HeartbeatRow, ObservedRow};

use super::arrivals::{
    bounded_until, observed_source, ArrivalCursor, ArrivalRead, BOUNDED_READ_AFTER_SECONDS,
};
use super::{arrival_horizons, cpu_bound, Index, RefreshPhases, Refreshed, OVERLAP_SECONDS};
use crate::fleet::{Tables, UNFINISHED_RENDER_GRACE};

/// What the read of observed rows did.
struct ObservedRead {
    /// The read made: `None` for a complete read of the source.
    read: Option<ArrivalRead>,
    /// Rows read, and rows of them that changed the fleet.
    rows_read: u64,
    applied: usize,
    /// The newest `received_at` among the rows read.
    newest_received: u32,
}

impl Index {
    /// Reads what changed since the last refresh, applies it, moves the clock to `now` under
    /// `policy` and publishes. While the store is read the writer's fleet is locked for one
    /// row at a time; readers only ever take the published snapshot.
    pub async fn refresh_at(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> fleetscope_store::Result<Refreshed> {
        let mut phases = RefreshPhases::default();
        let phase = Instant::now();
        let current = self.current();
        let observed_since = Timestamp(i64::from(current.observed_watermark) - OVERLAP_SECONDS);
        let heartbeats_since = Timestamp(i64::from(current.heartbeat_watermark) - OVERLAP_SECONDS);
        let tables = self
            .changed_tables(current.markers, current.rollouts.last_render, now)
            .await?;
        // The renderer's tables go in first: the rows read next are applied as they arrive.
        let tables_reloaded = tables.is_some();
        if let Some(tables) = tables {
            cpu_bound(|| self.writer_guard().set_tables(tables));
        }
        phases.read_tables = phase.elapsed();
        let started = Instant::now();
        let (horizons, heartbeat_horizons) = arrival_horizons(&self.store).await;
        let observed = self
            .read_observed(started, &horizons, observed_since)
            .await?;
        phases.read_observed = started.elapsed();
        let phase = Instant::now();
        let (heartbeat_read, heartbeats) = self
            .read_heartbeats(&heartbeat_horizons, heartbeats_since)
            .await?;
        phases.read_heartbeats = phase.elapsed();
        let refreshed = Refreshed {
            tables_reloaded,
            observed_rows: observed.applied,
            heartbeat_rows: heartbeats.len(),
            clusters_reclassified: 0,
            observed_rows_read: observed.rows_read,
            arrival_read: observed.read,
            heartbeat_read,
            generation: 0,
            phases,
        };
        // The rest works without awaiting, for up to a few hundred milliseconds when much
        // changed: off the runtime's worker threads, so requests keep being answered.
        Ok(cpu_bound(|| {
            self.apply_and_publish(refreshed, &observed, started, heartbeats, now, policy)
        }))
    }

    /// The renderer's tables, read again when their change markers moved from `known` and no
    /// render is being published at `now`; `None` when the fleet keeps the ones it has.
    async fn changed_tables(
        &self,
        known: Option<fleetscope_store::queries::ChangeMarkers>,
        changes_after: u64,
        now: Timestamp,
    ) -> fleetscope_store::Result<Option<Tables>> {
        let markers = self.store.change_markers().await?;
        if known == Some(markers) {
            return Ok(None);
        }
        let tables = Tables::read(&self.store, markers, changes_after).await?;
        Ok(
            match (
                tables.render_in_progress(now),
                tables.unfinished_render,
                tables.unreplicated_render,
            ) {
                (Some(render), _, _) => {
                    // Applied at a later refresh, whole, once its `renders` row is in and its
                    // rows have reached the node read.
                    tracing::debug!(
                        render,
                        "a render is being published or its rows are not all readable yet; keeping the last one"
                    );
                    None
                }
                (None, Some(render), _) => {
                    tracing::warn!(
                        render,
                        grace = ?UNFINISHED_RENDER_GRACE,
                        "rows of a render that was never completed are older than the grace: applying them as they are"
                    );
                    Some(tables)
                }
                (None, None, Some((render, _))) => {
                    tracing::warn!(
                        render,
                        "some rows of a render have not reached the ClickHouse node read within the grace: applying the tables as they are"
                    );
                    Some(tables)
                }
                (None, None, None) => Some(tables),
            },
        )
    }

    /// Which observed rows to read: everything from the source when the last complete read is
    /// too old for the arrivals, else the next read between horizons (bounded in rows when it
    /// spans more than a few seconds: a fleet connecting, a hub that fell behind; a read that
    /// outlasted the store's query timeout would fail every time, and each retry cover more).
    async fn plan_observed_read(
        &self,
        source: ObservedSource,
        horizons: &[ArrivalHorizon],
    ) -> fleetscope_store::Result<Option<ArrivalRead>> {
        let cursor = self
            .arrivals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut read = match source {
            ObservedSource::Latest => None,
            ObservedSource::Arrivals => Some(cursor.next_read(horizons)),
        };
        if let Some(ArrivalRead::Between { from, until }) = &mut read {
            if until.saturating_sub(*from) > BOUNDED_READ_AFTER_SECONDS {
                let per_second = self
                    .store
                    .observed_arrivals_per_second(
                        Timestamp(i64::from(*from)),
                        Timestamp(i64::from(*until)),
                    )
                    .await?;
                let per_second: Vec<(u32, u64)> =
                    per_second.iter().map(|r| (r.second, r.rows)).collect();
                *until = bounded_until(
                    &per_second,
                    *from,
                    *until,
                    self.arrival_read_rows
                        .load(std::sync::atomic::Ordering::Relaxed),
                );
            }
        }
        Ok(read)
    }

    /// Reads the observed rows that arrived since the last read and applies each to the
    /// writer's fleet as it streams in, under the writer's lock for that row only, so a large
    /// read (a fleet connecting) never sits in memory as rows. Rows already applied (a writer
    /// back from silence, the overlap without horizons) are recognised before anything is
    /// interned, and dropped. Moves the arrival cursor past what was read.
    async fn read_observed(
        &self,
        started: Instant,
        horizons: &[ArrivalHorizon],
        since: Timestamp,
    ) -> fleetscope_store::Result<ObservedRead> {
        let last_read = *self
            .observed_read_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let source = observed_source(last_read, started);
        let read = self.plan_observed_read(source, horizons).await?;
        let mut applied = 0;
        let mut newest_received = 0;
        let mut keep = |row: ObservedRow| {
            newest_received = newest_received.max(row.received_at);
            let mut fleet = self.writer_guard();
            if fleet.is_newer(&row) {
                fleet.apply_object(&row);
                applied += 1;
            }
        };
        let rows_read = match read {
            None => {
                self.store
                    .observed_objects(source, since, &mut keep)
                    .await?
            }
            Some(ArrivalRead::Overlap) => {
                self.store
                    .observed_objects(ObservedSource::Arrivals, since, &mut keep)
                    .await?
            }
            Some(ArrivalRead::Between { from, until }) if from < until => {
                self.store
                    .observed_arrivals_between(
                        Timestamp(i64::from(from)),
                        Timestamp(i64::from(until)),
                        &mut keep,
                    )
                    .await?
            }
            Some(ArrivalRead::Between { .. }) => 0,
        };
        let mut cursor = self
            .arrivals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match read {
            None => *cursor = ArrivalCursor::after_complete_read(horizons),
            Some(ArrivalRead::Between { until, .. }) => cursor.advance_to(horizons, until),
            Some(ArrivalRead::Overlap) => cursor.advance(horizons),
        }
        Ok(ObservedRead {
            read,
            rows_read,
            applied,
            newest_received,
        })
    }

    /// Reads the heartbeats since the last read. `heartbeats` keeps every cluster's latest
    /// heartbeat for good, so a read between horizons is right after any gap: no complete
    /// read is ever needed again.
    async fn read_heartbeats(
        &self,
        horizons: &[ArrivalHorizon],
        since: Timestamp,
    ) -> fleetscope_store::Result<(ArrivalRead, Vec<HeartbeatRow>)> {
        let read = self
            .heartbeat_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .next_read(horizons);
        let heartbeats = match read {
            ArrivalRead::Overlap => self.store.heartbeats_since(since).await?,
            ArrivalRead::Between { from, until } if from < until => {
                self.store
                    .heartbeats_between(Timestamp(i64::from(from)), Timestamp(i64::from(until)))
                    .await?
            }
            ArrivalRead::Between { .. } => Vec::new(),
        };
        self.heartbeat_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .advance(horizons);
        Ok((read, heartbeats))
    }

    /// Under the writer's lock: the watermark and the heartbeats in, the clock moved to `now`
    /// (never back: a reader may have moved it further meanwhile), and a snapshot published.
    fn apply_and_publish(
        &self,
        mut refreshed: Refreshed,
        observed: &ObservedRead,
        started: Instant,
        heartbeats: Vec<HeartbeatRow>,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Refreshed {
        let phase = Instant::now();
        let mut fleet = self.writer_guard();
        refreshed.phases.wait_for_writer = phase.elapsed();
        let phase = Instant::now();
        fleet.observed_watermark = fleet.observed_watermark.max(observed.newest_received);
        *self
            .observed_read_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
        fleet.apply_heartbeats(heartbeats);
        refreshed.phases.apply = phase.elapsed();
        let phase = Instant::now();
        let now = now.max(fleet.as_of);
        refreshed.clusters_reclassified = fleet.advance(now, policy);
        refreshed.generation = fleet.generation;
        refreshed.phases.advance = phase.elapsed();
        let phase = Instant::now();
        self.publish(&fleet);
        refreshed.phases.publish = phase.elapsed();
        refreshed
    }
}
