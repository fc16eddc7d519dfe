//! Property tests of the ingest protocol's decoder and validator: whatever a body holds, the
//! collector never panics on it; it either accepts the report or refuses it with an error that
//! names a field (or says what is wrong with the body as a whole); and an accepted report
//! survives encoding and decoding unchanged.
//!
//! 256 cases per property by default; `PROPTEST_CASES` sets another number for longer runs.

use fleetscope_collector::protocol::{
    decode, seq_limit, Change, DecodeError, Report, ReportKind, MAX_SEQ,
};
use fleetscope_model::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::Value;

const NOW: Timestamp = Timestamp(1_800_000_000);

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// Whether `field` is a place in a report, as the validator names them.
fn is_report_field(field: &str) -> bool {
    const TOP: &[&str] = &[
        "cluster",
        "agent_version",
        "seq",
        "change_seq_high",
        "reconcilers",
        "changes",
    ];
    const CHANGE: &[&str] = &[
        "change_seq",
        "kind",
        "namespace",
        "name",
        "app",
        "version",
        "content_hash",
        "applied_revision",
        "health",
        "sync",
        "reason",
        "observed_at",
        "transitioned_at",
    ];
    if TOP.contains(&field) || field.starts_with("reconcilers.") {
        return true;
    }
    let Some(rest) = field.strip_prefix("changes[") else {
        return false;
    };
    let Some((index, name)) = rest.split_once("].") else {
        return false;
    };
    !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) && CHANGE.contains(&name)
}

/// Decodes and validates one body the way the collector does, checking what every outcome must
/// look like. Returns the accepted report, if any.
fn check_body(body: &[u8], gzip: bool) -> Result<Option<Report>, TestCaseError> {
    let report = match decode(body, gzip) {
        Ok(report) => report,
        Err(err) => {
            let text = err.to_string();
            prop_assert!(text.starts_with("body "), "{text}");
            prop_assert!(!text.ends_with('.'), "{text}");
            prop_assert!(
                matches!(
                    err,
                    DecodeError::BadJson(_)
                        | DecodeError::BadGzip(_)
                        | DecodeError::TooLarge(_)
                        | DecodeError::DecompressedTooLarge
                ),
                "{err:?}"
            );
            return Ok(None);
        }
    };
    check_report(report)
}

fn check_report(report: Report) -> Result<Option<Report>, TestCaseError> {
    match report.clone().validate(NOW) {
        Ok(valid) => {
            let limit = seq_limit(NOW);
            prop_assert!(valid.report_seq <= limit && valid.change_seq_high <= limit);
            prop_assert!(valid
                .items
                .iter()
                .all(|i| (1..=limit).contains(&i.change_seq)));
            prop_assert!(valid.report_seq >= 1 || valid.kind == ReportKind::Heartbeat);
            prop_assert_eq!(valid.items.len(), report.changes.len());
            // Encoding and decoding again gives the same report.
            let again = decode(&report.encode(), true);
            prop_assert_eq!(again.as_ref(), Ok(&report));
            let plain = decode(&serde_json::to_vec(&report).unwrap(), false);
            prop_assert_eq!(plain.as_ref(), Ok(&report));
            Ok(Some(report))
        }
        Err(err) => {
            prop_assert!(is_report_field(&err.field), "unnamed field: {err}");
            prop_assert!(!err.message.is_empty(), "{err}");
            prop_assert!(!err.message.ends_with('.'), "{err}");
            Ok(None)
        }
    }
}

fn valid_change(change_seq: u64, name: &str) -> Change {
    Change {
        change_seq,
        kind: "HelmRelease".into(),
        namespace: "shop".into(),
        name: name.into(),
        app: Some("checkout".into()),
        version: Some("1.4.0".into()),
        content_hash: Some(format!("sha256:{}", "a".repeat(64))),
        applied_revision: "1.4.0".into(),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: "UpgradeSucceeded".into(),
        message: "Helm upgrade succeeded".into(),
        transitioned_at: Some(NOW.seconds() - 60),
        observed_at: NOW.seconds() - 5,
        deleted: false,
        labels: Default::default(),
        target_revision: String::new(),
        images: Vec::new(),
    }
}

fn valid_report() -> Report {
    Report {
        cluster: "store-0042".into(),
        agent_version: "0.1.0".into(),
        report_seq: 118,
        sent_at: NOW.seconds(),
        kind: ReportKind::Snapshot,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: 5_200,
        changes: vec![
            valid_change(5_120, "checkout"),
            valid_change(5_121, "payments"),
        ],
        stamped_apps: Vec::new(),
    }
}

/// Numbers around every boundary the validator has.
fn number() -> impl Strategy<Value = u64> {
    let limit = seq_limit(NOW);
    prop_oneof![
        1 => Just(0u64),
        4 => 1..1_000u64,
        2 => limit - 2..limit + 3,
        1 => MAX_SEQ - 2..MAX_SEQ + 3,
        1 => u64::MAX - 2..=u64::MAX,
        1 => any::<u64>(),
    ]
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![
        1 => Just(0i64),
        6 => NOW.seconds() - 1_000..NOW.seconds() + 2 * 86_400,
        1 => -5i64..5,
        1 => any::<i64>(),
    ]
}

fn text(valid: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        30 => Just(valid.to_owned()),
        1 => Just(String::new()),
        1 => "[a-zA-Z0-9._:/ -]{0,20}",
        1 => "\\PC{0,12}",
        1 => any::<String>(),
        1 => Just("x".repeat(300)),
    ]
}

fn option_text(valid: &'static str) -> impl Strategy<Value = Option<String>> {
    prop_oneof![1 => Just(None), 3 => text(valid).prop_map(Some)]
}

