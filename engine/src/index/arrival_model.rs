//! The arrival cursor against a model of its writers: collectors whose clocks disagree, whose
//! inserts take seconds, whose publications are lost or late, and which crash, some while being
//! caught up after a silence; and a hub that reads once a second at any phase of it. A writer
//! answers its producers only after a publication begun once their rows were visible
//! (docs/data-model.md). Whatever a writer acknowledged is read, however the writers behave, as
//! long as one writer lives on (an agent sends what was not acknowledged again, through a live
//! one).
//!
//! Time runs in quarter seconds, so that a writer can publish twice within one second of the
//! server's clock, on both sides of a read.

use std::collections::BTreeSet;

use fleetscope_store::queries::ArrivalHorizon;
use proptest::prelude::*;

use super::arrivals::{ArrivalCursor, ArrivalRead};
use super::OVERLAP_SECONDS;

const TICKS_PER_SECOND: u32 = 4;
const SECONDS: u32 = 90;
const TICKS: u32 = SECONDS * TICKS_PER_SECOND;
/// Ticks at the end in which every writer still alive runs without faults.
const QUIET: u32 = 40 * TICKS_PER_SECOND;
/// Ticks at the very end in which no batch begins, so that the hub reads the last ones.
const DRAIN: u32 = 10 * TICKS_PER_SECOND;
/// The server's clock, in seconds, at tick 0.
const EPOCH: u32 = 100;

/// One writer's life, as drawn.
#[derive(Debug, Clone)]
struct Plan {
    /// Seconds its clock is ahead of the server's (negative: behind).
    offset: i64,
    /// The tick it starts.
    starts: u32,
    /// The tick it crashes; `None`: it lives to the end.
    crashes: Option<u32>,
    /// Per tick: how many ticks a batch begun then takes to insert (0: no batch begun).
    inserts: Vec<u8>,
    /// Per tick: whether a publication due then is lost (a slow or unreachable store).
    lost: Vec<bool>,
}

/// One writer as it runs.
#[derive(Debug)]
struct Writer {
    plan: Plan,
    name: String,
    first_stamp: u32,
    /// The latest stamp or horizon given.
    last: u32,
    /// The batch being inserted: (stamp, tick its insert ends, its rows).
    in_flight: Option<(u32, u32, Vec<u64>)>,
    /// A batch ended since the last publication: publish at the next tick.
    prompted: bool,
    /// The greatest horizon published and the tick of the latest publication.
    published: Option<(u32, u32)>,
    /// Its visible rows not acknowledged yet.
    unacknowledged: Vec<usize>,
}

/// A row made visible: its stamp, whether its writer acknowledged it.
#[derive(Debug, Clone, Copy)]
struct Visible {
    stamp: u32,
    acknowledged: bool,
}

fn plan(survivor: bool) -> impl Strategy<Value = Plan> {
    (
        -3i64..=3,
        0u32..20 * TICKS_PER_SECOND,
        prop::option::of(5 * TICKS_PER_SECOND..TICKS - QUIET),
        prop::collection::vec(
            prop_oneof![6 => Just(0u8), 3 => 1u8..5, 1 => 5u8..30],
            TICKS as usize,
        ),
        prop::collection::vec(prop::bool::weighted(0.3), TICKS as usize),
    )
        .prop_map(move |(offset, starts, crashes, inserts, lost)| Plan {
            offset,
            starts,
            crashes: if survivor {
                None
            } else {
                crashes.map(|c| c.max(starts + 1))
            },
            inserts,
            lost,
        })
}

/// The server's second at `tick`.
fn server_second(tick: u32) -> u32 {
    EPOCH + tick / TICKS_PER_SECOND
}

impl Writer {
    fn wall(&self, tick: u32) -> u32 {
        u32::try_from(i64::from(server_second(tick)) + self.plan.offset).unwrap()
    }

    fn alive(&self, tick: u32) -> bool {
        tick >= self.plan.starts && self.plan.crashes.is_none_or(|c| tick < c)
    }

    fn horizon(&mut self, tick: u32) -> u32 {
        match &self.in_flight {
            Some((stamp, ..)) => *stamp,
            None => {
                self.last = self.last.max(self.wall(tick));
                self.last
            }
        }
    }

    /// One tick of the writer: an insert ends (its rows visible), a batch begins, a horizon is
    /// published when due (every second, and after a batch ended), which acknowledges every
    /// row visible before it.
    fn step(
        &mut self,
        tick: u32,
        next_row: &mut u64,
        rows: &mut [Visible],
        made: &mut Vec<Visible>,
    ) {
        if !self.alive(tick) {
            return;
        }
        if tick == self.plan.starts {
            self.first_stamp = self.wall(tick);
            self.last = self.first_stamp;
            self.published = Some((self.first_stamp, tick));
            return;
        }
        if let Some((stamp, ends, batch)) = self.in_flight.take() {
            if ends <= tick {
                let first = rows.len() + made.len();
                made.extend(batch.iter().map(|_| Visible {
                    stamp,
                    acknowledged: false,
                }));
                self.unacknowledged.extend(first..rows.len() + made.len());
                self.prompted = true;
            } else {
                self.in_flight = Some((stamp, ends, batch));
            }
        }
        let quiet = tick >= TICKS - QUIET;
        let takes = if tick >= TICKS - DRAIN {
            0
        } else {
            self.plan.inserts[tick as usize]
        };
        if self.in_flight.is_none() && takes > 0 {
            let stamp = self.last.max(self.wall(tick));
            self.last = stamp;
            let batch: Vec<u64> = (0..2).map(|i| *next_row + i).collect();
            *next_row += 2;
            let takes = if quiet { 1 } else { u32::from(takes) };
            self.in_flight = Some((stamp, tick + takes, batch));
        }
        let due = self.prompted || (tick - self.plan.starts).is_multiple_of(TICKS_PER_SECOND);
        if due && (quiet || !self.plan.lost[tick as usize]) {
            let horizon = self.horizon(tick);
            let greatest = self.published.map_or(horizon, |(h, _)| h.max(horizon));
            self.published = Some((greatest, tick));
            self.prompted = false;
            for i in self.unacknowledged.drain(..) {
                match rows.get_mut(i) {
                    Some(row) => row.acknowledged = true,
                    None => made[i - rows.len()].acknowledged = true,
                }
            }
        }
    }

