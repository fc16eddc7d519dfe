//! The fleet at a past moment: the rows each table held then, read from the history tables of
//! migration 5, and the checkpoints of observed state that keep those reads bounded.
//!
//! A moment `at` is answered from what the store had received by then:
//!
//! - **desired state, membership, inventory**: the rows of the newest render whose `renders` row
//!   says it was rendered at or before `at` (`render_id` at most that render's); the
//!   collector's own inventory rows (version 0) from when they were written;
//! - **heartbeats**: each cluster's newest heartbeat stamped at or before `at`;
//! - **observed state**: each app object's newest row (by [`crate::queries::OBSERVED_ORDER`])
//!   received at or before `at`: the newest checkpoint at or before `at` (every object's state
//!   then) and the arrivals after it, up to `at`.
//!
//! History reaches back to the oldest checkpoint kept ([`Store::history_kept_from`]).

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::{ObjectKind, Timestamp};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

use crate::queries::{CurrentMemberRow, OBSERVED_ORDER};
use crate::rows::{ClusterRow, DesiredRow, HeartbeatRow, ObservedRef};
use crate::{from_datetime, to_datetime, Context, Result, Store};

/// The observed columns, in table order (the same in every observed table).
const OBSERVED_COLUMNS: &str = "cluster_id, object_kind, object_namespace, object_name, app, \
version, content_hash, applied_revision, health, sync, reason, message, transitioned_at, \
observed_at, received_at, seq, deleted";

const HEARTBEAT_COLUMNS: &str =
    "cluster_id, seen_at, agent_version, reconciler_names, reconciler_versions";

/// How far before `at` the whole-fleet heartbeat read looks; clusters without a heartbeat in
/// that window are looked up one by one in the whole history.
pub const HEARTBEAT_WINDOW_SECONDS: i64 = 900;

/// How many clusters silent for longer than the window one lookup of older heartbeats names
/// (their ids, up to 128 characters each, are bound into the query, whose size ClickHouse
/// limits to 256 KiB).
pub const SILENT_CLUSTERS_PER_READ: usize = 1_000;

/// A writer of observed rows silent for longer than this does not hold checkpoints back.
pub const WRITER_GONE_SECONDS: i64 = 600;

/// Default spacing of observed-state checkpoints, in hours (the collector's
/// `--checkpoint-hours`). A whole-fleet answer at a moment reads the checkpoint before it and
/// every row that arrived since, so the spacing bounds that read: at the load test's change
/// rate an hour of arrivals is about 40 % of a checkpoint's rows (docs/benchmarks.md).
pub const DEFAULT_CHECKPOINT_HOURS: u32 = 1;

/// [`DEFAULT_CHECKPOINT_HOURS`] in seconds.
pub const DEFAULT_CHECKPOINT_SECONDS: i64 = DEFAULT_CHECKPOINT_HOURS as i64 * 3_600;

