//! What failing clusters share: for one app, the attribute values (labels, groups at every
//! level, environment, reconciler, agent version) that are over-represented among the clusters
//! where the app fails or drifts, compared with the clusters where it is in sync, each with a
//! one-sided Fisher exact test and a Bonferroni-adjusted verdict. Counts from the sides the fleet
//! keeps per app and the values it keeps per cluster (the fleet's `sides`), or, for one
//! version, from the selected clusters' records; the statistics are plain functions, tested
//! against tables worked out by hand.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::fleet::classify::AppCursor;
pub use crate::fleet::sides::Attribute;
pub use crate::fleet::sides::SideCounts;
use crate::fleet::sides::{side, Side, ValueKey};
use crate::fleet::{Filter, Fleet};

/// What the failing clusters share, strongest evidence first (the API's insights answer
/// documents every field).
#[derive(Debug, Clone, PartialEq)]
pub struct Failures {
    pub app: String,
    pub version: Option<String>,
    pub group: Option<String>,
    pub failing: u64,
    pub in_sync: u64,
    pub considered: u64,
    pub other_states: u64,
    pub tests: u64,
    pub significance_level: f64,
    pub findings: Vec<Finding>,
    pub headline: Option<String>,
}

/// One attribute value and how failing and in-sync clusters split on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub attribute: Attribute,
    pub value: String,
    pub failing_with: u64,
    pub in_sync_with: u64,
    pub failing_without: u64,
    pub in_sync_without: u64,
    pub failure_rate_with: f64,
    pub failure_rate_without: f64,
    pub lift: f64,
    pub p_value: f64,
    pub log10_p_value: f64,
    pub p_adjusted: f64,
    pub significant: bool,
}

/// The family-wise error rate the adjusted p-values are held to.
pub const SIGNIFICANCE_LEVEL: f64 = 0.05;

/// A hasher for [`ValueKey`]s: a multiply-and-rotate over the three numbers (the scheme of
/// rustc's FxHash). Keys are small integers the hub assigned, not caller input, and a pass
/// over 30,000 clusters hashes some ten keys each, so SipHash's cost showed in the route's time.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Room for the attribute values besides one per cluster (groups at every level, shared
/// labels, environments, reconcilers, agent versions) that the tally reserves up front.
const VALUES_BESIDES_IDENTITIES: usize = 8_192;

/// The question, as the handler narrowed it to the caller's scope.
#[derive(Debug)]
pub struct FailuresQuestion {
    pub filter: Filter,
    pub app: String,
    pub version: Option<String>,
    pub group: Option<String>,
    pub limit: usize,
}

/// The fewest considered clusters a value must be on to be tested.
pub const MIN_CLUSTERS_WITH: u64 = SideCounts::FEWEST;

/// What the clusters where `question.app` fails share, from `fleet`: counted from the sides
/// the fleet keeps when no version is asked for, from every selected cluster's records when
/// one is ([`counts`]).
pub fn failures(fleet: &Fleet, question: &FailuresQuestion) -> Failures {
    answer(fleet, question, counts(fleet, question))
}

/// [`failures`] from every selected cluster's records, read one after another: what the kept
/// sides are held equal to.
pub fn failures_scanned(fleet: &Fleet, question: &FailuresQuestion) -> Failures {
    answer(fleet, question, counts_scanned(fleet, question))
}

/// How the selected clusters split on the app and on each value, as [`failures`] counts them.
pub fn counts(fleet: &Fleet, question: &FailuresQuestion) -> SideCounts {
    if question.version.is_some() {
        return counts_scanned(fleet, question);
    }
    fleet
        .symbols
        .find(&question.app)
        .map(|app| fleet.sides.count(&fleet.symbols, &question.filter, app))
        .unwrap_or_default()
}

