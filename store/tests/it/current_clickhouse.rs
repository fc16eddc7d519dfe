//! SQL conformance: every DDL statement and every query text of the store runs on the current
//! ClickHouse engine (chdb) as well as on the real 18.16 server, and on the same data (the drift
//! grid) both return byte-identical results.

use fleetscope_store::catalog;
use fleetscope_testkit::chdb::{self, Statement};
use fleetscope_testkit::grid::{self, NOW, POLICY};
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn every_statement_runs_on_both_versions_with_equal_results() {
    let test = TestStore::start().await;
    let store = &test.store;
    let database = store.database().to_owned();
    let cases = grid::cases();
    let inserts = grid::rows(&cases).insert_statements();
    let queries = catalog::read_queries(&database, NOW, &POLICY, "case-0017");
    let upkeep = catalog::upkeep_statements(&database, NOW);
    let maintenance = catalog::maintenance_statements(&database);

    let mut statements: Vec<Statement> = catalog::schema_statements()
        .into_iter()
        .map(|entry| Statement::execute(entry.name, entry.sql))
        .collect();
    statements.extend(
        inserts
            .iter()
            .enumerate()
            .map(|(i, sql)| Statement::execute(format!("grid insert {}", i + 1), sql.clone())),
    );
    statements.extend(
        upkeep
            .iter()
            .map(|entry| Statement::execute(entry.name.clone(), entry.sql.clone())),
    );
    statements.extend(
        queries
            .iter()
            .map(|entry| Statement::fetch(entry.name.clone(), entry.sql.clone())),
    );
    // Last, since they remove rows.
    statements.extend(
        maintenance
            .iter()
            .map(|entry| Statement::execute(entry.name.clone(), entry.sql.clone())),
    );

    // The real server: the schema is already there (TestStore migrated it); load the same data.
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(&database)
        .with_validation(false);
    for sql in &inserts {
        client
            .query(sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("grid insert on 18.16: {err}"));
    }
    for entry in &upkeep {
        client
            .query(&entry.sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("{} on 18.16: {err}", entry.name));
    }
    let mut server_outputs = Vec::new();
    for entry in &queries {
        let mut cursor = client
            .query_raw(&entry.sql)
            .fetch_bytes("TabSeparated")
            .unwrap_or_else(|err| panic!("{} on 18.16: {err}", entry.name));
        let bytes = cursor
            .collect()
            .await
            .unwrap_or_else(|err| panic!("{} on 18.16: {err}\n{}", entry.name, entry.sql));
        server_outputs.push(String::from_utf8(bytes.to_vec()).expect("utf-8"));
    }
    // The grid's transitions are all of the sample day, which the maintenance drops.
    let day_rows = || async {
        client
            .query(
                "SELECT count() FROM observed_transitions WHERE toYYYYMMDD(observed_at) = 20270115",
            )
            .fetch_one::<u64>()
            .await
            .expect("count the sample day's transitions")
    };
    assert!(
        day_rows().await > 0,
        "the grid has transitions on the sample day"
    );
    for entry in &maintenance {
        client
            .query(&entry.sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("{} on 18.16: {err}", entry.name));
    }
    assert_eq!(day_rows().await, 0, "the day partition is dropped on 18.16");

    let run = chdb::run(&database, &statements);
    assert!(
        run.version.starts_with("2"),
        "chdb reports a current ClickHouse, got {}",
        run.version
    );
    let failures: Vec<String> = run
        .results
        .iter()
        .zip(&statements)
        .filter(|(result, _)| !result.ok)
        .map(|(result, statement)| format!("{}: {}\n{}", result.name, result.error, statement.sql))
        .collect();
    assert!(
        failures.is_empty(),
        "failed on ClickHouse {}:\n{}",
        run.version,
        failures.join("\n\n")
    );

    let fetched: Vec<_> = run
        .results
        .iter()
        .filter(|r| {
            statements
                .iter()
                .any(|s| s.name == r.name && s.mode == chdb::Mode::Fetch)
        })
        .collect();
    assert_eq!(fetched.len(), queries.len());
    for ((entry, server), current) in queries.iter().zip(&server_outputs).zip(fetched) {
        if [
            "partitions of a table",
            "applied migrations",
            "rows of a table",
            "table sizes",
        ]
        .contains(&entry.name.as_str())
        {
            // Physical layout differs between versions: current ClickHouse collapses duplicates
            // of a ReplacingMergeTree already at insert (optimize_on_insert), 18.16 only at merge.
            // That these run is what matters; every other query reads through duplicates.
            continue;
        }
        assert!(
            !server.is_empty(),
            "{} returned nothing on the grid; the comparison would prove nothing",
            entry.name
        );
        // These hand raw rows to a reader that keeps the newest row per key: (key columns,
        // version column). Versions differ in which superseded rows they still hold (current
        // ClickHouse collapses at insert, 18.16 at merge); the newest per key must be equal.
        let newest_per_key = match entry.name.as_str() {
            "observed objects received since"
            | "observed state at a moment"
            | "observed state that arrived after a checkpoint"
            | "one cluster's observed state at a moment"
            | "one app's observed state at a moment"
            | "observed state at a moment, from the transitions"
            | "one app's observed state at a moment, from the transitions" => Some((4, 15)),
            "heartbeats since" | "heartbeats between two horizons" => Some((1, 1)),
            _ => None,
        };
        if let Some((key_columns, version_column)) = newest_per_key {
            fn newest(text: &str, key_columns: usize, version_column: usize) -> Vec<String> {
                let mut best: std::collections::BTreeMap<Vec<&str>, (String, &str)> =
                    std::collections::BTreeMap::new();
                for line in text.lines() {
                    let fields: Vec<&str> = line.split('\t').collect();
                    let key = fields[..key_columns].to_vec();
                    let version = fields[version_column];
                    let keep = best
                        .get(&key)
                        .is_none_or(|(_, v)| (v.len(), *v) < (version.len(), version));
                    if keep {
                        best.insert(key, (line.to_owned(), version));
                    }
                }
                best.into_values().map(|(line, _)| line).collect()
            }
            assert_eq!(
                newest(server, key_columns, version_column),
                newest(&current.output, key_columns, version_column),
                "{} differs between 18.16 and {}",
                entry.name,
                run.version
            );
            continue;
        }
        if entry.name == "arrival horizons" {
            // The last two columns, when each writer last published and how long it has been
            // silent, depend on when the rows were inserted and the query ran.
            assert_eq!(
                fleetscope_testkit::without_last_columns(server, 2),
                fleetscope_testkit::without_last_columns(&current.output, 2),
                "{} differs between 18.16 and {}",
                entry.name,
                run.version
            );
            continue;
        }
        assert_eq!(
            server, &current.output,
            "{} differs between 18.16 and {}",
            entry.name, run.version
        );
    }
}

