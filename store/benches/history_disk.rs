//! What history costs on disk: a generated fleet (30,000 clusters × 100 apps by default) written
//! into a private ClickHouse 18.16, then one day as the load test's steady scenario makes it
//! (1 % of app instances changing a minute, every cluster heartbeating every 30 s) and the day's
//! 24 hourly checkpoints; the same fleet copied into the current engine (chdb, a database on
//! disk, the column codecs of `schema::column_codecs` applied) and the same statements run
//! there. Every partition is merged (`OPTIMIZE … FINAL`, as background merges leave a day once
//! it is written), then the bytes on disk of the day's partitions are read from `system.parts`
//! per table, with the largest columns from `system.columns`, and what a day costs kept for
//! 30 and 90 days: each table for as long as retention keeps it, `observed_arrivals` only while
//! the hourly tier of checkpoints needs it, and the checkpoints the tiers keep.
//!
//! `cargo bench -p fleetscope-store --bench history_disk`; `FLEETSCOPE_BENCH_CLUSTERS` sets the
//! fleet's size, `FLEETSCOPE_BENCH_CODECS=0` leaves the current engine without codecs.
//! Without `--bench` (as under `cargo test`) it runs 200 clusters.

use std::collections::BTreeMap;
use std::time::Instant;

use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_model::Timestamp;
use fleetscope_store::past::{self, synthetic};
use fleetscope_store::retention::{yyyymmdd, TRANSITIONS_EXTRA_DAYS};
use fleetscope_store::sizes::arrival_days;
use fleetscope_store::thinning::CheckpointTiers;
use fleetscope_store::{catalog, schema};
use fleetscope_testkit::chdb::{self, Statement};
use fleetscope_testkit::TestStore;

/// The load test's steady rate: 1 % of app instances a minute, per object and day.
const CHANGES_PER_DAY: f64 = 0.01 * 1_440.0;
const HEARTBEAT_SECONDS: u32 = 30;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let clusters = if bench {
        env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000)
    } else {
        200
    };
    let codecs = env_number("FLEETSCOPE_BENCH_CODECS", 1) != 0;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(clusters, codecs));
}

/// One partition's rows and bytes.
#[derive(Debug, Clone, Default)]
struct Sizes {
    rows: u64,
    bytes: u64,
}

/// The statement that lists every active partition's rows and bytes.
fn partitions_sql(database: &str) -> String {
    format!(
        "SELECT table, partition_id, sum(rows), sum(bytes_on_disk), count() FROM system.parts \
WHERE database = '{database}' AND active GROUP BY table, partition_id ORDER BY table, partition_id"
    )
}

fn columns_sql(database: &str) -> String {
    format!(
        "SELECT table, name, data_compressed_bytes FROM system.columns WHERE database = '{database}' \
AND table IN ('observed_transitions', 'observed_arrivals', 'observed_checkpoints', 'heartbeat_history') \
ORDER BY data_compressed_bytes DESC LIMIT 12"
    )
}

/// The day's share of each table (its day partition, or the hour partitions of the day) and,
/// under `(state)`, the partitions of tables that do not grow by day.
fn day_sizes(tsv: &str, day: i64) -> BTreeMap<String, Sizes> {
    let mut sizes: BTreeMap<String, Sizes> = BTreeMap::new();
    let day_id = yyyymmdd(day).to_string();
    for line in tsv.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let (table, partition) = (fields[0], fields[1]);
        let rows: u64 = fields[2].parse().unwrap();
        let bytes: u64 = fields[3].parse().unwrap();
        let of_the_day = partition == day_id
            || partition
                .parse::<i64>()
                .is_ok_and(|hour| (day * 24..day * 24 + 24).contains(&hour));
        let key = if of_the_day {
            table.to_owned()
        } else if partition == "all" {
            format!("(state) {table}")
        } else {
            continue;
        };
        let entry = sizes.entry(key).or_default();
        entry.rows += rows;
        entry.bytes += bytes;
    }
    sizes
}

