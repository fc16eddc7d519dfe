//! Where each read of the collector's arrivals starts and stops: from writer horizon to writer
//! horizon, each row once, bounded in rows when a read spans many seconds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fleetscope_store::queries::{ArrivalHorizon, ObservedSource};

/// A read of arrivals spanning more seconds than this is first counted per second, and bounded
/// to [`Index::set_arrival_read_rows`] rows; a refresh every second spans one or two.
pub(crate) const BOUNDED_READ_AFTER_SECONDS: u32 = 3;

/// A writer that has published no horizon for this many seconds longer than the writer heard
/// from last (by ClickHouse's clock) is not waited for: a live writer publishes every second, so
/// one that misses this many has crashed, stopped or lost the store. When it publishes again,
/// what it stamped since its last horizon is read. Measured against the writer heard from last,
/// a store slow to take every writer's publications stops no writer from being waited for.
pub const WRITER_BEHIND_AFTER: i64 = 2;

/// A writer that has published no horizon for longer than this is not waited for even when no
/// writer has published since: with every writer that silent, rows may come from writers that
/// publish no horizons, and arrivals are read with the overlap.
pub const WRITER_SILENT_AFTER: i64 = 30;

/// Where the reads of observed arrivals stand (see docs/data-model.md, "Reading arrivals
/// without an overlap"): per writer, the second before which all its rows have been read.
#[derive(Debug, Default, Clone)]
pub struct ArrivalCursor {
    /// Writer → where the reads of its rows stand.
    pub writers: HashMap<String, WriterRead>,
    /// Whether a read with horizons has happened (a complete read counts).
    started: bool,
}

/// Where the reads of one writer's rows stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterRead {
    /// All its rows stamped before this second have been read.
    pub read_before: u32,
    /// Whether it was waited for at the last read.
    pub live: bool,
    /// A pass over rows stamped from `read_before` on, owed to a writer the reads do not wait
    /// for, is under way: it has reached `.0`, and it started at `.1` (a second by the server's
    /// clock). See [`ArrivalCursor::next_read`].
    pub sweep: Option<(u32, u32)>,
    /// The second (by the server's clock) at which the last finished pass started; `None`
    /// while it is waited for.
    pub swept_at: Option<u32>,
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

/// Which writers the hub waits for: given `horizons` (the writers of one kind), whether a
/// writer silent for so many seconds is live.
fn liveness(horizons: &[ArrivalHorizon]) -> impl Fn(&ArrivalHorizon) -> bool {
    let heard_last = horizons.iter().map(|h| h.silent_seconds).min();
    move |h| {
        h.silent_seconds <= WRITER_SILENT_AFTER
            && h.silent_seconds
                <= heard_last
                    .unwrap_or(h.silent_seconds)
                    .saturating_add(WRITER_BEHIND_AFTER)
    }
}

/// The server's clock when `horizons` were read (the second of the newest publication plus how
/// long ago it was).
fn server_now(horizons: &[ArrivalHorizon]) -> u32 {
    horizons
        .iter()
        .map(|h| {
            let now = i64::from(h.published_at).saturating_add(h.silent_seconds);
            u32::try_from(now.max(0)).unwrap_or(u32::MAX)
        })
        .max()
        .unwrap_or(0)
}

impl ArrivalCursor {
    /// The cursor right after a complete read of observed state that started after `horizons`
    /// were read: every writer's rows before its horizon then were visible, so they were read,
    /// and so was everything any writer had made visible.
    pub fn after_complete_read(horizons: &[ArrivalHorizon]) -> ArrivalCursor {
        let is_live = liveness(horizons);
        let now = server_now(horizons);
        ArrivalCursor {
            writers: horizons
                .iter()
                .map(|h| {
                    let live = is_live(h);
                    let read = WriterRead {
                        read_before: h.visible_before,
                        live,
                        sweep: None,
                        swept_at: (!live).then_some(now),
                    };
                    (h.writer.clone(), read)
                })
                .collect(),
            started: true,
        }
    }