fn app_kinds() -> &'static str {
    static KINDS: OnceLock<String> = OnceLock::new();
    KINDS.get_or_init(|| {
        ObjectKind::ALL
            .iter()
            .filter(|kind| kind.is_app_object())
            .map(|kind| format!("'{}'", kind.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Which app objects an observed read at a moment covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedScope<'a> {
    /// Every app object of the fleet.
    All,
    /// The objects of one cluster.
    Cluster(&'a str),
    /// Every object that carried this app's stamp in any row read (so an object whose stamp
    /// changed is read whole, and ends as its newest row says).
    App(&'a str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RenderIdRow {
    pub render_id: u64,
}

/// One complete checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct CheckpointRow {
    pub taken_at: u32,
    pub objects: u64,
}

/// The newest render rendered at or before a moment (0 when none).
pub fn render_at_query(store: &Store, at: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT toUInt64(max(render_id)) AS render_id FROM renders \
WHERE rendered_at <= toDateTime(?)",
        )
        .bind(to_datetime(at))
}

/// Each cluster's inventory row in force under `render` at `at` (removed ones included: the
/// reader drops them), optionally of one cluster.
pub fn inventory_at_query(
    store: &Store,
    at: Timestamp,
    render: u64,
    cluster: Option<&str>,
) -> Query {
    let sql = format!(
        "SELECT ?fields FROM cluster_history WHERE version <= ? AND updated_at <= toDateTime(?){} \
ORDER BY cluster_id, version DESC, updated_at DESC LIMIT 1 BY cluster_id",
        if cluster.is_some() {
            " AND cluster_id = ?"
        } else {
            ""
        }
    );
    let query = store
        .client()
        .query(&sql)
        .bind(render)
        .bind(to_datetime(at));
    match cluster {
        Some(cluster) => query.bind(cluster),
        None => query,
    }
}

/// Each cluster's render group under `render` (removed memberships included), with the render
/// of its membership row, optionally of one cluster; its since set is read by
/// [`member_since_at_query`].
pub fn members_at_query(store: &Store, render: u64, cluster: Option<&str>) -> Query {
    let sql = crate::queries::members_sql(&format!(
        "(SELECT cluster_id, render_group, render_id, removed FROM member_history \
WHERE render_id <= ?{})",
        if cluster.is_some() {
            " AND cluster_id = ?"
        } else {
            ""
        }
    ));
    let query = store.client().query(&sql).bind(render);
    match cluster {
        Some(cluster) => query.bind(cluster),
        None => query,
    }
}

/// Each cluster's newest membership since row under `render`, optionally of one cluster.
pub fn member_since_at_query(store: &Store, render: u64, cluster: Option<&str>) -> Query {
    let sql = crate::queries::newest_since_rows_sql(&format!(
        "(SELECT cluster_id, render_id, since_set FROM member_since_history \
WHERE render_id <= ?{})",
        if cluster.is_some() {
            " AND cluster_id = ?"
        } else {
            ""
        }
    ));
    let query = store.client().query(&sql).bind(render);
    match cluster {
        Some(cluster) => query.bind(cluster),
        None => query,
    }
}

/// The desired row of every (render group, app) in force under `render` (removed ones
/// included), optionally of one render group and one app.
pub fn desired_at_query(
    store: &Store,
    render: u64,
    render_group: Option<&str>,
    app: Option<&str>,
) -> Query {
    let mut sql = String::from("SELECT ?fields FROM desired_history WHERE render_id <= ?");
    if render_group.is_some() {
        sql.push_str(" AND render_group = ?");
    }
    if app.is_some() {
        sql.push_str(" AND app = ?");
    }
    sql.push_str(" ORDER BY render_group, app, render_id DESC LIMIT 1 BY render_group, app");
    let mut query = store.client().query(&sql).bind(render);
    if let Some(render_group) = render_group {
        query = query.bind(render_group);
    }
    if let Some(app) = app {
        query = query.bind(app);
    }
    query
}

/// Each cluster's newest heartbeat stamped in `(at - HEARTBEAT_WINDOW_SECONDS, at]` (one
/// aggregation over those hour partitions; no sort).
pub fn heartbeats_in_window_query(store: &Store, at: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT cluster_id, last_seen AS seen_at, last_agent AS agent_version, \
last_names AS reconciler_names, last_versions AS reconciler_versions FROM (\
SELECT cluster_id, max(seen_at) AS last_seen, argMax(agent_version, seen_at) AS last_agent, \
argMax(reconciler_names, seen_at) AS last_names, argMax(reconciler_versions, seen_at) AS last_versions \
FROM heartbeat_history WHERE seen_at > toDateTime(?) AND seen_at <= toDateTime(?) \
GROUP BY cluster_id) ORDER BY cluster_id",
        )
        .bind(to_datetime(at.plus_seconds(-HEARTBEAT_WINDOW_SECONDS)))
        .bind(to_datetime(at))
}

/// The newest heartbeat stamped at or before `at` of each of `clusters`, wherever it is kept:
/// the history, the floor retention leaves, or the latest heartbeat (for a cluster silent since
/// before the history began).
pub fn heartbeats_of_clusters_at_query(store: &Store, at: Timestamp, clusters: &[&str]) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let part = |table: &str| {
            format!(
                "SELECT {HEARTBEAT_COLUMNS} FROM {table} \
PREWHERE cluster_id IN (SELECT arrayJoin(?)) WHERE seen_at <= toDateTime(?)"
            )
        };
        format!(
            "SELECT ?fields FROM ({} UNION ALL {} UNION ALL {}) \
ORDER BY cluster_id, seen_at DESC LIMIT 1 BY cluster_id",
            part("heartbeat_history"),
            part("heartbeat_floor"),
            part("heartbeats")
        )
    });
    let mut query = store.client().query(sql);
    for _ in 0..3 {
        query = query.bind(clusters).bind(to_datetime(at));
    }
    query
}

/// The latest heartbeat of each of `clusters` that has one (`heartbeats` keeps one row per
/// cluster once merged): when it is at or before a moment, it is the newest at that moment,
/// found without reading the history.
pub fn latest_heartbeats_of_clusters_query(store: &Store, clusters: &[&str]) -> Query {
    store
        .client()
        .query(&format!(
            "SELECT ?fields FROM (SELECT {HEARTBEAT_COLUMNS} FROM heartbeats \
PREWHERE cluster_id IN (SELECT arrayJoin(?))) ORDER BY cluster_id, seen_at DESC LIMIT 1 BY cluster_id"
        ))
        .bind(clusters)
}