    fn horizon_row(&self, tick: u32) -> Option<ArrivalHorizon> {
        self.published.map(|(visible_before, at)| ArrivalHorizon {
            writer: self.name.clone(),
            first_stamp: self.first_stamp,
            visible_before,
            silent_seconds: i64::from(server_second(tick) - server_second(at)),
            published_at: server_second(at),
        })
    }
}

/// How the hub reads: once a second at tick `phase` of it, except in the seconds it is `busy`
/// (a long refresh), each read bounded to stop at `stops` (0: at the horizon).
#[derive(Debug, Clone)]
struct Reads {
    phase: u32,
    busy: Vec<bool>,
    stops: Vec<u8>,
}

fn reads() -> impl Strategy<Value = Reads> {
    (
        0..TICKS_PER_SECOND,
        prop::collection::vec(prop::bool::weighted(0.3), SECONDS as usize),
        prop::collection::vec(prop_oneof![3 => Just(0u8), 1 => 1u8..4], SECONDS as usize),
    )
        .prop_map(|(phase, busy, stops)| Reads { phase, busy, stops })
}

/// Runs the writers and the hub's reads, and returns the stamps of acknowledged rows the hub
/// never read.
fn unread_acknowledged(plans: Vec<Plan>, reads: &Reads) -> Vec<u32> {
    let mut writers: Vec<Writer> = plans
        .into_iter()
        .enumerate()
        .map(|(i, plan)| Writer {
            plan,
            name: format!("w{i}"),
            first_stamp: 0,
            last: 0,
            in_flight: None,
            prompted: false,
            published: None,
            unacknowledged: Vec::new(),
        })
        .collect();
    let mut rows: Vec<Visible> = Vec::new();
    let mut read: BTreeSet<usize> = BTreeSet::new();
    let mut next_row = 0;
    let mut cursor: Option<ArrivalCursor> = None;
    let mut newest_seen = 0u32;
    for tick in 0..TICKS {
        for writer in &mut writers {
            let mut made = Vec::new();
            writer.step(tick, &mut next_row, &mut rows, &mut made);
            rows.extend(made);
        }
        let second = (tick / TICKS_PER_SECOND) as usize;
        let busy = reads.busy[second] && tick < TICKS - DRAIN;
        if tick % TICKS_PER_SECOND != reads.phase || busy {
            continue;
        }
        // The hub reads the horizons, then the rows.
        let horizons: Vec<ArrivalHorizon> =
            writers.iter().filter_map(|w| w.horizon_row(tick)).collect();
        let Some(cursor) = cursor.as_mut() else {
            // The first refresh is a complete read of everything visible.
            read.extend(0..rows.len());
            newest_seen = rows.iter().map(|r| r.stamp).max().unwrap_or(0);
            cursor = Some(ArrivalCursor::after_complete_read(&horizons));
            continue;
        };
        let take = |read: &mut BTreeSet<usize>, from: u32, until: u32| {
            for (i, row) in rows.iter().enumerate() {
                if row.stamp >= from && row.stamp < until {
                    read.insert(i);
                }
            }
        };
        match cursor.next_read(&horizons) {
            ArrivalRead::Between { from, until } => {
                // A bounded read stops anywhere past its start (or reads to the horizon).
                let stop = match reads.stops[second] {
                    0 => until,
                    n => (from + u32::from(n)).min(until),
                };
                take(&mut read, from, stop);
                cursor.advance_to(&horizons, stop);
            }
            ArrivalRead::Overlap => {
                let from = newest_seen.saturating_sub(OVERLAP_SECONDS as u32);
                take(&mut read, from, u32::MAX);
                cursor.advance(&horizons);
            }
        }
        newest_seen = read
            .iter()
            .map(|i| rows[*i].stamp)
            .max()
            .unwrap_or(newest_seen);
    }
    rows.iter()
        .enumerate()
        .filter(|(i, row)| row.acknowledged && !read.contains(i))
        .map(|(_, row)| row.stamp)
        .collect()
}

/// 300 cases by default (about 2 s); `PROPTEST_CASES` sets another number for a longer run.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_acknowledged_row_is_read_whatever_the_writers_do(
        survivor in plan(true),
        others in prop::collection::vec(plan(false), 1..4),
        reads in reads(),
    ) {
        let mut plans = others;
        plans.push(survivor);
        let unread = unread_acknowledged(plans, &reads);
        prop_assert!(unread.is_empty(), "acknowledged rows never read, stamped {unread:?}");
    }
}
