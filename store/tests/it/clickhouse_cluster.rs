//! Cluster mode on real servers: ZooKeeper and four ClickHouse 18.16 servers (two shards of two
//! replicas) started privately. Through the Store API: the clustered schema migrates ON CLUSTER
//! (twice, and from another node), the collector's rows land on the shard their cluster id
//! hashes to and on both of its replicas, the renderer's tables are copied to every node, every
//! read query and the drift rollup answer exactly as a single server does with the same rows,
//! retention drops old partitions on every shard, a database migrated in the other mode is
//! refused, and an insert cut short after its source table took the rows and sent again reaches
//! every materialized view.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use fleetscope_local_clickhouse::{LocalClickHouse, LocalClickHouseCluster};
use fleetscope_store::clickhouse_cluster::{Placement, PLACEMENTS};
use fleetscope_store::queries::ObservedSource;
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig};
use fleetscope_store::{
    catalog, ClusterConfig, HeartbeatRow, ObservedRow, Store, StoreConfig, StoreError,
};
use fleetscope_testkit::grid::{self, GridRows, NOW, POLICY};
use fleetscope_testkit::{fresh_database_name, TestStore};

const CLUSTER: &str = "fleet";
const SHARDS: usize = 2;
const REPLICAS: usize = 2;

fn start_cluster() -> LocalClickHouseCluster {
    fleetscope_testkit::clickhouse_cluster::start(CLUSTER, SHARDS, REPLICAS)
}

fn cluster_store(server: &LocalClickHouse, database: &str) -> Store {
    Store::connect(
        &StoreConfig::new(server.url(), database).with_cluster(ClusterConfig::new(CLUSTER)),
    )
    .expect("valid cluster store config")
}

/// A plain client on one node, for looking at what that node holds.
fn node(server: &LocalClickHouse, database: &str) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(server.url())
        .with_database(database)
        .with_validation(false)
}

