//! What arrived since a moment, for the hub's index: app-object rows (from `observed_latest`
//! when the index loads, from `observed_arrivals` when it refreshes), heartbeats, and the
//! writers' arrival horizons that bound each incremental read.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::state::ObjectKind;
use fleetscope_model::Timestamp;
use serde::{Deserialize, Serialize};

use crate::rows::{HeartbeatRow, ObservedRow};
use crate::{to_datetime, Context, Result, Store};

/// Every app object's rows in `observed_latest` (unmerged duplicates included: the reader keeps
/// the highest `seq` per object), received at or after `since`.
pub fn observed_objects_query(store: &Store, since: Timestamp) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let primary_kinds = ObjectKind::ALL
            .iter()
            .filter(|kind| kind.is_app_object())
            .map(|kind| format!("'{}'", kind.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "SELECT ?fields FROM observed_latest WHERE object_kind IN ({primary_kinds}) AND received_at >= toDateTime(?)"
        )
    });
    store.client().query(sql).bind(to_datetime(since))
}

/// Where observed rows are read from (see `Store::observed_objects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedSource {
    Latest,
    Arrivals,
}

/// App-object rows that arrived at or after `since`, from `observed_arrivals` (a range of its
/// sort key, so the cost follows what arrived, not the size of the fleet). Complete only for
/// arrivals younger than `ARRIVALS_KEEP_HOURS`.
pub fn observed_arrivals_query(store: &Store, since: Timestamp) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM observed_arrivals WHERE received_at >= toDateTime(?)")
        .bind(to_datetime(since))
}

/// App-object rows stamped in `[from, until)`, from `observed_arrivals`: the reads between two
/// arrival horizons (see `arrival_horizons_query`).
pub fn observed_arrivals_between_query(store: &Store, from: Timestamp, until: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM observed_arrivals \
WHERE received_at >= toDateTime(?) AND received_at < toDateTime(?)",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

/// Observed arrivals stamped in one second: how many, to size a bounded read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ArrivalSecondRow {
    pub second: u32,
    pub rows: u64,
}

/// How many app-object rows were stamped in each second of `[from, until)` that has any, in
/// order (reads `received_at` only).
pub fn observed_arrivals_per_second_query(
    store: &Store,
    from: Timestamp,
    until: Timestamp,
) -> Query {
    store
        .client()
        .query(
            "SELECT toUInt32(received_at) AS second, count() AS rows FROM observed_arrivals \
WHERE received_at >= toDateTime(?) AND received_at < toDateTime(?) \
GROUP BY second ORDER BY second",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

/// One writer's latest arrival horizon, for how many seconds (by the server's clock) it has
/// published none, and the second (by the server's clock) of its latest publication.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ArrivalHorizon {
    pub writer: String,
    pub first_stamp: u32,
    pub visible_before: u32,
    pub published_at: u32,
    pub silent_seconds: i64,
}

/// The start of the name of every writer whose rows are heartbeats (`heartbeats`); the other
/// writers' rows are observed rows (`observed_arrivals`).
pub const HEARTBEAT_WRITER_PREFIX: &str = "heartbeats/";

impl ArrivalHorizon {
    /// Whether this writer's rows are heartbeats rather than observed rows.
    pub fn is_heartbeat_writer(&self) -> bool {
        self.writer.starts_with(HEARTBEAT_WRITER_PREFIX)
    }
}

/// Every writer's latest arrival horizon. A writer's horizons never go back, so its newest
/// publication carries the greatest one (several publications within one second of
/// `updated_at` cannot tie).
pub fn arrival_horizons_query(store: &Store) -> Query {
    store.client().query(
        "SELECT writer, min(first_stamp) AS first_stamp, \
max(visible_before) AS visible_before, \
toUInt32(max(updated_at)) AS published_at, \
toInt64(now()) - toInt64(max(updated_at)) AS silent_seconds \
FROM arrival_writers GROUP BY writer ORDER BY writer",
    )
}

/// Heartbeat rows with `seen_at` at or after `since` (the reader keeps the newest per cluster).
pub fn heartbeats_since_query(store: &Store, since: Timestamp) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM heartbeats WHERE seen_at >= toDateTime(?)")
        .bind(to_datetime(since))
}

/// The latest heartbeats stamped in `[from, until)`: the reads between two horizons of the
/// heartbeat writers (see `arrival_horizons_query` and [`HEARTBEAT_WRITER_PREFIX`]). A
/// cluster's heartbeat that a newer one replaced may be missing from the range: the newer one,
/// stamped later, is in a later range, and only the latest counts.
pub fn heartbeats_between_query(store: &Store, from: Timestamp, until: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM heartbeats \
WHERE seen_at >= toDateTime(?) AND seen_at < toDateTime(?)",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

impl Store {
    /// Streams app-object rows received at or after `since` to `each`, from `observed_latest`
    /// (every object's newest rows; reads the whole table) or, with `ObservedSource::Arrivals`,
    /// from `observed_arrivals` (only what arrived; the caller makes sure `since` is recent).
    pub async fn observed_objects(
        &self,
        source: ObservedSource,
        since: Timestamp,
        mut each: impl FnMut(ObservedRow),
    ) -> Result<u64> {
        let query = match source {
            ObservedSource::Latest => observed_objects_query(self, since),
            ObservedSource::Arrivals => observed_arrivals_query(self, since),
        };
        let mut cursor = query
            .fetch::<ObservedRow>()
            .context(|| "reading observed state".to_owned())?;
        let mut rows = 0;
        while let Some(row) = cursor
            .next()
            .await
            .context(|| "reading observed state".to_owned())?
        {
            rows += 1;
            each(row);
        }
        Ok(rows)
    }

    /// Streams the app-object rows stamped in `[from, until)` to `each`; returns how many.
    pub async fn observed_arrivals_between(
        &self,
        from: Timestamp,
        until: Timestamp,
        mut each: impl FnMut(ObservedRow),
    ) -> Result<u64> {
        let mut cursor = observed_arrivals_between_query(self, from, until)
            .fetch::<ObservedRow>()
            .context(|| "reading observed arrivals".to_owned())?;
        let mut rows = 0;
        while let Some(row) = cursor
            .next()
            .await
            .context(|| "reading observed arrivals".to_owned())?
        {
            rows += 1;
            each(row);
        }
        Ok(rows)
    }

    /// How many app-object rows were stamped in each second of `[from, until)` that has any.
    pub async fn observed_arrivals_per_second(
        &self,
        from: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<ArrivalSecondRow>> {
        observed_arrivals_per_second_query(self, from, until)
            .fetch_all()
            .await
            .context(|| "counting observed arrivals per second".to_owned())
    }

    /// Every writer's latest arrival horizon (see [`arrival_horizons_query`]).
    pub async fn arrival_horizons(&self) -> Result<Vec<ArrivalHorizon>> {
        arrival_horizons_query(self)
            .fetch_all()
            .await
            .context(|| "reading arrival horizons".to_owned())
    }

    /// The latest heartbeats stamped in `[from, until)` (see [`heartbeats_between_query`]).
    pub async fn heartbeats_between(
        &self,
        from: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<HeartbeatRow>> {
        heartbeats_between_query(self, from, until)
            .fetch_all()
            .await
            .context(|| "reading heartbeats between horizons".to_owned())
    }

    /// Heartbeat rows with `seen_at` at or after `since`.
    pub async fn heartbeats_since(&self, since: Timestamp) -> Result<Vec<HeartbeatRow>> {
        heartbeats_since_query(self, since)
            .fetch_all()
            .await
            .context(|| "reading heartbeats".to_owned())
    }
}