/// The column codecs the store gives a current server apply there on the schema as migrated,
/// with rows already stored (they stay, and read back the same).
#[test]
fn column_codecs_apply_on_the_current_engine_and_keep_the_rows() {
    use fleetscope_store::schema;

    let mut statements: Vec<Statement> = catalog::schema_statements()
        .into_iter()
        .map(|entry| Statement::execute(entry.name, entry.sql))
        .collect();
    statements.push(Statement::execute(
        "a heartbeat before the codecs",
        "INSERT INTO heartbeat_history VALUES ('c1', toDateTime(1800000000), '1.0.0', ['flux'], ['2.3.0'])",
    ));
    for (i, sql) in schema::codec_statements(|t| t.to_owned(), "")
        .into_iter()
        .enumerate()
    {
        statements.push(Statement::execute(format!("codec {i}"), sql));
    }
    statements.push(Statement::execute(
        "merge",
        "OPTIMIZE TABLE heartbeat_history FINAL",
    ));
    statements.push(Statement::fetch(
        "columns with a codec",
        "SELECT count() FROM system.columns WHERE database = currentDatabase() AND compression_codec != ''",
    ));
    statements.push(Statement::fetch(
        "the heartbeat",
        "SELECT cluster_id, toUInt32(seen_at), reconciler_versions FROM heartbeat_history",
    ));
    statements.push(Statement::fetch(
        "codecs shown",
        "SELECT table, name, compression_codec FROM system.columns \
WHERE database = currentDatabase() AND compression_codec != ''",
    ));
    let run = chdb::run("codecs", &statements);
    run.assert_all_ran();
    assert!(
        schema::has_codecs(&run.version),
        "chdb's {} has codecs",
        run.version
    );
    let output = |name: &str| {
        run.results
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.output.trim().to_owned())
            .unwrap()
    };
    assert_eq!(
        output("columns with a codec"),
        schema::column_codecs().len().to_string()
    );
    assert_eq!(output("the heartbeat"), "c1\t1800000000\t['2.3.0']");
    // As the server shows them, each is the codec listed (so `migrate` leaves it alone next
    // time, and changes it when the list changes).
    let shown = output("codecs shown");
    for (table, column, _, codec) in schema::column_codecs() {
        let line = shown
            .lines()
            .find(|line| line.starts_with(&format!("{table}\t{column}\t")))
            .unwrap_or_else(|| panic!("{table}.{column} has a codec"));
        let shown = line.rsplit('\t').next().unwrap();
        assert!(
            schema::codec_is(shown, codec),
            "{table}.{column}: {shown} is {codec}"
        );
        assert!(!schema::codec_is(shown, "LZ4HC(9)"));
    }
}