/// Loads the grid: the renderer's tables in one insert each, the collector's rows through
/// batch writers, one submission per cluster as reports would come, all at once.
async fn load(store: &Store, rows: &GridRows) {
    store.insert_rows(&rows.renders).await.expect("renders");
    store
        .insert_rows(&rows.render_contents)
        .await
        .expect("what the renders wrote");
    store
        .insert_rows(&rows.match_rules)
        .await
        .expect("match rules");
    store
        .insert_rows(&rows.change_counts)
        .await
        .expect("how many version changes the renders wrote");
    store
        .insert_rows(&rows.version_changes)
        .await
        .expect("desired version changes");
    store
        .insert_rows(&rows.platform_commits)
        .await
        .expect("platform commits");
    store
        .insert_rows(&rows.rollout_records)
        .await
        .expect("rollout records");
    store
        .insert_rows(&rows.rollout_clusters)
        .await
        .expect("rollout clusters");
    store.insert_rows(&rows.clusters).await.expect("inventory");
    store.insert_rows(&rows.members).await.expect("membership");
    store.insert_rows(&rows.desired).await.expect("desired");
    store
        .insert_rows(&rows.since_sets)
        .await
        .expect("since sets");
    store
        .insert_rows(&rows.member_since)
        .await
        .expect("membership since sets");
    store
        .insert_rows(&rows.reason_members)
        .await
        .expect("reason set membership");
    store
        .insert_rows(&rows.reason_sets)
        .await
        .expect("reason sets");
    store.insert_rows(&rows.snapshots).await.expect("snapshots");
    // Collectors' horizons, as their writers publish them (the writer below is unnamed, so the
    // rows keep the arrival times the grid gave them).
    store
        .insert_rows(&rows.arrival_writers)
        .await
        .expect("arrival horizons");
    let observed =
        BatchWriter::<ObservedRow>::spawn(store.clone(), BatchWriterConfig::default(), None);
    let heartbeats =
        BatchWriter::<HeartbeatRow>::spawn(store.clone(), BatchWriterConfig::default(), None);
    let mut per_cluster: BTreeMap<&str, (Vec<ObservedRow>, Vec<HeartbeatRow>)> = BTreeMap::new();
    for row in &rows.observed {
        per_cluster
            .entry(&row.cluster_id)
            .or_default()
            .0
            .push(row.clone());
    }
    for row in &rows.heartbeats {
        per_cluster
            .entry(&row.cluster_id)
            .or_default()
            .1
            .push(row.clone());
    }
    let mut tasks = Vec::new();
    for (observed_rows, heartbeat_rows) in per_cluster.into_values() {
        let (observed, heartbeats) = (observed.clone(), heartbeats.clone());
        tasks.push(tokio::spawn(async move {
            if !observed_rows.is_empty() {
                observed
                    .write(observed_rows)
                    .await
                    .expect("observed rows accepted");
            }
            if !heartbeat_rows.is_empty() {
                heartbeats
                    .write(heartbeat_rows)
                    .await
                    .expect("heartbeats accepted");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer task");
    }
    observed.close().await;
    heartbeats.close().await;
}

/// Tab-separated answer of one query text.
async fn tsv(client: &clickhouse::Client, name: &str, sql: &str) -> String {
    let bytes = client
        .query_raw(sql)
        .fetch_bytes("TabSeparated")
        .unwrap_or_else(|err| panic!("{name}: {err}\n{sql}"))
        .collect()
        .await
        .unwrap_or_else(|err| panic!("{name}: {err}\n{sql}"));
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// Lines of a raw-rows answer, keeping per key (the first `key_columns` columns) only the line
/// with the highest version column (a number or a date-time), sorted: what a reader that keeps
/// the newest row sees.
fn newest_per_key(text: &str, key_columns: usize, version_column: usize) -> Vec<String> {
    let mut best: BTreeMap<Vec<&str>, (&str, &str)> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        let version = fields[version_column];
        let key = fields[..key_columns].to_vec();
        if best
            .get(&key)
            .is_none_or(|(_, v)| (v.len(), *v) < (version.len(), version))
        {
            best.insert(key, (line, version));
        }
    }
    best.into_values()
        .map(|(line, _)| line.to_owned())
        .collect()
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_answers_like_a_single_server() {
    let started = Instant::now();
    let cluster = start_cluster();
    let single = TestStore::start().await;
    eprintln!(
        "ZooKeeper and {} servers ready in {:?}",
        SHARDS * REPLICAS,
        cluster.started_in()
    );
    let database = fresh_database_name();
    let store = cluster_store(cluster.server(0, 0), &database);
    let all: Vec<u32> = fleetscope_store::schema::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();

    // Migrate: everything the first time, nothing the second, nothing from another node.
    let first = Instant::now();
    let report = store.migrate().await.expect("cluster migration");
    let first = first.elapsed();
    assert_eq!(report.applied, all);
    let second = Instant::now();
    let report = store.migrate().await.expect("second cluster migration");
    let second = second.elapsed();
    assert_eq!(report.already_applied, all);
    assert!(report.applied.is_empty());
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    let far = cluster_store(cluster.server(1, 1), &database);
    assert_eq!(far.migrate().await.unwrap().already_applied, all);
    eprintln!("migrate on the cluster: first {first:?}, again {second:?}");

    // Every node has every table, with the engine its placement asks for.
    for server in cluster.servers() {
        let tables: BTreeMap<String, String> = node(server, &database)
            .query("SELECT name, engine FROM system.tables WHERE database = ? ORDER BY name")
            .bind(database.as_str())
            .fetch_all::<(String, String)>()
            .await
            .unwrap()
            .into_iter()
            .collect();
        let mut expected = BTreeMap::new();
        for (table, placement) in PLACEMENTS {
            let engine = |base: &str| format!("Replicated{base}");
            let base = if *table == "observed_arrivals" {
                "MergeTree"
            } else {
                "ReplacingMergeTree"
            };
            match placement {
                Placement::Sharded => {
                    expected.insert(format!("{table}_local"), engine(base));
                    expected.insert(table.to_string(), "Distributed".to_owned());
                }
                Placement::Everywhere => {
                    expected.insert(table.to_string(), engine(base));
                }
            }
        }
        for view in [
            "desired_latest_mv",
            "observed_latest_mv",
            "observed_arrivals_mv",
            "cluster_history_mv",
            "member_history_mv",
            "heartbeat_history_mv",
            "member_since_history_mv",
        ] {
            expected.insert(view.to_owned(), "MaterializedView".to_owned());
        }
        assert_eq!(tables, expected, "tables on {}", server.url());
    }

    // The same rows into the cluster and into a single server.
    let cases = grid::cases();
    let rows = grid::rows(&cases);
    let load_started = Instant::now();
    load(&store, &rows).await;
    let loaded_in = load_started.elapsed();
    load(&single.store, &rows).await;
    single
        .store
        .take_checkpoint(fleetscope_model::Timestamp(NOW.seconds() + 1))
        .await
        .unwrap();
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    eprintln!(
        "{} observed rows and {} heartbeats of {} clusters written to the cluster in {loaded_in:?}",
        rows.observed.len(),
        rows.heartbeats.len(),
        cases.len()
    );

    // Sharded tables: each cluster's rows on exactly the shard its id hashes to, on both
    // replicas; every shard holds a fair share.
    let ids: Vec<String> = cases.iter().map(|c| c.cluster_id.clone()).collect();
    let expected_shard: BTreeMap<String, u64> = node(cluster.server(0, 0), &database)
        .query("SELECT cluster_id, toUInt64(cityHash64(cluster_id) % ?) FROM (SELECT arrayJoin(?) AS cluster_id)")
        .bind(SHARDS as u64)
        .bind(&ids)
        .fetch_all::<(String, u64)>()
        .await
        .unwrap()
        .into_iter()
        .collect();
    // A checkpoint, as the collector takes them, so that its sharded table holds rows too.
    store
        .take_checkpoint(fleetscope_model::Timestamp(NOW.seconds() + 1))
        .await
        .unwrap();
    for (table, placement) in PLACEMENTS {
        // Filled only when retention drops hours of heartbeats.
        if *placement != Placement::Sharded || *table == "heartbeat_floor" {
            continue;
        }
        let local = format!("{table}_local");
        let mut seen_on: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
        for shard in 0..SHARDS {
            let mut replica_sets = Vec::new();
            for replica in 0..REPLICAS {
                let held: BTreeSet<String> = node(cluster.server(shard, replica), &database)
                    .query("SELECT DISTINCT cluster_id FROM ?")
                    .bind(clickhouse::sql::Identifier(&local))
                    .fetch_all::<String>()
                    .await
                    .unwrap()
                    .into_iter()
                    .collect();
                replica_sets.push(held);
            }
            assert!(
                replica_sets.windows(2).all(|w| w[0] == w[1]),
                "the replicas of shard {shard} hold the same clusters in {local}"
            );
            for id in &replica_sets[0] {
                seen_on.entry(id.clone()).or_default().insert(shard);
            }
            assert!(
                !replica_sets[0].is_empty(),
                "shard {shard} holds none of {local}"
            );
        }
        assert!(!seen_on.is_empty(), "{local} holds rows");
        for (id, shards) in &seen_on {
            assert_eq!(
                shards.iter().copied().collect::<Vec<_>>(),
                vec![expected_shard[id] as usize],
                "{id} in {local} is on the shard its id hashes to, and only there"
            );
        }
        let per_shard: Vec<usize> = (0..SHARDS)
            .map(|s| seen_on.values().filter(|set| set.contains(&s)).count())
            .collect();
        eprintln!("{local}: clusters per shard {per_shard:?}");
        for count in &per_shard {
            assert!(
                *count * 4 >= seen_on.len(),
                "{local}: {per_shard:?} is far from even"
            );
        }
    }

    // Tables copied everywhere: every node holds every distinct row the single server holds.
    let single_node = node(&single.server, single.store.database());
    for (table, placement) in PLACEMENTS {
        if *placement != Placement::Everywhere || *table == "schema_migrations" {
            continue;
        }
        let count_sql = format!("SELECT count() FROM (SELECT DISTINCT * FROM {table})");
        let want: u64 = single_node.query(&count_sql).fetch_one().await.unwrap();
        assert!(want > 0, "{table} has rows");
        for server in cluster.servers() {
            let got: u64 = node(server, &database)
                .query(&count_sql)
                .fetch_one()
                .await
                .unwrap();
            assert_eq!(got, want, "{table} on {}", server.url());
        }
    }

    // Every read query of the catalog answers as on the single server.
    let cluster_config =
        StoreConfig::new(cluster.url(), &database).with_cluster(ClusterConfig::new(CLUSTER));
    let single_config = StoreConfig::new(single.server.url(), single.store.database());
    let probe = "case-0017";
    let cluster_queries = catalog::read_queries_for(&cluster_config, NOW, &POLICY, probe);
    let single_queries = catalog::read_queries_for(&single_config, NOW, &POLICY, probe);
    let cluster_node = node(cluster.server(0, 0), &database);
    let mut compared = 0;
    for single_entry in &single_queries {
        let cluster_entry = cluster_queries
            .iter()
            .find(|e| e.name == single_entry.name)
            .expect("the same query in cluster mode");
        let on_cluster = tsv(&cluster_node, &cluster_entry.name, &cluster_entry.sql).await;
        let on_single = tsv(&single_node, &single_entry.name, &single_entry.sql).await;
        match single_entry.name.as_str() {
            // Physical layout: parts, merges and the mode's own checksums differ by design.
            "partitions of a table"
            | "applied migrations"
            | "rows of a table"
            | "table sizes"
            | "change markers" => continue,
            // Raw rows for a reader that keeps the newest per key, in no particular order.
            "observed objects received since"
            | "observed state at a moment"
            | "observed state that arrived after a checkpoint"
            | "one cluster's observed state at a moment"
            | "one app's observed state at a moment"
            | "observed state at a moment, from the transitions"
            | "one app's observed state at a moment, from the transitions" => assert_eq!(
                newest_per_key(&on_cluster, 4, 15),
                newest_per_key(&on_single, 4, 15),
                "{}",
                single_entry.name
            ),
            // When each writer last published and how long it has been silent depend on when
            // the rows were inserted and the query ran.
            "arrival horizons" => assert_eq!(
                fleetscope_testkit::without_last_columns(&on_cluster, 2),
                fleetscope_testkit::without_last_columns(&on_single, 2),
                "{}",
                single_entry.name
            ),
            // A checkpoint's object count is taken right after its insert, on whichever
            // replica answers (one that has not received the rows yet counts fewer).
            "complete checkpoints" => {
                assert_eq!(
                    fleetscope_testkit::without_last_column(&on_cluster),
                    fleetscope_testkit::without_last_column(&on_single),
                    "{}",
                    single_entry.name
                )
            }
            "heartbeats since" | "heartbeats between two horizons" => assert_eq!(
                newest_per_key(&on_cluster, 1, 1),
                newest_per_key(&on_single, 1, 1),
                "{}",
                single_entry.name
            ),
            "observed arrivals since"
            | "observed arrivals between two horizons"
            | "whole table" => assert_eq!(
                sorted_lines(&on_cluster),
                sorted_lines(&on_single),
                "{}",
                single_entry.name
            ),
            _ => assert_eq!(on_cluster, on_single, "{}", single_entry.name),
        }
        assert!(
            !on_single.is_empty(),
            "{} answers something",
            single_entry.name
        );
        compared += 1;
    }
    eprintln!("{compared} catalog queries answered alike on the cluster and a single server");

    // What the hub and the collector call, through the Store API, from either shard.
    let policy = &POLICY;
    let rollup = store.drift_rollup(NOW, policy).await.unwrap();
    assert_eq!(
        rollup,
        single.store.drift_rollup(NOW, policy).await.unwrap()
    );
    assert_eq!(rollup, far.drift_rollup(NOW, policy).await.unwrap());
    assert_eq!(
        rollup[0].clusters,
        cases.len() as u64,
        "the fleet rollup counts every cluster"
    );
    let pairs = store.drift_pairs(NOW, policy).await.unwrap();
    assert_eq!(pairs, single.store.drift_pairs(NOW, policy).await.unwrap());
    let by_cluster: BTreeMap<&str, &str> = pairs
        .iter()
        .map(|p| (p.cluster_id.as_str(), p.state.as_str()))
        .collect();
    for case in cases.iter().filter(|c| c.has_pair()) {
        assert_eq!(
            by_cluster.get(case.cluster_id.as_str()).copied(),
            Some(case.expected().as_str()),
            "{} on the cluster",
            case.cluster_id
        );
    }
    let some: Vec<&str> = ids.iter().step_by(37).map(String::as_str).collect();
    for id in &some {
        assert_eq!(
            store.cluster_drift(id, NOW, policy).await.unwrap(),
            single.store.cluster_drift(id, NOW, policy).await.unwrap()
        );
        assert_eq!(
            far.observed_for_cluster(id).await.unwrap(),
            single.store.observed_for_cluster(id).await.unwrap()
        );
        assert_eq!(
            store.desired_for_cluster(id).await.unwrap(),
            single.store.desired_for_cluster(id).await.unwrap()
        );
        assert_eq!(
            store
                .observed_history(id, NOW.plus_seconds(-86_400), NOW.plus_seconds(1))
                .await
                .unwrap(),
            single
                .store
                .observed_history(id, NOW.plus_seconds(-86_400), NOW.plus_seconds(1))
                .await
                .unwrap()
        );
    }
    assert_eq!(
        store.observed_for_clusters(&some).await.unwrap(),
        single.store.observed_for_clusters(&some).await.unwrap()
    );
    assert_eq!(
        store.live_objects(&some).await.unwrap(),
        single.store.live_objects(&some).await.unwrap()
    );
    assert_eq!(
        store.latest_heartbeats().await.unwrap(),
        single.store.latest_heartbeats().await.unwrap()
    );
    assert_eq!(
        store.stale_clusters(NOW, policy, 1_000).await.unwrap(),
        single
            .store
            .stale_clusters(NOW, policy, 1_000)
            .await
            .unwrap()
    );
    assert_eq!(
        store.known_clusters().await.unwrap(),
        single.store.known_clusters().await.unwrap()
    );
    assert_eq!(
        store.inventory_rows().await.unwrap(),
        single.store.inventory_rows().await.unwrap()
    );
    assert_eq!(
        store.desired_rows().await.unwrap(),
        single.store.desired_rows().await.unwrap()
    );
    assert_eq!(
        store.current_members().await.unwrap(),
        single.store.current_members().await.unwrap()
    );
    assert_eq!(
        store.last_render_commit().await.unwrap(),
        single.store.last_render_commit().await.unwrap()
    );
    let (markers, single_markers) = (
        store.change_markers().await.unwrap(),
        single.store.change_markers().await.unwrap(),
    );
    assert_eq!(
        (markers.last_render, markers.inventory_version),
        (single_markers.last_render, single_markers.inventory_version)
    );
    let since = NOW.plus_seconds(-3_600);
    for source in [ObservedSource::Latest, ObservedSource::Arrivals] {
        let mut on_cluster = Vec::new();
        store
            .observed_objects(source, since, |row| on_cluster.push(row))
            .await
            .unwrap();
        let mut on_single = Vec::new();
        single
            .store
            .observed_objects(source, since, |row| on_single.push(row))
            .await
            .unwrap();
        // The hub keeps the highest seq per object: compare what it keeps.
        let newest = |rows: Vec<ObservedRow>| {
            let mut best: BTreeMap<(String, String, String, String), ObservedRow> = BTreeMap::new();
            for row in rows {
                let key = (
                    row.cluster_id.clone(),
                    row.object_kind.clone(),
                    row.object_namespace.clone(),
                    row.object_name.clone(),
                );
                if best.get(&key).is_none_or(|b| b.change_seq < row.change_seq) {
                    best.insert(key, row);
                }
            }
            best.into_values().collect::<Vec<_>>()
        };
        assert!(!on_single.is_empty());
        assert_eq!(newest(on_cluster), newest(on_single), "{source:?}");
    }
    let heartbeats = store.heartbeats_since(since).await.unwrap();
    let single_heartbeats = single.store.heartbeats_since(since).await.unwrap();
    assert!(!single_heartbeats.is_empty());
    let newest_seen = |rows: &[HeartbeatRow]| {
        let mut best: BTreeMap<&str, u32> = BTreeMap::new();
        for row in rows {
            let entry = best.entry(&row.cluster_id).or_default();
            *entry = (*entry).max(row.seen_at);
        }
        best.into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Vec<_>>()
    };
    assert_eq!(newest_seen(&heartbeats), newest_seen(&single_heartbeats));

    // The hub's snapshots, written and read back alike.
    let written = store.take_rollup_snapshot(NOW, policy, 2).await.unwrap();
    assert_eq!(
        written,
        single
            .store
            .take_rollup_snapshot(NOW, policy, 2)
            .await
            .unwrap()
    );
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    assert_eq!(
        far.rollup_trend("grid", NOW.plus_seconds(-86_400), NOW.plus_seconds(1))
            .await
            .unwrap(),
        single
            .store
            .rollup_trend("grid", NOW.plus_seconds(-86_400), NOW.plus_seconds(1))
            .await
            .unwrap()
    );

    // Table sizes name the tables as a single server does, counting every shard.
    let sizes = store.table_sizes().await.unwrap();
    let single_sizes = single.store.table_sizes().await.unwrap();
    assert_eq!(
        sizes.iter().map(|s| s.table.as_str()).collect::<Vec<_>>(),
        single_sizes
            .iter()
            .map(|s| s.table.as_str())
            .collect::<Vec<_>>()
    );
    let transitions = |sizes: &[fleetscope_store::TableSize]| {
        sizes
            .iter()
            .find(|s| s.table == "observed_transitions")
            .map(|s| s.rows)
    };
    assert_eq!(transitions(&sizes), transitions(&single_sizes));

    // Retention: an old day and old arrival hours go from every shard and every replica.
    let old_day = NOW.plus_seconds(-40 * 86_400);
    let old_rows: Vec<ObservedRow> = ids
        .iter()
        .take(8)
        .map(|id| ObservedRow {
            object_name: "retired".into(),
            observed_at: fleetscope_store::to_datetime(old_day),
            received_at: fleetscope_store::to_datetime(NOW.plus_seconds(-10 * 3_600)),
            change_seq: 1,
            ..rows
                .observed
                .iter()
                .find(|r| &r.cluster_id == id)
                .expect("an observed row")
                .clone()
        })
        .collect();
    store.insert_rows(&old_rows).await.unwrap();
    single.store.insert_rows(&old_rows).await.unwrap();
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    let dropped = store.apply_retention(NOW, 30).await.unwrap();
    assert_eq!(
        dropped,
        single.store.apply_retention(NOW, 30).await.unwrap()
    );
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    let trimmed = store
        .trim_arrivals(NOW, &crate::queries::keep_all_checkpoints())
        .await
        .unwrap();
    assert_eq!(
        trimmed,
        single
            .store
            .trim_arrivals(NOW, &crate::queries::keep_all_checkpoints())
            .await
            .unwrap()
    );
    assert_eq!(trimmed, vec![NOW.seconds().div_euclid(3_600) - 10]);
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    for server in cluster.servers() {
        let client = node(server, &database);
        let retired: u64 = client
            .query("SELECT count() FROM observed_transitions_local WHERE object_name = 'retired'")
            .fetch_one()
            .await
            .unwrap();
        let old_arrivals: u64 = client
            .query("SELECT count() FROM observed_arrivals_local WHERE object_name = 'retired'")
            .fetch_one()
            .await
            .unwrap();
        let kept: u64 = client
            .query("SELECT count() FROM observed_transitions_local")
            .fetch_one()
            .await
            .unwrap();
        assert_eq!((retired, old_arrivals), (0, 0), "on {}", server.url());
        assert!(kept > 0, "the current day stays on {}", server.url());
    }

    // A database migrated in one mode is refused in the other, by name.
    let plain = Store::connect(&StoreConfig::new(cluster.url(), &database)).unwrap();
    let err = plain.migrate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaModeMismatch { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("database {database} was migrated for a cluster, but the store is configured for a single server; use the same cluster setting (--clickhouse-cluster) everywhere, or migrate a new database")
    );
    let single_first = fresh_database_name();
    Store::connect(&StoreConfig::new(cluster.url(), &single_first))
        .unwrap()
        .migrate()
        .await
        .unwrap();
    let err = cluster_store(cluster.server(0, 0), &single_first)
        .migrate()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "database {single_first} was migrated for a single server, but the store is configured for cluster {CLUSTER}"
        )),
        "{err}"
    );

    // The database goes from every node.
    store.drop_database().await.unwrap();
    for server in cluster.servers() {
        let left: u64 = node(server, "default")
            .query("SELECT count() FROM system.databases WHERE name = ?")
            .bind(database.as_str())
            .fetch_one()
            .await
            .unwrap();
        assert_eq!(left, 0, "database dropped on {}", server.url());
    }
    // Dropping left nothing behind in ZooKeeper that would stop the same database from being
    // created again; two services migrating a new database at once, through different nodes,
    // both succeed.
    assert_eq!(store.migrate().await.unwrap().applied, all);
    store.drop_database().await.unwrap();
    let concurrent = fresh_database_name();
    let (first_node, second_node) = (
        cluster_store(cluster.server(0, 1), &concurrent),
        cluster_store(cluster.server(1, 0), &concurrent),
    );
    let (one, two) = tokio::join!(first_node.migrate(), second_node.migrate());
    let (one, two) = (
        one.expect("first concurrent migration"),
        two.expect("second concurrent migration"),
    );
    let mut done: Vec<u32> = one.applied.iter().chain(&two.applied).copied().collect();
    done.sort_unstable();
    done.dedup();
    assert_eq!(done, all, "{one:?} {two:?}");
    eprintln!("whole test: {:?}", started.elapsed());
    // Killed, not stopped: a graceful stop of 18.16 with replicated tables takes seconds per
    // server, and nothing here needs to survive.
    drop(cluster);
}

/// An insert that failed after its rows reached the source table, and was sent again, reaches
/// every materialized view: the one the hub reads (`observed_arrivals`) included. ClickHouse
/// deduplicates a replicated insert whose block it already has, and then writes nothing into
/// the views either; a collector that sends a batch again after a ZooKeeper stop failed its
/// insert half-way would leave the changes in `observed_transitions` but never in
/// `observed_arrivals`, and the hub would not show them until the object changed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_sent_again_after_it_failed_half_way_reaches_every_view() {
    let cluster = start_cluster();
    let database = fresh_database_name();
    let store = cluster_store(cluster.server(0, 0), &database);
    store.migrate().await.expect("cluster migration");
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    let rows: Vec<ObservedRow> = grid::rows(&grid::cases())
        .observed
        .into_iter()
        .take(40)
        .collect();
    let reader = node(cluster.server(1, 1), &database);
    let distinct = |table: &str| {
        let sql = format!(
            "SELECT count() FROM (SELECT DISTINCT cluster_id, object_kind, object_namespace, \
object_name, seq FROM {table})"
        );
        let reader = reader.clone();
        async move { reader.query(&sql).fetch_one::<u64>().await.unwrap() }
    };
    let on_every_node = |statement: String| {
        let clients: Vec<clickhouse::Client> = cluster
            .servers()
            .iter()
            .map(|server| node(server, &database))
            .collect();
        async move {
            for client in clients {
                client.query(&statement).execute().await.unwrap();
            }
        }
    };

    // A view that fails every insert, first of the source table's views (they run in the
    // order of their names, after the source table has the rows): the insert reaches the source
    // table and fails before the other views, as one cut short by ZooKeeper would.
    on_every_node(format!(
        "CREATE TABLE {database}.failing_sink (x UInt8) ENGINE = Null"
    ))
    .await;
    on_every_node(format!(
        "CREATE MATERIALIZED VIEW {database}.aaa_failing_mv TO {database}.failing_sink \
AS SELECT throwIf(length(cluster_id) > 0) AS x FROM {database}.observed_transitions_local"
    ))
    .await;
    let failed = store.insert_rows(&rows).await;
    assert!(failed.is_err(), "the insert fails in the failing view");
    on_every_node(format!("DROP TABLE {database}.aaa_failing_mv")).await;
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    assert!(
        distinct("observed_transitions").await > 0,
        "the failed insert left rows in the source table (else this test shows nothing)"
    );
    assert_eq!(distinct("observed_arrivals").await, 0);

    // Sent again, as the collector does: every row reaches the view too.
    store
        .insert_rows(&rows)
        .await
        .expect("the insert sent again");
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;
    // Distinct rows by identity (the grid repeats some, as redeliveries would), all of them
    // in the source table and the app objects' in the arrivals (the view leaves sources and
    // the like out).
    let keys = |app_only: bool| {
        rows.iter()
            .filter(|r| {
                !app_only
                    || fleetscope_model::ObjectKind::ALL
                        .iter()
                        .any(|kind| kind.as_str() == r.object_kind && kind.is_app_object())
            })
            .map(|r| (&r.cluster_id, &r.object_kind, &r.object_name, r.change_seq))
            .collect::<BTreeSet<_>>()
            .len() as u64
    };
    assert_eq!(distinct("observed_transitions").await, keys(false));
    assert!(keys(true) > 0);
    assert_eq!(distinct("observed_arrivals").await, keys(true));
}