fn print_sizes(server: &str, sizes: &BTreeMap<String, Sizes>, clusters: usize) {
    println!("{server}: bytes of the day per table (rows, bytes, bytes per cluster)");
    let mut day_total = 0;
    for (table, size) in sizes {
        println!(
            "  {table:<34} {:>12} rows {:>14} bytes {:>9.1} B/cluster",
            size.rows,
            size.bytes,
            size.bytes as f64 / clusters as f64
        );
        if !table.starts_with("(state)") {
            day_total += size.bytes;
        }
    }
    println!(
        "  day total {day_total} bytes, {:.1} KB per cluster (1 KB = 1,000 bytes)",
        day_total as f64 / clusters as f64 / 1_000.0
    );
    for (name, tiers) in [
        ("default tiers", CheckpointTiers::default()),
        ("every hourly checkpoint kept", "none".parse().unwrap()),
    ] {
        for days in [30, 90] {
            println!(
                "  per cluster per day at {days} days of retention, {name}: {:.1} KB",
                kept_per_day(sizes, &tiers, days) / clusters as f64 / 1_000.0
            );
        }
    }
}

/// Bytes per day kept at `days` of retention: each day table for as long as retention keeps
/// it (`observed_transitions` a day longer, `observed_arrivals` only while the hourly tier of
/// checkpoints needs it) and the checkpoints `tiers` keep, of the day's 24.
fn kept_per_day(sizes: &BTreeMap<String, Sizes>, tiers: &CheckpointTiers, days: u32) -> f64 {
    let bytes = |table: &str| sizes.get(table).map_or(0.0, |size| size.bytes as f64);
    let retention = f64::from(days);
    let transitions_days = retention + TRANSITIONS_EXTRA_DAYS as f64;
    let checkpoint = bytes("observed_checkpoints") / 24.0;
    (bytes("observed_transitions") * transitions_days
        + bytes("heartbeat_history") * retention
        + bytes("rollup_snapshots") * retention
        + bytes("observed_arrivals") * arrival_days(tiers, retention)
        + checkpoint * tiers.kept_over(3_600, days) as f64)
        / retention
}

/// `OPTIMIZE … FINAL` of every partition that has more than one part.
fn optimize_statements(tsv: &str) -> Vec<String> {
    tsv.lines()
        .filter(|l| !l.is_empty())
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let parts: u64 = fields[4].parse().unwrap();
            (parts > 1).then(|| {
                format!(
                    "OPTIMIZE TABLE {} PARTITION ID '{}' FINAL",
                    fields[0], fields[1]
                )
            })
        })
        .collect()
}

