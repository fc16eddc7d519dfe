//! Where each read of the collector's arrivals starts and stops: from writer horizon to writer
//! horizon, each row once, bounded in rows when a read spans many seconds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fleetscope_store::queries::{ArrivalHorizon, ObservedSource};

/// A read of arrivals spanning more seconds than this is first counted per second, and bounded
/// to [`Index::set_arrival_read_rows`] rows; a refresh every second spans one or two.
pub(crate) const BOUNDED_READ_AFTER_SECONDS: u32 = 3;

/// A writer that has published no horizon for longer than this (by ClickHouse's clock) is not
/// waited for; when it publishes again, what it stamped since its last horizon is read.
pub const WRITER_SILENT_AFTER: i64 = 30;

/// Where the reads of observed arrivals stand (see docs/data-model.md, "Reading arrivals
/// without an overlap"): per writer, the second before which all its rows have been read.
#[derive(Debug, Default, Clone)]
pub struct ArrivalCursor {
    /// Writer → (all its rows stamped before this have been read, whether it was live then).
    pub writers: HashMap<String, (u32, bool)>,
    /// Whether a read with horizons has happened (a complete read counts).
    started: bool,
}

/// What to read next from `observed_arrivals` (or `heartbeats`), given the writers' horizons
/// now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalRead {
    /// Rows stamped in `[from, until)`; afterwards every live writer's rows before `until` are
    /// read.
    Between { from: u32, until: u32 },
    /// No writer publishes horizons: read back `OVERLAP_SECONDS` from the newest row seen.
    Overlap,
}

fn is_live(h: &ArrivalHorizon) -> bool {
    h.silent_seconds <= WRITER_SILENT_AFTER
}

impl ArrivalCursor {
    /// The cursor right after a complete read of observed state that started after `horizons`
    /// were read: every writer's rows before its horizon then were visible, so they were read.
    pub fn after_complete_read(horizons: &[ArrivalHorizon]) -> ArrivalCursor {
        ArrivalCursor {
            writers: horizons
                .iter()
                .map(|h| (h.writer.clone(), (h.visible_before, is_live(h))))
                .collect(),
            started: true,
        }
    }

    /// Where writer `h`'s rows have been read up to: a writer never seen before has read none
    /// of its rows (it stamps none before `first_stamp`).
    fn read_before(&self, h: &ArrivalHorizon) -> u32 {
        self.writers
            .get(&h.writer)
            .map_or(h.first_stamp, |(read, _)| *read)
    }

    /// What the next read covers, given the horizons read just before it: from the oldest
    /// unread second of any live writer to the earliest horizon of them.
    pub fn next_read(&self, horizons: &[ArrivalHorizon]) -> ArrivalRead {
        let live: Vec<_> = horizons.iter().filter(|h| is_live(h)).collect();
        let (Some(from), Some(until), true) = (
            live.iter().map(|h| self.read_before(h)).min(),
            live.iter().map(|h| h.visible_before).min(),
            self.started,
        ) else {
            return ArrivalRead::Overlap;
        };
        ArrivalRead::Between {
            from,
            until: until.max(from),
        }
    }

    /// Records that the read [`ArrivalCursor::next_read`] chose for `horizons` is done.
    pub fn advance(&mut self, horizons: &[ArrivalHorizon]) {
        self.advance_to(horizons, u32::MAX);
    }

    /// Records that the read [`ArrivalCursor::next_read`] chose for `horizons` is done up to
    /// `stop` only (a read bounded in rows stops before the horizon): every live writer's rows
    /// before the earlier of the two have been read.
    pub fn advance_to(&mut self, horizons: &[ArrivalHorizon], stop: u32) {
        let read = self.next_read(horizons);
        for h in horizons {
            let before = self.read_before(h);
            let now_read = match read {
                ArrivalRead::Between { until, .. } if is_live(h) => before.max(until.min(stop)),
                _ => before,
            };
            self.writers
                .insert(h.writer.clone(), (now_read, is_live(h)));
        }
        if matches!(read, ArrivalRead::Between { .. }) {
            self.started = true;
        }
    }
}

/// The most observed arrivals one refresh reads by default: a fleet connecting (or a hub that
/// fell behind) is caught up over several refreshes, each of them short enough to finish within
/// the store's query timeout however much is waiting.
pub const ARRIVAL_READ_ROWS: u64 = 250_000;

/// Where a read of arrivals that may take at most `limit` rows stops, given how many rows each
/// second from `from` on holds (sorted by second, all before `until`): after the last second
/// that keeps the total within `limit`, or after the first second when that one alone holds
/// more (a second is never split, and every read makes progress); `until` when everything fits.
pub fn bounded_until(per_second: &[(u32, u64)], from: u32, until: u32, limit: u64) -> u32 {
    let mut total = 0u64;
    for (i, (second, rows)) in per_second.iter().enumerate() {
        total = total.saturating_add(*rows);
        if total > limit {
            return if i == 0 {
                second.saturating_add(1).clamp(from, until)
            } else {
                (*second).clamp(from, until)
            };
        }
    }
    until
}

/// Where a refresh reads observed rows: from the arrivals when the last read is recent enough
/// that none of what came since can have been trimmed, otherwise (first read, or a hub that could
/// not reach the store for hours) the whole of `observed_latest`.
pub fn observed_source(last_read_started: Option<Instant>, now: Instant) -> ObservedSource {
    let window = Duration::from_secs(
        u64::try_from(fleetscope_store::retention::ARRIVALS_KEEP_HOURS - 1).unwrap_or(0) * 3_600,
    );
    match last_read_started {
        Some(started) if now.saturating_duration_since(started) < window => {
            ObservedSource::Arrivals
        }
        _ => ObservedSource::Latest,
    }
}
