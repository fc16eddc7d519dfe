//! Plain-text tables for the terminal: the drift rollup as a tree of groups with counts.

use std::fmt::Write;
use std::time::Duration;

use fleetscope_model::DriftState;
use fleetscope_store::GroupRollup;

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A short human duration: `45 s`, `12 min`, `3.5 h`, `2.1 d`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7_199 => format!("{} min", s / 60),
        7_200..=172_799 => format!("{:.1} h", s as f64 / 3_600.0),
        _ => format!("{:.1} d", s as f64 / 86_400.0),
    }
}

const STATE_COLUMNS: &[(DriftState, &str)] = &[
    (DriftState::InSync, "IN SYNC"),
    (DriftState::Progressing, "PROGRESSING"),
    (DriftState::Failed, "FAILED"),
    (DriftState::OutOfSync, "OUT OF SYNC"),
    (DriftState::Missing, "MISSING"),
    (DriftState::Unexpected, "UNEXPECTED"),
    (DriftState::Stale, "STALE"),
    (DriftState::Unknown, "UNKNOWN"),
];

/// The rollup as a table: one line per group, indented by depth, the fleet first.
/// `max_depth` hides deeper groups. Columns are as wide as their widest value.
pub fn rollup_table(rollups: &[GroupRollup], max_depth: Option<usize>) -> String {
    let shown: Vec<&GroupRollup> = rollups
        .iter()
        .filter(|r| max_depth.is_none_or(|d| r.depth <= d))
        .collect();
    let label = |r: &GroupRollup| {
        if r.group_path.is_empty() {
            "(fleet)".to_owned()
        } else {
            format!("{}{}", "  ".repeat(r.depth), r.group_path)
        }
    };
    let mut header: Vec<String> = vec![
        "GROUP".into(),
        "CLUSTERS".into(),
        "REPORTING".into(),
        "QUIET".into(),
    ];
    header.extend(STATE_COLUMNS.iter().map(|(_, title)| (*title).to_owned()));
    header.push("IN SYNC %".into());
    let lines: Vec<Vec<String>> = shown
        .iter()
        .map(|rollup| {
            let mut cells = vec![
                label(rollup),
                thousands(rollup.clusters),
                thousands(rollup.reporting_clusters()),
                thousands(rollup.stale_clusters),
            ];
            cells.extend(
                STATE_COLUMNS
                    .iter()
                    .map(|(state, _)| thousands(rollup.count(*state))),
            );
            let total = rollup.total_pairs();
            let share = if total == 0 {
                0.0
            } else {
                100.0 * rollup.count(DriftState::InSync) as f64 / total as f64
            };
            cells.push(format!("{share:.1}%"));
            cells
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            std::iter::once(&header)
                .chain(&lines)
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&lines) {
        for (i, cell) in row.iter().enumerate() {
            if i == 0 {
                let _ = write!(out, "{cell:<w$}", w = widths[0]);
            } else {
                let _ = write!(out, "  {cell:>w$}", w = widths[i]);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use expect_test::expect;

    use super::*;

    #[test]
    fn numbers_and_durations() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(3_000_000), "3,000,000");
        assert_eq!(duration(Duration::from_secs(45)), "45 s");
        assert_eq!(duration(Duration::from_secs(1_500)), "25 min");
        assert_eq!(duration(Duration::from_secs(3 * 86_400)), "3.0 d");
    }

    #[test]
    fn rollup_table_layout() {
        let rollup =
            |group: &str, depth, clusters, stale, pairs: &[(DriftState, u64)]| GroupRollup {
                group_path: group.to_owned(),
                depth,
                clusters,
                stale_clusters: stale,
                pairs: pairs.iter().copied().collect::<BTreeMap<_, _>>(),
            };
        let rollups = vec![
            rollup(
                "",
                0,
                1200,
                30,
                &[
                    (DriftState::InSync, 58_000),
                    (DriftState::Failed, 1_200),
                    (DriftState::Stale, 800),
                ],
            ),
            rollup(
                "emea",
                1,
                1200,
                30,
                &[
                    (DriftState::InSync, 58_000),
                    (DriftState::Failed, 1_200),
                    (DriftState::Stale, 800),
                ],
            ),
            rollup("emea/de", 2, 10, 0, &[(DriftState::InSync, 500)]),
        ];
        expect![[r#"
            GROUP        CLUSTERS  REPORTING  QUIET  IN SYNC  PROGRESSING  FAILED  OUT OF SYNC  MISSING  UNEXPECTED  STALE  UNKNOWN  IN SYNC %
            (fleet)         1,200      1,170     30   58,000            0   1,200            0        0           0    800        0      96.7%
              emea          1,200      1,170     30   58,000            0   1,200            0        0           0    800        0      96.7%
                emea/de        10         10      0      500            0       0            0        0           0      0        0     100.0%
        "#]]
        .assert_eq(&rollup_table(&rollups, None));
        assert_eq!(
            rollup_table(&rollups, Some(1)).lines().count(),
            3,
            "header, fleet and depth 1"
        );
    }
}