async fn run(clusters: usize, codecs: bool) {
    let test = TestStore::start().await;
    let store = &test.store;
    let database = store.database().to_owned();
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters,
        apps: 100,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    let started = Instant::now();
    fleetscope_fixtures::write_fleet(store, &fleet)
        .await
        .expect("the fleet is written");
    println!(
        "fleet of {clusters} clusters × 100 apps written: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(&database)
        .with_validation(false);

    // The current engine gets the same fleet, copied over HTTP from the 18.16 server before
    // the day is written (the views fill the tables derived from these).
    let mut current: Vec<Statement> = catalog::schema_statements()
        .into_iter()
        .map(|entry| Statement::execute(entry.name, entry.sql))
        .collect();
    if codecs {
        for (i, sql) in schema::codec_statements(|t| t.to_owned(), "")
            .into_iter()
            .enumerate()
        {
            current.push(Statement::execute(format!("codec {i}"), sql));
        }
    }
    // Copied at the end, once the day is written on 18.16 too: the fleet's rows alone, those
    // received before the day.
    let day = fleet.spec().now.seconds().div_euclid(86_400) + 1;
    let from = Timestamp(day * 86_400);
    for (table, stamp) in [
        ("clusters", "updated_at"),
        ("heartbeats", "seen_at"),
        ("observed_transitions", "received_at"),
    ] {
        let query = format!(
            "SELECT * FROM {database}.{table} WHERE {stamp} < {} FORMAT Native",
            from.seconds()
        )
        .replace(' ', "%20")
        .replace('*', "%2A")
        .replace('<', "%3C");
        current.push(Statement::execute(
            format!("copy {table}"),
            format!(
                "INSERT INTO {table} SELECT * FROM url('{}/?query={query}', 'Native')",
                test.server.url()
            ),
        ));
    }

    let mut statements: Vec<(String, clickhouse::query::Query)> = Vec::new();
    for (i, query) in synthetic::steady_day_statements(store, from, CHANGES_PER_DAY)
        .into_iter()
        .enumerate()
    {
        statements.push((format!("observed rows, statement {i}"), query));
    }
    for (i, query) in synthetic::heartbeat_day_statements(store, from, HEARTBEAT_SECONDS)
        .into_iter()
        .enumerate()
    {
        statements.push((format!("heartbeats, hour {i}"), query));
    }
    let mut previous = None;
    for hour in 0..24 {
        let at = from.plus_seconds(hour * 3_600);
        let query = match previous {
            None => past::first_checkpoint_query(store, at),
            Some(previous) => past::checkpoint_from_previous_query(store, previous, at),
        };
        statements.push((format!("checkpoint {hour}"), query));
        previous = Some(at);
    }
    for (name, query) in &statements {
        current.push(Statement::execute(
            name.clone(),
            query.sql_display().to_string(),
        ));
    }

    let started = Instant::now();
    for (name, query) in statements {
        query
            .with_setting("wait_end_of_query", "1")
            .execute()
            .await
            .unwrap_or_else(|err| panic!("{name} on 18.16: {err}"));
    }
    println!(
        "the day written on 18.16 (observed rows, heartbeats, 24 checkpoints): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let fetch_tsv = |sql: String| {
        let client = client.clone();
        async move {
            let bytes = client
                .query_raw(&sql)
                .fetch_bytes("TabSeparated")
                .unwrap()
                .collect()
                .await
                .unwrap();
            String::from_utf8(bytes.to_vec()).unwrap()
        }
    };
    let started = Instant::now();
    for sql in optimize_statements(&fetch_tsv(partitions_sql(&database)).await) {
        client
            .query(&sql)
            .with_setting("wait_end_of_query", "1")
            .execute()
            .await
            .unwrap_or_else(|err| panic!("{sql} on 18.16: {err}"));
    }
    println!(
        "18.16 partitions merged: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let server_sizes = day_sizes(&fetch_tsv(partitions_sql(&database)).await, day);
    let server_columns = fetch_tsv(columns_sql(&database)).await;

    // The current engine: optimizing a table merges every partition there.
    for table in [
        "observed_transitions",
        "observed_arrivals",
        "observed_checkpoints",
        "heartbeat_history",
        "observed_latest",
        "heartbeats",
    ] {
        current.push(Statement::execute(
            format!("merge {table}"),
            format!("OPTIMIZE TABLE {table} FINAL"),
        ));
    }
    current.push(Statement::fetch("partitions", partitions_sql(&database)));
    current.push(Statement::fetch("columns", columns_sql(&database)));
    current.push(Statement::fetch(
        "codecs",
        format!(
            "SELECT count() FROM system.columns WHERE database = '{database}' AND compression_codec != ''"
        ),
    ));
    // The 18.16 figures first: the current engine's run below takes as long again.
    println!();
    print_sizes("ClickHouse 18.16", &server_sizes, clusters);
    println!("  largest columns (whole tables):\n{server_columns}");

    let started = Instant::now();
    // Ten minutes per 3,000 clusters, at least ten minutes.
    let deadline = std::time::Duration::from_secs(600 * (clusters as u64).div_ceil(3_000).max(1));
    let run = chdb::run_within(&database, &current, deadline);
    run.assert_all_ran();
    println!(
        "the same on ClickHouse {} (chdb): {:.1} s",
        run.version,
        started.elapsed().as_secs_f64()
    );
    let output = |name: &str| {
        run.results
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.output.clone())
            .unwrap_or_default()
    };
    let current_sizes = day_sizes(&output("partitions"), day);

    println!();
    print_sizes(
        &format!(
            "ClickHouse {} ({} columns with a codec)",
            run.version,
            output("codecs").trim()
        ),
        &current_sizes,
        clusters,
    );
    println!("  largest columns (whole tables):\n{}", output("columns"));
}