/// The complete checkpoints (`taken_at`, `objects`): those whose newest `checkpoint_log` row
/// lists them and does not mark them dropped. A checkpoint still being written has no row yet;
/// retention marks one dropped before its rows go.
pub(crate) const COMPLETE_CHECKPOINTS: &str = "SELECT taken_at, last_objects AS objects FROM (\
SELECT taken_at, argMax(objects, finished_at) AS last_objects, \
argMax(dropped, finished_at) AS last_dropped FROM checkpoint_log GROUP BY taken_at) \
WHERE last_dropped = 0";

/// Complete checkpoints, oldest first.
pub fn checkpoints_query(store: &Store) -> Query {
    store
        .client()
        .query(&format!("{COMPLETE_CHECKPOINTS} ORDER BY taken_at"))
}

/// Which rows of [`observed_at_query`] a read takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedPart {
    /// The checkpoint's rows and the arrivals after it.
    Both,
    /// The checkpoint's rows only.
    Checkpoint,
    /// The arrivals after the checkpoint only.
    Arrivals,
}

/// Where [`observed_at_query`] reads the rows that arrived between the checkpoint and the
/// moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// `observed_arrivals`: sorted by arrival, so the window is a range of its sort key; kept
    /// only while the hourly tier of checkpoints needs it (see `Store::trim_arrivals`).
    Arrivals,
    /// `observed_transitions`: kept for the whole retention, sorted by cluster and object and
    /// partitioned by the agent's day (`observed_at`), so the window is a filter on
    /// `received_at` over the days up to [`STAMPED_AHEAD_SECONDS`] after the moment. One
    /// cluster's window is a range of its sort key.
    Transitions,
}

/// Whether [`observed_at_query`] reads the window after the checkpoint for `part` of
/// `scope`: every part but the checkpoint's does, and one app's checkpoint part does too (its
/// filter picks the objects that had the app in the checkpoint or in the window), so its
/// source matters there as well: `observed_transitions` is sorted by cluster, and a window read
/// from it for one app filters days of rows where `observed_arrivals` reads an hour.
pub fn reads_window(scope: ObservedScope<'_>, part: ObservedPart) -> bool {
    part != ObservedPart::Checkpoint || matches!(scope, ObservedScope::App(_))
}

/// How far after its arrival an agent's stamp (`observed_at`) can lie, with room to spare:
/// the collector refuses stamps more than a day ahead of its clock, and stamps the arrival
/// after that check. A window read from `observed_transitions` skips the day partitions
/// stamped later than this after the moment.
pub const STAMPED_AHEAD_SECONDS: i64 = 2 * 86_400;

/// The app-object rows that decide each object's state at `at`: the checkpoint taken at
/// `checkpoint` and the rows received after it up to `at`, read from `source` (or one `part`
/// of them), in no particular order (the reader keeps each object's newest by
/// `OBSERVED_ORDER`).
pub fn observed_at_query(
    store: &Store,
    checkpoint: Timestamp,
    at: Timestamp,
    scope: ObservedScope<'_>,
    part: ObservedPart,
    source: WindowSource,
) -> Query {
    let (window_table, stamped) = match source {
        WindowSource::Arrivals => ("observed_arrivals", ""),
        WindowSource::Transitions => ("observed_transitions", " AND observed_at <= toDateTime(?)"),
    };
    let in_window = format!(
        "received_at > toDateTime(?) AND received_at <= toDateTime(?){stamped} \
AND object_kind IN ({kinds})",
        kinds = app_kinds()
    );
    let filter = match scope {
        ObservedScope::All => String::new(),
        ObservedScope::Cluster(_) => " AND cluster_id = ?".to_owned(),
        ObservedScope::App(_) => format!(
            " AND (cluster_id, object_kind, object_namespace, object_name) GLOBAL IN (\
SELECT cluster_id, object_kind, object_namespace, object_name FROM observed_checkpoints \
WHERE taken_at = toDateTime(?) AND app = ? \
UNION ALL SELECT cluster_id, object_kind, object_namespace, object_name FROM {window_table} \
WHERE {in_window} AND app = ?)"
        ),
    };
    let from_checkpoint = format!(
        "SELECT {OBSERVED_COLUMNS} FROM observed_checkpoints WHERE taken_at = toDateTime(?){filter}"
    );
    let from_window =
        format!("SELECT {OBSERVED_COLUMNS} FROM {window_table} WHERE {in_window}{filter}");
    let sql = match part {
        ObservedPart::Both => {
            format!("SELECT ?fields FROM ({from_checkpoint} UNION ALL {from_window})")
        }
        ObservedPart::Checkpoint => format!("SELECT ?fields FROM ({from_checkpoint})"),
        ObservedPart::Arrivals => format!("SELECT ?fields FROM ({from_window})"),
    };
    let bind_window = |query: Query| -> Query {
        let query = query.bind(to_datetime(checkpoint)).bind(to_datetime(at));
        match source {
            WindowSource::Arrivals => query,
            WindowSource::Transitions => {
                query.bind(to_datetime(at.plus_seconds(STAMPED_AHEAD_SECONDS)))
            }
        }
    };
    let bind_scope = |query: Query| -> Query {
        match scope {
            ObservedScope::Cluster(cluster) => query.bind(cluster),
            ObservedScope::App(app) => {
                bind_window(query.bind(to_datetime(checkpoint)).bind(app)).bind(app)
            }
            ObservedScope::All => query,
        }
    };
    let mut query = store.client().query(&sql);
    if part != ObservedPart::Arrivals {
        query = bind_scope(query.bind(to_datetime(checkpoint)));
    }
    if part != ObservedPart::Checkpoint {
        query = bind_scope(bind_window(query));
    }
    query
}