    /// Where writer `h`'s rows have been read up to: a writer never seen before has read none
    /// of its rows (it stamps none before `first_stamp`).
    fn read_before(&self, h: &ArrivalHorizon) -> u32 {
        self.writers
            .get(&h.writer)
            .map_or(h.first_stamp, |read| read.read_before)
    }

    /// The pass owed to writer `h`, which the reads do not wait for now, as (where it has
    /// reached, the server second it started at): one under way, or a new one from its unread
    /// second when it was waited for at the last read (it fell silent since) or it has
    /// published since the last pass started (it may have acknowledged rows since), or it was
    /// never seen.
    fn owed_sweep(&self, h: &ArrivalHorizon, now: u32) -> Option<(u32, u32)> {
        let Some(read) = self.writers.get(&h.writer) else {
            // Never seen: it started and fell silent between two reads.
            return Some((h.first_stamp, now));
        };
        match (read.sweep, read.swept_at) {
            (Some(sweep), _) => Some(sweep),
            (None, None) => Some((read.read_before, now)),
            (None, Some(swept_at)) if h.published_at >= swept_at => Some((read.read_before, now)),
            (None, Some(_)) => None,
        }
    }

    /// What the next read covers, given the horizons read just before it: from the oldest
    /// unread second of any live writer, or of a pass owed to a writer it does not wait for, to
    /// the earliest horizon of the live writers.
    ///
    /// A writer answers its producers only after it has published again since their rows
    /// became visible. So whatever a writer the reads stopped waiting for (crashed after its
    /// last horizon, or slow) has acknowledged is visible by the time the reads stop waiting
    /// for it, or it has published since: either way a pass over its rows from its unread
    /// second on, begun after that, reads it, even where the other writers were read further
    /// already (a writer caught up after an earlier silence, or whose clock is behind).
    pub fn next_read(&self, horizons: &[ArrivalHorizon]) -> ArrivalRead {
        let is_live = liveness(horizons);
        let now = server_now(horizons);
        let live: Vec<_> = horizons.iter().filter(|h| is_live(h)).collect();
        let owed = horizons
            .iter()
            .filter(|h| !is_live(h))
            .filter_map(|h| self.owed_sweep(h, now))
            .map(|(reached, _)| reached);
        let (Some(from), Some(until), true) = (
            live.iter().map(|h| self.read_before(h)).chain(owed).min(),
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
    /// before the earlier of the two have been read, and every owed pass has come that far
    /// (it is finished once it reaches where the live writers' rows are read to).
    pub fn advance_to(&mut self, horizons: &[ArrivalHorizon], stop: u32) {
        let read = self.next_read(horizons);
        let is_live = liveness(horizons);
        let now = server_now(horizons);
        let reached = match read {
            ArrivalRead::Between { until, .. } => Some(until.min(stop)),
            ArrivalRead::Overlap => None,
        };
        let live_read = horizons
            .iter()
            .filter(|h| is_live(h))
            .map(|h| self.read_before(h).max(reached.unwrap_or(0)))
            .min();
        let updates: Vec<(String, WriterRead)> = horizons
            .iter()
            .map(|h| {
                let before = self.read_before(h);
                let previous = self.writers.get(&h.writer);
                let read = if is_live(h) {
                    WriterRead {
                        read_before: reached.map_or(before, |reached| before.max(reached)),
                        live: true,
                        sweep: None,
                        swept_at: None,
                    }
                } else {
                    let swept_at = previous.and_then(|p| p.swept_at);
                    let (sweep, swept_at) = match (self.owed_sweep(h, now), reached) {
                        (Some((from, started)), Some(reached)) => {
                            let swept = from.max(reached);
                            if live_read.is_none_or(|live_read| swept >= live_read) {
                                (None, Some(started))
                            } else {
                                (Some((swept, started)), swept_at)
                            }
                        }
                        (owed, _) => (owed, swept_at),
                    };
                    WriterRead {
                        read_before: before,
                        live: false,
                        sweep,
                        swept_at,
                    }
                };
                (h.writer.clone(), read)
            })
            .collect();
        self.writers.extend(updates);
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