/// The answer from how the selected clusters split.
fn answer(fleet: &Fleet, question: &FailuresQuestion, tally: SideCounts) -> Failures {
    let failing = tally.failing;
    let in_sync = tally.in_sync;
    let considered = failing + in_sync;
    let mut tests = 0u64;
    let mut candidates = Vec::new();
    for (key, with_failing, with_in_sync) in &tally.values {
        let without_failing = failing - with_failing;
        let without_in_sync = in_sync - with_in_sync;
        if without_failing + without_in_sync == 0 {
            // On every considered cluster: nothing to compare it with.
            continue;
        }
        // Every value listed is on at least MIN_CLUSTERS_WITH clusters (both counts leave out
        // the rest): a value on one cluster only, an identity label such as
        // `fleetscope.io/cluster`, names that cluster, says nothing clusters share, and would
        // only make the Bonferroni correction harsher for the values that do.
        debug_assert!(with_failing + with_in_sync >= MIN_CLUSTERS_WITH);
        tests += 1;
        // Over-represented: a higher failure rate with the value than without it.
        if with_failing * (without_failing + without_in_sync)
            <= without_failing * (with_failing + with_in_sync)
        {
            continue;
        }
        let ln_p = fisher_greater_ln(
            *with_failing,
            *with_in_sync,
            without_failing,
            without_in_sync,
        );
        candidates.push((*key, *with_failing, *with_in_sync, ln_p));
    }
    let overall_rate = failing as f64 / considered.max(1) as f64;
    let mut findings: Vec<(f64, Finding)> = candidates
        .into_iter()
        .map(|((attribute, first, second), a, b, ln_p)| {
            let (c, d) = (failing - a, in_sync - b);
            let rate_with = a as f64 / (a + b) as f64;
            let p_value = ln_p.exp();
            let p_adjusted = (p_value * tests as f64).min(1.0);
            let finding = Finding {
                attribute,
                value: value_text(fleet, attribute, first, second),
                failing_with: a,
                in_sync_with: b,
                failing_without: c,
                in_sync_without: d,
                failure_rate_with: rate_with,
                failure_rate_without: c as f64 / (c + d) as f64,
                lift: rate_with / overall_rate,
                p_value,
                log10_p_value: ln_p / std::f64::consts::LN_10,
                p_adjusted,
                significant: p_adjusted < SIGNIFICANCE_LEVEL,
            };
            (ln_p, finding)
        })
        .collect();
    findings.sort_by(|(ln_x, x), (ln_y, y)| {
        ln_x.total_cmp(ln_y)
            .then(y.lift.total_cmp(&x.lift))
            .then(x.attribute.cmp(&y.attribute))
            .then(x.value.cmp(&y.value))
    });
    findings.truncate(question.limit);
    let findings: Vec<Finding> = findings.into_iter().map(|(_, f)| f).collect();
    let headline = findings
        .first()
        .filter(|f| f.significant)
        .map(|f| headline(question, failing, f));
    Failures {
        app: question.app.clone(),
        version: question.version.clone(),
        group: question.group.clone(),
        failing,
        in_sync,
        considered,
        other_states: tally.other,
        tests,
        significance_level: SIGNIFICANCE_LEVEL,
        findings,
        headline,
    }
}

/// How the selected clusters split, from their records in passes over them: each one's side,
/// then each of its attribute values.
pub fn counts_scanned(fleet: &Fleet, question: &FailuresQuestion) -> SideCounts {
    let mut tally = SideCounts::default();
    let s = &fleet.symbols;
    let Some(app) = s.find(&question.app) else {
        return tally;
    };
    // About one value per cluster (an identity label) and some thousands shared: sized once,
    // the table is not grown (and every entry moved) a dozen times on the way.
    let mut values: HashMap<ValueKey, (u64, u64), BuildHasherDefault<KeyHasher>> =
        HashMap::with_capacity_and_hasher(
            fleet.clusters.len() + VALUES_BESIDES_IDENTITIES,
            BuildHasherDefault::default(),
        );
    // Three passes, each reading one more level of every selected cluster's records: its
    // pair's state, then its inventory record, then the label and prefix lists. A pass's
    // reads of one cluster do not wait on another cluster's, so the processor has many in
    // flight at once; one pass doing all of it per cluster waited on each in turn.
    let mut cursor = AppCursor::new(app);
    let mut sided = Vec::with_capacity(fleet.clusters.len());
    for cluster in fleet.clusters.values() {
        if !fleet.cluster_matches(cluster, &question.filter) {
            continue;
        }
        // The state and the desired version are all this needs: not what the cluster runs.
        let Some((desired, state)) = fleet.current_desired_and_state(cluster, &mut cursor) else {
            continue;
        };
        if let Some(version) = question.version.as_deref() {
            if desired.is_none_or(|d| s.text(d.version) != version) {
                continue;
            }
        }
        let Some(side) = side(state) else {
            tally.other += 1;
            continue;
        };
        match side {
            Side::Failing => tally.failing += 1,
            Side::InSync => tally.in_sync += 1,
        }
        let info = cluster
            .info
            .as_deref()
            .expect("matched clusters are in the inventory");
        sided.push((side, info, cluster.agent_version));
    }
    let attributes: Vec<_> = sided
        .into_iter()
        .map(|(side, info, agent)| {
            (
                side,
                info.label_symbols(),
                info.prefixes.as_slice(),
                info.environment,
                info.reconciler,
                agent,
            )
        })
        .collect();
    for (side, labels, prefixes, environment, reconciler, agent) in attributes {
        let mut add = |key: ValueKey| {
            let counts = values.entry(key).or_default();
            match side {
                Side::Failing => counts.0 += 1,
                Side::InSync => counts.1 += 1,
            }
        };
        for &(key, value) in labels {
            add((Attribute::Label, key, value));
        }
        for &prefix in prefixes {
            add((Attribute::Group, prefix, 0));
        }
        add((Attribute::Environment, environment, 0));
        add((Attribute::Reconciler, reconciler, 0));
        if let Some(agent) = agent {
            add((Attribute::AgentVersion, agent, 0));
        }
    }
    tally.values = values
        .into_iter()
        .filter(|(_, (f, s))| f + s >= SideCounts::FEWEST)
        .map(|(key, (f, s))| (key, f, s))
        .collect();
    tally
}