/// The statement that writes the checkpoint at `at` from the one at `previous` and the
/// arrivals between them.
pub fn checkpoint_from_previous_query(store: &Store, previous: Timestamp, at: Timestamp) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        checkpoint_sql(&format!(
            "SELECT {OBSERVED_COLUMNS} FROM observed_checkpoints WHERE taken_at = toDateTime(?) \
UNION ALL SELECT {OBSERVED_COLUMNS} FROM observed_arrivals \
WHERE received_at > toDateTime(?) AND received_at <= toDateTime(?)"
        ))
    });
    store
        .client()
        .query(sql)
        .bind(to_datetime(at))
        .bind(to_datetime(previous))
        .bind(to_datetime(previous))
        .bind(to_datetime(at))
}

/// The statement that writes, at the moment bound first, each object's newest row among
/// `rows` (a `SELECT` of the observed columns): one aggregation keyed by the object, keeping
/// the whole row that is greatest by `OBSERVED_ORDER` (no sort of every row).
fn checkpoint_sql(rows: &str) -> String {
    let picked: Vec<String> = (1..=OBSERVED_COLUMNS.split(", ").count())
        .map(|i| format!("tupleElement(newest, {i})"))
        .collect();
    format!(
        "INSERT INTO observed_checkpoints (taken_at, {OBSERVED_COLUMNS}) \
SELECT toDateTime(?) AS taken_at, {picked} FROM (\
SELECT argMax(tuple({OBSERVED_COLUMNS}), {OBSERVED_ORDER}) AS newest FROM ({rows}) \
GROUP BY cluster_id, object_kind, object_namespace, object_name)",
        picked = picked.join(", ")
    )
}

/// The statement that writes the first checkpoint, at `at`, from everything stored: every
/// object's transitions and its latest row, received at or before `at`.
pub fn first_checkpoint_query(store: &Store, at: Timestamp) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        checkpoint_sql(&format!(
            "SELECT {OBSERVED_COLUMNS} FROM observed_transitions \
WHERE received_at <= toDateTime(?) AND object_kind IN ({kinds}) \
UNION ALL SELECT {OBSERVED_COLUMNS} FROM observed_latest \
WHERE received_at <= toDateTime(?) AND object_kind IN ({kinds})",
            kinds = app_kinds()
        ))
    });
    store
        .client()
        .query(sql)
        .bind(to_datetime(at))
        .bind(to_datetime(at))
        .bind(to_datetime(at))
}

/// Copies the current inventory and membership into their history tables: done with the first
/// checkpoint, so rows written before the history tables existed are kept too.
const SEED_CLUSTER_HISTORY: &str = "INSERT INTO cluster_history SELECT cluster_id, group_path, \
group_prefixes, environment, reconciler, label_keys, label_values, updated_at, version, removed \
FROM clusters";
const SEED_MEMBER_HISTORY: &str = "INSERT INTO member_history \
SELECT cluster_id, render_group, render_id, removed FROM render_group_members";

const OBJECTS_IN_CHECKPOINT: &str = "SELECT count() AS objects FROM (SELECT DISTINCT cluster_id, \
object_kind, object_namespace, object_name FROM observed_checkpoints WHERE taken_at = toDateTime(?))";

pub(crate) const LOG_CHECKPOINT: &str =
    "INSERT INTO checkpoint_log (taken_at, objects, finished_at, dropped) \
VALUES (toDateTime(?), ?, now(), 0)";

/// Marks the checkpoints taken before a moment as dropped (retention, before it drops them).
pub(crate) const DROP_CHECKPOINTS_BEFORE: &str = "INSERT INTO checkpoint_log \
(taken_at, objects, finished_at, dropped) SELECT taken_at, 0, now() + 1, 1 FROM checkpoint_log \
WHERE taken_at < toDateTime(?) GROUP BY taken_at HAVING argMax(dropped, finished_at) = 0";