fn change() -> impl Strategy<Value = Change> {
    (
        (
            number(),
            prop_oneof![
                Just("HelmRelease".to_owned()),
                Just("Kustomization".to_owned()),
                text("Application")
            ],
            text("shop"),
            prop_oneof![Just("api".to_owned()), Just("web".to_owned()), text("x")],
            option_text("checkout"),
            option_text("1.4.0"),
            prop_oneof![
                2 => Just(None),
                6 => Just(Some(format!("sha256:{}", "0".repeat(64)))),
                1 => option_text("sha256:0")
            ],
        ),
        (
            text("1.4.0"),
            prop_oneof![Just("healthy".to_owned()), text("degraded")],
            prop_oneof![Just("synced".to_owned()), text("unknown")],
            text("Ready"),
            text("message"),
            prop_oneof![Just(None), time().prop_map(Some)],
            time(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (change_seq, kind, namespace, name, app, version, content_hash),
                (
                    applied_revision,
                    health,
                    sync,
                    reason,
                    message,
                    transitioned_at,
                    observed_at,
                    deleted,
                ),
            )| Change {
                change_seq,
                kind,
                namespace,
                name,
                app,
                version,
                content_hash,
                applied_revision,
                health,
                sync,
                reason,
                message,
                transitioned_at,
                observed_at,
                deleted,
                labels: Default::default(),
                target_revision: String::new(),
                images: Vec::new(),
            },
        )
}

fn report() -> impl Strategy<Value = Report> {
    (
        prop_oneof![Just("store-0042".to_owned()), text("edge-1")],
        text("0.1.0"),
        number(),
        any::<i64>(),
        prop_oneof![
            Just(ReportKind::Delta),
            Just(ReportKind::Snapshot),
            Just(ReportKind::Heartbeat)
        ],
        proptest::collection::btree_map(text("flux"), text("v2.4.0"), 0..3),
        prop_oneof![Just(0u64), number()],
        proptest::collection::vec(change(), 0..4),
    )
        .prop_map(
            |(
                cluster,
                agent_version,
                seq,
                sent_at,
                kind,
                reconcilers,
                change_seq_high,
                changes,
            )| {
                Report {
                    cluster,
                    agent_version,
                    report_seq: seq,
                    sent_at,
                    kind,
                    reconcilers,
                    change_seq_high,
                    changes,
                    stamped_apps: Vec::new(),
                }
            },
        )
}

/// Every place in a JSON document, as a list of steps from the root.
fn places(value: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                here.push(Step::Key(key.clone()));
                places(child, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                here.push(Step::Index(index));
                places(child, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn at<'a>(value: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(value, |value, step| match step {
        Step::Key(key) => &mut value[key.as_str()],
        Step::Index(index) => &mut value[*index],
    })
}

/// A JSON value of any shape.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,10}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,8}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    AddField(usize, String, Value),
    FlipByte(usize, u8),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), json_value()).prop_map(|(p, v)| Mutation::Replace(p, v)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        1 => (any::<usize>(), "[a-z_]{1,10}", json_value())
            .prop_map(|(p, k, v)| Mutation::AddField(p, k, v)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::FlipByte(p, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// Applies mutations to the JSON of a valid report and returns the body.
fn mutate(report: &Report, mutations: &[Mutation]) -> Vec<u8> {
    let mut value = serde_json::to_value(report).unwrap();
    let mut bytes_edits = Vec::new();
    for m in mutations {
        let mut all = Vec::new();
        places(&value, &mut Vec::new(), &mut all);
        match m {
            Mutation::Replace(p, v) => *at(&mut value, &all[p % all.len()]) = v.clone(),
            Mutation::Remove(p) => {
                let path = &all[p % all.len()];
                if let Some((last, parent)) = path.split_last() {
                    match (at(&mut value, parent), last) {
                        (Value::Object(map), Step::Key(key)) => {
                            map.remove(key);
                        }
                        (Value::Array(items), Step::Index(index)) => {
                            items.remove(*index);
                        }
                        _ => {}
                    }
                }
            }
            Mutation::AddField(p, key, v) => {
                if let Value::Object(map) = at(&mut value, &all[p % all.len()]) {
                    map.insert(key.clone(), v.clone());
                }
            }
            Mutation::FlipByte(..) | Mutation::Truncate(_) => bytes_edits.push(m.clone()),
        }
    }
    let mut body = serde_json::to_vec(&value).unwrap();
    for m in bytes_edits {
        match m {
            Mutation::FlipByte(p, b) if !body.is_empty() => {
                let len = body.len();
                body[p % len] = b;
            }
            Mutation::Truncate(p) => body.truncate(p % (body.len() + 1)),
            _ => {}
        }
    }
    body
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn the_valid_report_is_accepted() {
    let body = valid_report().encode();
    assert_eq!(check_body(&body, true).unwrap(), Some(valid_report()));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_body(&bytes, false)?;
        check_body(&bytes, true)?;
        // The same bytes as a valid gzip stream, so the JSON reader sees them too.
        check_body(&gzip(&bytes), true)?;
    }

    #[test]
    fn mutated_valid_reports_are_accepted_or_refused_by_name(
        mutations in proptest::collection::vec(mutation(), 1..4),
        compress in any::<bool>(),
    ) {
        let body = mutate(&valid_report(), &mutations);
        if compress {
            check_body(&gzip(&body), true)?;
        } else {
            check_body(&body, false)?;
        }
    }

    #[test]
    fn generated_reports_are_accepted_or_refused_by_name(report in report()) {
        let accepted = check_report(report.clone())?;
        // And through the wire: the same outcome after encoding.
        let through_wire = check_body(&report.encode(), true)?;
        prop_assert_eq!(accepted, through_wire);
    }
}