/// The value as the answer names it: `key=value` for a label, the value itself otherwise.
fn value_text(fleet: &Fleet, attribute: Attribute, first: u32, second: u32) -> String {
    let s = &fleet.symbols;
    match attribute {
        Attribute::Label => format!("{}={}", s.text(first), s.text(second)),
        _ => s.text(first).to_owned(),
    }
}

/// The value in a sentence: `hw=gen2`, `group emea/de`, `environment prod`, …
fn value_words(finding: &Finding) -> String {
    match finding.attribute {
        Attribute::Label => finding.value.clone(),
        Attribute::Group => format!("group {}", finding.value),
        Attribute::Environment => format!("environment {}", finding.value),
        Attribute::Reconciler => format!("reconciler {}", finding.value),
        Attribute::AgentVersion => format!("agent version {}", finding.value),
    }
}

/// A share as a percentage a reader takes in at a glance: whole numbers, but one decimal where
/// rounding would say 0 or 100 of something that is neither.
fn percent(part: u64, whole: u64) -> String {
    let share = 100.0 * part as f64 / whole as f64;
    let whole_number = share.round();
    if (whole_number == 0.0 && part > 0) || (whole_number == 100.0 && part < whole) {
        format!("{share:.1} %")
    } else {
        format!("{whole_number:.0} %")
    }
}

/// The top finding in words.
fn headline(question: &FailuresQuestion, failing: u64, finding: &Finding) -> String {
    let what = match &question.version {
        Some(version) => format!("{} {version}", question.app),
        None => question.app.clone(),
    };
    let words = value_words(finding);
    format!(
        "of {failing} clusters failing {what}, {} have {words}; {} of the clusters with {words} are in sync against {} of the others",
        finding.failing_with,
        percent(finding.in_sync_with, finding.failing_with + finding.in_sync_with),
        percent(
            finding.in_sync_without,
            finding.failing_without + finding.in_sync_without
        ),
    )
}

/// ln Γ(x) for x ≥ 1: the Lanczos approximation (g = 7, nine coefficients), relative error
/// about 1e-15, so that factorials of counts in the millions stay exact enough in log space.
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// ln of `n` choose `k`.
fn ln_choose(n: u64, k: u64) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// The natural log of the one-sided Fisher exact test's p-value for the 2×2 table
///
/// ```text
///                 failing   in sync
/// with value         a         b
/// without value      c         d
/// ```
///
/// that is, with the margins fixed, the probability that `a` or more of the `a + c` failing
/// clusters carry the value (the hypergeometric upper tail). Every term is in log space, the
/// first from ln Γ and each next one by the ratio of consecutive terms; the sum stops once the
/// terms, past the mode, fall below e⁻⁵⁰ of the largest.
pub fn fisher_greater_ln(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let total = a + b + c + d;
    let failing = a + c;
    let with = a + b;
    let top = failing.min(with);
    let ln_denominator = ln_choose(total, with);
    let mut ln_term = ln_choose(failing, a) + ln_choose(total - failing, b) - ln_denominator;
    let mode = ((with + 1) as f64 * (failing + 1) as f64 / (total + 2) as f64).floor() as u64;
    let mut ln_max = ln_term;
    let mut sum = 1.0; // the terms so far, relative to exp(ln_max)
    let mut x = a;
    while x < top {
        // P(x + 1) / P(x) = (K - x)(n - x) / ((x + 1)(N - K - n + x + 1))
        let ratio = ((failing - x) as f64 * (with - x) as f64)
            / ((x + 1) as f64 * (total + x + 1 - failing - with) as f64);
        ln_term += ratio.ln();
        x += 1;
        if ln_term > ln_max {
            sum = sum * (ln_max - ln_term).exp() + 1.0;
            ln_max = ln_term;
        } else {
            sum += (ln_term - ln_max).exp();
        }
        if x > mode && ln_term < ln_max - 50.0 {
            break;
        }
    }
    (ln_max + sum.ln()).min(0.0)
}