/// Keeps, for each cluster, its newest heartbeat stamped before a moment (retention, before it
/// drops the hours before that moment).
pub(crate) const HEARTBEAT_FLOOR_BEFORE: &str = "INSERT INTO heartbeat_floor \
SELECT cluster_id, seen_at, agent_version, reconciler_names, reconciler_versions \
FROM heartbeat_history WHERE seen_at < toDateTime(?) \
ORDER BY cluster_id, seen_at DESC LIMIT 1 BY cluster_id";

#[derive(Debug, Clone, Copy, Row, Serialize, Deserialize)]
struct ObjectsRow {
    objects: u64,
}

/// The state of the history: which checkpoints are complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoints {
    /// Complete checkpoints, oldest first.
    pub taken: Vec<Timestamp>,
}

impl Checkpoints {
    /// The oldest moment answerable: the oldest checkpoint.
    pub fn kept_from(&self) -> Option<Timestamp> {
        self.taken.first().copied()
    }

    /// The newest checkpoint at or before `at`.
    pub fn base_for(&self, at: Timestamp) -> Option<Timestamp> {
        self.taken.iter().rev().find(|t| **t <= at).copied()
    }
}

impl Store {
    /// The newest render rendered at or before `at`; 0 when there is none.
    pub async fn render_at(&self, at: Timestamp) -> Result<u64> {
        Ok(render_at_query(self, at)
            .fetch_one::<RenderIdRow>()
            .await
            .context(|| "reading the render in force at a moment".to_owned())?
            .render_id)
    }

    pub async fn inventory_at(
        &self,
        at: Timestamp,
        render: u64,
        cluster: Option<&str>,
    ) -> Result<Vec<ClusterRow>> {
        inventory_at_query(self, at, render, cluster)
            .fetch_all()
            .await
            .context(|| "reading the inventory at a moment".to_owned())
    }

    pub async fn members_at(
        &self,
        render: u64,
        cluster: Option<&str>,
    ) -> Result<Vec<CurrentMemberRow>> {
        let (members, since) = tokio::try_join!(
            async {
                members_at_query(self, render, cluster)
                    .fetch_all()
                    .await
                    .context(|| "reading the membership at a moment".to_owned())
            },
            async {
                member_since_at_query(self, render, cluster)
                    .fetch_all()
                    .await
                    .context(|| "reading the membership since sets at a moment".to_owned())
            },
        )?;
        Ok(crate::queries::with_since_sets(members, since))
    }

    pub async fn desired_at(
        &self,
        render: u64,
        render_group: Option<&str>,
        app: Option<&str>,
    ) -> Result<Vec<DesiredRow>> {
        desired_at_query(self, render, render_group, app)
            .fetch_all()
            .await
            .context(|| "reading the desired state at a moment".to_owned())
    }

    /// The newest heartbeat at or before `at` of each of `clusters` that has one (every
    /// cluster of the fleet when `clusters` is `None`).
    pub async fn heartbeats_at(
        &self,
        at: Timestamp,
        clusters: Option<&[&str]>,
        all_clusters: &[&str],
    ) -> Result<Vec<HeartbeatRow>> {
        let context = || "reading heartbeats at a moment".to_owned();
        match clusters {
            Some(clusters) => heartbeats_of_clusters_at_query(self, at, clusters)
                .fetch_all()
                .await
                .context(context),
            None => {
                let mut rows: Vec<HeartbeatRow> = heartbeats_in_window_query(self, at)
                    .fetch_all()
                    .await
                    .context(context)?;
                let found: std::collections::HashSet<&str> =
                    rows.iter().map(|row| row.cluster_id.as_str()).collect();
                let rest: Vec<&str> = all_clusters
                    .iter()
                    .copied()
                    .filter(|id| !found.contains(id))
                    .collect();
                // In parts, so that a fleet silent for a while (a collector outage) does not
                // pass ClickHouse's limit on the size of a query.
                for part in rest.chunks(SILENT_CLUSTERS_PER_READ) {
                    // A cluster whose latest heartbeat is at or before the moment (one silent
                    // since, often for good) needs no look into the history, whose every
                    // partition holds some rows of any cluster that heartbeats.
                    let latest: Vec<HeartbeatRow> = latest_heartbeats_of_clusters_query(self, part)
                        .fetch_all()
                        .await
                        .context(context)?;
                    let (settled, later): (Vec<HeartbeatRow>, Vec<HeartbeatRow>) = latest
                        .into_iter()
                        .partition(|row| i64::from(row.seen_at) <= at.seconds());
                    rows.extend(settled);
                    if later.is_empty() {
                        continue;
                    }
                    let later: Vec<&str> =
                        later.iter().map(|row| row.cluster_id.as_str()).collect();
                    let older: Vec<HeartbeatRow> =
                        heartbeats_of_clusters_at_query(self, at, &later)
                            .fetch_all()
                            .await
                            .context(context)?;
                    rows.extend(older);
                }
                Ok(rows)
            }
        }
    }

