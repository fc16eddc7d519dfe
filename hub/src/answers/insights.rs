//! The answer of what failing clusters share.

use serde::Serialize;
use utoipa::ToSchema;

/// `GET /api/v1/insights/failures`.
#[derive(Debug, Serialize, ToSchema)]
pub struct InsightsAnswer {
    /// The app, as asked.
    pub app: String,
    /// The desired version asked for; null when none was (every version counts).
    pub version: Option<String>,
    /// The group, as asked; null when none was (a scoped token's scope applies all the same).
    pub group: Option<String>,
    /// Selected clusters where the app is `failed` or `out_of_sync`.
    pub failing: u64,
    /// Selected clusters where the app is `in_sync`.
    pub in_sync: u64,
    /// `failing + in_sync`: the clusters compared.
    pub considered: u64,
    /// Selected clusters with the app (at `version`) in any other state (`stale`, `missing`,
    /// `progressing`, `unexpected`, `unknown`): on neither side, and counted nowhere else.
    pub other_states: u64,
    /// Attribute values tested: those carried by at least two considered clusters and not by
    /// all of them. The Bonferroni correction multiplies by this number.
    pub tests: u64,
    /// The family-wise error rate a finding's `p_adjusted` is held to: 0.05.
    pub significance_level: f64,
    /// The over-represented attribute values (failure rate higher with the value than without
    /// it), strongest first: smallest p-value, then largest lift, then attribute and value;
    /// at most `limit`. Significant or not: see `significant`.
    pub findings: Vec<InsightFinding>,
    /// The first finding in words, when it is significant; null otherwise.
    #[schema(
        example = "of 412 clusters failing checkout 1.5.0, 405 have hw=gen2; 2 % of the clusters with hw=gen2 are in sync against 99 % of the others"
    )]
    pub headline: Option<String>,
}

/// One attribute value and how failing and in-sync clusters split on it.
#[derive(Debug, Serialize, ToSchema)]
pub struct InsightFinding {
    /// What kind of attribute the value is of.
    pub attribute: InsightAttribute,
    /// The value: `key=value` for a label (`hw=gen2`), the group path for a group (`emea/de`;
    /// every level of a cluster's group is a value of its own), the environment, the
    /// reconciler (`flux`, `argocd`) or the agent version otherwise.
    pub value: String,
    /// Failing clusters with the value.
    pub failing_with: u64,
    /// In-sync clusters with the value.
    pub in_sync_with: u64,
    /// Failing clusters without the value.
    pub failing_without: u64,
    /// In-sync clusters without the value.
    pub in_sync_without: u64,
    /// `failing_with / (failing_with + in_sync_with)`.
    pub failure_rate_with: f64,
    /// `failing_without / (failing_without + in_sync_without)`.
    pub failure_rate_without: f64,
    /// `failure_rate_with` divided by the failure rate of all considered clusters
    /// (`failing / considered`): above 1 for every finding.
    pub lift: f64,
    /// The one-sided Fisher exact test: the probability, were the value unrelated to failing
    /// (the table's margins fixed), that `failing_with` or more of the failing clusters would
    /// carry it. 0 when smaller than the smallest positive double; `log10_p_value` still
    /// orders those.
    pub p_value: f64,
    /// The base-10 logarithm of `p_value`, finite where `p_value` is 0.
    pub log10_p_value: f64,
    /// Bonferroni-adjusted: `p_value` times `tests`, at most 1.
    pub p_adjusted: f64,
    /// `p_adjusted < significance_level`.
    pub significant: bool,
}

/// The kinds of attribute compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InsightAttribute {
    /// A label `key=value`.
    Label,
    /// A group at any level.
    Group,
    /// The environment.
    Environment,
    /// The reconciler, `flux` or `argocd`.
    Reconciler,
    /// The agent version of the cluster's last heartbeat.
    AgentVersion,
}

impl From<fleetscope_engine::insights::Failures> for InsightsAnswer {
    fn from(f: fleetscope_engine::insights::Failures) -> InsightsAnswer {
        InsightsAnswer {
            app: f.app,
            version: f.version,
            group: f.group,
            failing: f.failing,
            in_sync: f.in_sync,
            considered: f.considered,
            other_states: f.other_states,
            tests: f.tests,
            significance_level: f.significance_level,
            findings: f.findings.into_iter().map(InsightFinding::from).collect(),
            headline: f.headline,
        }
    }
}

impl From<fleetscope_engine::insights::Finding> for InsightFinding {
    fn from(f: fleetscope_engine::insights::Finding) -> InsightFinding {
        InsightFinding {
            attribute: f.attribute.into(),
            value: f.value,
            failing_with: f.failing_with,
            in_sync_with: f.in_sync_with,
            failing_without: f.failing_without,
            in_sync_without: f.in_sync_without,
            failure_rate_with: f.failure_rate_with,
            failure_rate_without: f.failure_rate_without,
            lift: f.lift,
            p_value: f.p_value,
            log10_p_value: f.log10_p_value,
            p_adjusted: f.p_adjusted,
            significant: f.significant,
        }
    }
}

impl From<fleetscope_engine::insights::Attribute> for InsightAttribute {
    fn from(a: fleetscope_engine::insights::Attribute) -> InsightAttribute {
        use fleetscope_engine::insights::Attribute;
        match a {
            Attribute::Label => InsightAttribute::Label,
            Attribute::Group => InsightAttribute::Group,
            Attribute::Environment => InsightAttribute::Environment,
            Attribute::Reconciler => InsightAttribute::Reconciler,
            Attribute::AgentVersion => InsightAttribute::AgentVersion,
        }
    }
}