/// The one-sided Fisher exact test's p-value ([`fisher_greater_ln`]); 0 when smaller than the
/// smallest positive double.
pub fn fisher_greater(a: u64, b: u64, c: u64, d: u64) -> f64 {
    fisher_greater_ln(a, b, c, d).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64, relative: f64) -> bool {
        (x - y).abs() <= relative * y.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        assert!(ln_gamma(1.0).abs() < 1e-14);
        assert!(ln_gamma(2.0).abs() < 1e-14);
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-14));
        assert!(close(ln_gamma(11.0), 3_628_800f64.ln(), 1e-14));
        // ln 100! and Γ(1/2) = √π.
        assert!(close(ln_gamma(101.0), 363.739_375_555_563_47, 1e-14));
        assert!(close(
            ln_gamma(0.5 + 1.0),
            (std::f64::consts::PI.sqrt() / 2.0).ln(),
            1e-13
        ));
        let by_sum: f64 = (1..=100_000u32).map(|k| f64::from(k).ln()).sum();
        assert!(close(ln_gamma(100_001.0), by_sum, 1e-12));
    }

    /// Tables whose upper tails are worked out by hand from the hypergeometric terms.
    #[test]
    fn fisher_matches_tables_worked_by_hand() {
        // Fisher's tea: P(3) + P(4) = (C(4,3)·C(4,1) + 1) / C(8,4) = 17/70.
        assert!(close(fisher_greater(3, 1, 1, 3), 17.0 / 70.0, 1e-12));
        // Perfect separation of 5 and 5: 1 / C(10,5).
        assert!(close(fisher_greater(5, 0, 0, 5), 1.0 / 252.0, 1e-12));
        // K = 9 failing, n = 10 with the value, N = 16: (C(9,8)·C(7,2) + C(9,9)·C(7,1)) / C(16,10).
        assert!(close(fisher_greater(8, 2, 1, 5), 196.0 / 8_008.0, 1e-12));
        // The smallest possible count: the whole distribution, p = 1.
        assert!(close(fisher_greater(0, 5, 4, 3), 1.0, 1e-12));
        // A single cluster with the value, failing, among 1 failing of 10: 1/10.
        assert!(close(fisher_greater(1, 0, 0, 9), 0.1, 1e-12));
    }

    /// Against the sum of every term from ln-choose, on tables big enough that the terms
    /// themselves underflow in linear space.
    #[test]
    fn fisher_agrees_with_the_direct_sum_on_large_tables() {
        for (a, b, c, d) in [
            (405, 10, 7, 29_000),
            (60, 940, 240, 8_760),
            (30, 970, 270, 8_730),
            (1_200, 3_000, 800, 25_000),
        ] {
            let (total, failing, with) = (a + b + c + d, a + c, a + b);
            let ln_terms: Vec<f64> = (a..=failing.min(with))
                .map(|x| {
                    ln_choose(failing, x) + ln_choose(total - failing, with - x)
                        - ln_choose(total, with)
                })
                .collect();
            let ln_max = ln_terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let direct = ln_max
                + ln_terms
                    .iter()
                    .map(|t| (t - ln_max).exp())
                    .sum::<f64>()
                    .ln();
            let ln_p = fisher_greater_ln(a, b, c, d);
            assert!(
                (ln_p - direct).abs() < 1e-9 * direct.abs().max(1.0),
                "{a} {b} {c} {d}: {ln_p} against {direct}"
            );
        }
        // A planted cause at 30,000 clusters: far below any double, still ordered in log space.
        assert!(fisher_greater_ln(405, 10, 7, 29_000) < -2_000.0);
        assert_eq!(fisher_greater(405, 10, 7, 29_000), 0.0);
    }

    #[test]
    fn percentages_keep_a_decimal_where_rounding_would_hide_a_cluster() {
        assert_eq!(percent(1, 50), "2 %");
        assert_eq!(percent(1, 1_000), "0.1 %");
        assert_eq!(percent(999, 1_000), "99.9 %");
        assert_eq!(percent(0, 7), "0 %");
        assert_eq!(percent(7, 7), "100 %");
    }
}