    /// Complete checkpoints.
    pub async fn checkpoints(&self) -> Result<Checkpoints> {
        let rows: Vec<CheckpointRow> = checkpoints_query(self)
            .fetch_all()
            .await
            .context(|| "reading the checkpoint log".to_owned())?;
        Ok(Checkpoints {
            taken: rows.iter().map(|row| from_datetime(row.taken_at)).collect(),
        })
    }

    /// Where the rows received after `checkpoint` are read for `scope`: one cluster's from
    /// `observed_transitions` (sorted by cluster), others from `observed_arrivals` while it
    /// still holds the hours from the checkpoint on ([`Store::arrivals_kept_from`]), from
    /// `observed_transitions` once those hours are trimmed.
    pub async fn window_source(
        &self,
        checkpoint: Timestamp,
        scope: ObservedScope<'_>,
    ) -> Result<WindowSource> {
        if let ObservedScope::Cluster(_) = scope {
            return Ok(WindowSource::Transitions);
        }
        Ok(match self.arrivals_kept_from().await? {
            Some(kept_from) if checkpoint >= kept_from => WindowSource::Arrivals,
            _ => WindowSource::Transitions,
        })
    }

    /// Streams the rows that decide each app object's state at `at` (see
    /// [`observed_at_query`], the window read from [`Store::window_source`]); returns how
    /// many.
    pub async fn observed_at(
        &self,
        checkpoint: Timestamp,
        at: Timestamp,
        scope: ObservedScope<'_>,
        part: ObservedPart,
        each: impl FnMut(ObservedRef<'_>),
    ) -> Result<u64> {
        let source = if reads_window(scope, part) {
            self.window_source(checkpoint, scope).await?
        } else {
            // Whichever: the window is not read.
            WindowSource::Transitions
        };
        self.observed_at_from(checkpoint, at, scope, part, source, each)
            .await
    }

    /// [`Store::observed_at`] with the window read from `source`.
    pub async fn observed_at_from(
        &self,
        checkpoint: Timestamp,
        at: Timestamp,
        scope: ObservedScope<'_>,
        part: ObservedPart,
        source: WindowSource,
        mut each: impl FnMut(ObservedRef<'_>),
    ) -> Result<u64> {
        let context = || "reading observed state at a moment".to_owned();
        let mut cursor = observed_at_query(self, checkpoint, at, scope, part, source)
            .fetch::<ObservedRef<'_>>()
            .context(context)?;
        let mut rows = 0;
        while let Some(row) = cursor.next().await.context(context)? {
            rows += 1;
            each(row);
        }
        Ok(rows)
    }

    /// Writes the checkpoint at `at`: from the newest complete one before it and the arrivals
    /// since, or, for the first, from every stored transition (and then copies the current
    /// inventory and membership into their history). Logged once complete; taking one again
    /// is harmless (equal rows collapse). Returns how many objects it holds.
    pub async fn take_checkpoint(&self, at: Timestamp) -> Result<u64> {
        let checkpoints = self.checkpoints().await?;
        let previous = checkpoints.taken.iter().rev().find(|t| **t < at).copied();
        let what = || format!("taking the observed-state checkpoint at {}", at.seconds());
        match previous {
            Some(previous) => checkpoint_from_previous_query(self, previous, at)
                .with_setting("wait_end_of_query", "1")
                .execute()
                .await
                .context(what)?,
            None => {
                first_checkpoint_query(self, at)
                    .with_setting("wait_end_of_query", "1")
                    .execute()
                    .await
                    .context(what)?;
                for statement in [SEED_CLUSTER_HISTORY, SEED_MEMBER_HISTORY] {
                    self.client()
                        .query(statement)
                        .execute()
                        .await
                        .context(what)?;
                }
            }
        }
        let objects = self
            .client()
            .query(OBJECTS_IN_CHECKPOINT)
            .bind(to_datetime(at))
            .fetch_one::<ObjectsRow>()
            .await
            .context(what)?
            .objects;
        self.client()
            .query(LOG_CHECKPOINT)
            .bind(to_datetime(at))
            .bind(objects)
            .execute()
            .await
            .context(what)?;
        Ok(objects)
    }

    /// Takes every checkpoint due at `now`: the moments that are multiples of `every` since the
    /// epoch, after the newest complete one (or only the newest, when there is none yet), up
    /// to the newest that every observed-row writer has made visible (its arrival horizon is
    /// past it) and that is at least `settle` old. Returns the moments taken.
    pub async fn take_due_checkpoints(
        &self,
        now: Timestamp,
        every: i64,
        settle: i64,
    ) -> Result<Vec<Timestamp>> {
        let every = every.max(60);
        let mut limit = now.seconds() - settle;
        for horizon in self.arrival_horizons().await? {
            // A writer that has published no horizon for `WRITER_GONE_SECONDS` is gone (a
            // restarted collector writes under a new name); any other holds back what it has
            // not made visible yet.
            if horizon.is_heartbeat_writer() || horizon.silent_seconds > WRITER_GONE_SECONDS {
                continue;
            }
            limit = limit.min(i64::from(horizon.visible_before) - 1);
        }
        let newest_due = limit.div_euclid(every) * every;
        let checkpoints = self.checkpoints().await?;
        let mut due = Vec::new();
        match checkpoints.taken.last() {
            None => due.push(Timestamp(newest_due)),
            Some(last) => {
                let mut next = (last.seconds().div_euclid(every) + 1) * every;
                while next <= newest_due {
                    due.push(Timestamp(next));
                    next += every;
                }
            }
        }
        for at in &due {
            let objects = self.take_checkpoint(*at).await?;
            tracing::info!(
                at = at.seconds(),
                objects,
                "took an observed-state checkpoint"
            );
        }
        Ok(due)
    }
}

/// Synthetic history for benchmarks: days of steady-state change written by ClickHouse itself
/// from the rows already stored, so that a week of a large fleet takes minutes, not hours.
pub mod synthetic {
    use fleetscope_model::Timestamp;

    use super::{app_kinds, HEARTBEAT_COLUMNS};
    use crate::{to_datetime, Context, Result, Store};

    /// For each day from `from`, `changes` status changes of every app object currently
    /// stored (in `observed_latest`), at moments spread over the day by a hash of the object,
    /// alternating `progressing` and `healthy` and ending healthy, with change numbers above
    /// every stored one; written to `observed_transitions` (and so to its views).
    ///
    /// The objects are copied once into a scratch table (`synthetic_base`, dropped at the end),
    /// and each round of changes (one per object, a `1/changes` slice of a day) is one insert:
    /// a whole day of a 30,000-cluster fleet in one insert (30 million rows across 24 hourly
    /// partitions of `observed_arrivals`) went over ClickHouse's per-query memory limit.
    pub async fn steady_changes(
        store: &Store,
        from: Timestamp,
        days: u32,
        changes: u32,
    ) -> Result<()> {
        let changes = changes.max(2);
        let client = store.client();
        client
            .query("DROP TABLE IF EXISTS synthetic_base")
            .execute()
            .await
            .context(|| "dropping an old synthetic base".to_string())?;
        let base = format!(
            "CREATE TABLE synthetic_base ENGINE = MergeTree ORDER BY tuple() AS \
SELECT * FROM observed_latest WHERE object_kind IN ({kinds}) \
ORDER BY cluster_id, object_kind, object_namespace, object_name, seq DESC \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name",
            kinds = app_kinds()
        );
        client
            .query(&base)
            .with_setting("wait_end_of_query", "1")
            .execute()
            .await
            .context(|| "copying the objects the synthetic changes start from".to_string())?;
        let sql = "INSERT INTO observed_transitions SELECT cluster_id, object_kind, \
object_namespace, object_name, app, version, content_hash, applied_revision, \
if(? % 2 = 0, 'progressing', 'healthy') AS health, sync, reason, message, \
toDateTime(toUInt32(?) + cityHash64(cluster_id, object_name) % intDiv(86400, ?)) AS transitioned_at, \
transitioned_at AS observed_at, transitioned_at AS received_at, \
toUInt64(1000000 + ?) AS seq, toUInt8(0) AS deleted \
FROM synthetic_base";
        for day in 0..i64::from(days) {
            for k in 0..changes {
                let round_start =
                    from.plus_seconds(day * 86_400 + 86_400 * i64::from(k) / i64::from(changes));
                let seq = day as u64 * u64::from(changes) + u64::from(k);
                client
                    .query(sql)
                    .bind(k)
                    .bind(to_datetime(round_start))
                    .bind(changes)
                    .bind(seq)
                    .with_setting("wait_end_of_query", "1")
                    .execute()
                    .await
                    .context(|| format!("writing synthetic changes of day {day}, round {k}"))?;
            }
        }
        client
            .query("DROP TABLE IF EXISTS synthetic_base")
            .execute()
            .await
            .context(|| "dropping the synthetic base".to_string())?;
        Ok(())
    }

    /// One day from `from` (midnight) as the load test's steady scenario makes it:
    /// `changes_per_day` status changes per app object on average (the scenario's rate of 1 %
    /// of app instances a minute is 14.4), each a new applied revision (numbered as the
    /// scenario numbers them, `version@sha1:` and 12 hex digits of a counter) reported healthy, at
    /// moments spread over the day by a hash of the object and the round. Returned as
    /// statements (each an insert of one round into `observed_transitions`, and so into its
    /// views, from a scratch copy of the objects stored) so that the same text runs on any
    /// server; the first and last statements create and drop the scratch table.
    pub fn steady_day_statements(
        store: &Store,
        from: Timestamp,
        changes_per_day: f64,
    ) -> Vec<clickhouse::query::Query> {
        let rounds = changes_per_day.ceil().max(1.0) as u32;
        // Each object takes part in a round with this chance, in thousandths.
        let share = ((changes_per_day / f64::from(rounds)) * 1_000.0).round() as u32;
        let client = store.client();
        let mut statements = vec![
            client.query("DROP TABLE IF EXISTS synthetic_base"),
            client.query(&format!(
                "CREATE TABLE synthetic_base ENGINE = MergeTree ORDER BY tuple() AS \
SELECT * FROM observed_latest WHERE object_kind IN ({kinds}) \
ORDER BY cluster_id, object_kind, object_namespace, object_name, seq DESC \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name",
                kinds = app_kinds()
            )),
        ];
        let sql = "INSERT INTO observed_transitions SELECT cluster_id, object_kind, \
object_namespace, object_name, app, version, content_hash, \
concat(version, '@sha1:', lower(substring(hex(toUInt64(? * 100000000 + rowNumberInAllBlocks())), 5, 12))) \
AS applied_revision, 'healthy' AS health, 'synced' AS sync, 'ReconciliationSucceeded' AS reason, \
'' AS message, \
toDateTime(toUInt32(?) + cityHash64(cluster_id, object_name, ?) % ?) AS transitioned_at, \
transitioned_at AS observed_at, transitioned_at AS received_at, \
toUInt64(2000000 + ?) AS seq, toUInt8(0) AS deleted \
FROM synthetic_base WHERE cityHash64(object_name, cluster_id, ?) % 1000 < ?";
        let span = 86_400 / rounds;
        for round in 0..rounds {
            let start = from.plus_seconds(i64::from(round * span));
            statements.push(
                client
                    .query(sql)
                    .bind(round)
                    .bind(to_datetime(start))
                    .bind(round)
                    .bind(span)
                    .bind(round)
                    .bind(round)
                    .bind(share),
            );
        }
        statements.push(client.query("DROP TABLE IF EXISTS synthetic_base"));
        statements
    }

    /// [`heartbeats`] as statements: one day from `from`, every cluster every `every` seconds,
    /// an hour per statement.
    pub fn heartbeat_day_statements(
        store: &Store,
        from: Timestamp,
        every: u32,
    ) -> Vec<clickhouse::query::Query> {
        (0..24)
            .map(|hour| heartbeat_hour(store, from.plus_seconds(hour * 3_600), every))
            .collect()
    }

    fn heartbeat_hour(store: &Store, start: Timestamp, every: u32) -> clickhouse::query::Query {
        let every = every.clamp(1, 3_600);
        store
            .client()
            .query(&format!(
                "INSERT INTO heartbeat_history ({HEARTBEAT_COLUMNS}) SELECT cluster_id, \
toDateTime(toUInt32(?) + k * ? + cityHash64(cluster_id) % ?) AS seen_at, agent_version, \
reconciler_names, reconciler_versions \
FROM (SELECT * FROM heartbeats ORDER BY cluster_id, seen_at DESC LIMIT 1 BY cluster_id) \
ARRAY JOIN range(intDiv(3600, ?)) AS k"
            ))
            .bind(to_datetime(start))
            .bind(every)
            .bind(every)
            .bind(every)
    }

    /// For each day from `from`, a heartbeat of every cluster every `every` seconds (offset by
    /// a hash of the cluster), written straight to `heartbeat_history`, an hour per insert.
    pub async fn heartbeats(store: &Store, from: Timestamp, days: u32, every: u32) -> Result<()> {
        for hour in 0..i64::from(days) * 24 {
            let start = from.plus_seconds(hour * 3_600);
            heartbeat_hour(store, start, every)
                .with_setting("wait_end_of_query", "1")
                .execute()
                .await
                .context(|| format!("writing synthetic heartbeats of hour {hour}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_apps_checkpoint_part_reads_the_window() {
        assert!(reads_window(
            ObservedScope::App("web"),
            ObservedPart::Checkpoint
        ));
        assert!(!reads_window(ObservedScope::All, ObservedPart::Checkpoint));
        assert!(!reads_window(
            ObservedScope::Cluster("c-1"),
            ObservedPart::Checkpoint
        ));
        for scope in [
            ObservedScope::All,
            ObservedScope::Cluster("c-1"),
            ObservedScope::App("web"),
        ] {
            assert!(reads_window(scope, ObservedPart::Arrivals));
            assert!(reads_window(scope, ObservedPart::Both));
        }
    }
}
