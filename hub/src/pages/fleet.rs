//! The fleet page: a group (the whole fleet without one), its groups one level down worst
//! first, each with its clusters, stale clusters and a bar of its pairs by drift state; the
//! clusters of the group; and its apps with their desired and running versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};

use super::answers::{ByState, DriftPage, Environments, GroupRollup, Summary};
use super::lists::Params;
use super::view::{self, Page};
use super::{api_moment, Caller, PageError, Query, Ui};

/// Pairs of the group's clusters read for its cluster list, a page at a time.
const CLUSTER_PAIRS_PER_PAGE: u32 = 300;

/// Groups one level down shown at most (the worst); the rest are counted.
const CHILD_GROUPS_SHOWN: usize = 200;

/// `GET /ui/fleet?group=&at=&cursor=`.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let group = params.get("group");
    let at = params.get("at");
    let cursor = params.get("cursor");
    let title = group.map_or_else(|| "The fleet".to_owned(), |g| format!("Group {g}"));
    let page = ui.page(title, at, &uri).keep("group", group);
    page.answer(&uri, content(&ui, &headers, &page, group, at, cursor).await)
}

async fn content(
    ui: &Ui,
    headers: &HeaderMap,
    page: &Page,
    group: Option<&str>,
    at: Option<&str>,
    cursor: Option<&str>,
) -> Result<Markup, PageError> {
    let caller = ui.caller(headers)?;
    let at = api_moment(at);
    let level = group.map_or(0, |g| g.split('/').count());
    let summary: Summary = ui
        .ask(
            &caller,
            &Query::new("/api/v1/summary")
                .with("group", group)
                .with("depth", Some((level + 1).to_string()))
                .with("at", at.clone())
                .build(),
        )
        .await?;
    let environments: Environments = ui
        .ask(
            &caller,
            &Query::new("/api/v1/environments")
                .with("group", group)
                .with("at", at.clone())
                .build(),
        )
        .await?;
    let clusters = match group {
        Some(group) => Some(cluster_list(ui, &caller, page, group, at, cursor).await?),
        None => None,
    };
    let mut children: Vec<&GroupRollup> = summary
        .groups
        .iter()
        .filter(|g| g.depth as usize == level + 1)
        .collect();
    children.sort_by(|a, b| worst_first(a, b));
    Ok(html! {
        (breadcrumbs(page, group))
        p class="generated" { "Answer of " (view::time(summary.generated_at.as_deref())) "." }
        (totals(page, group, &summary))
        @if !children.is_empty() {
            section aria-labelledby="groups" {
                h2 id="groups" { "Groups, worst first" }
                (group_table(page, &children))
            }
        }
        @if let Some(clusters) = clusters {
            (clusters)
        }
        section aria-labelledby="apps" {
            h2 id="apps" { "Apps" }
            (apps_table(page, group, &environments))
        }
    })
}

/// Lower share in sync first, then more failed, then by name.
fn worst_first(a: &GroupRollup, b: &GroupRollup) -> std::cmp::Ordering {
    let share = |g: &GroupRollup| view::in_sync_share(&g.rollup.app_instances_by_state);
    let failed = |g: &GroupRollup| {
        g.rollup
            .app_instances_by_state
            .get("failed")
            .copied()
            .unwrap_or(0)
    };
    share(a)
        .total_cmp(&share(b))
        .then(failed(b).cmp(&failed(a)))
        .then(a.group.cmp(&b.group))
}

fn breadcrumbs(page: &Page, group: Option<&str>) -> Markup {
    let mut trail = Vec::new();
    if let Some(group) = group {
        let parts: Vec<&str> = group.split('/').collect();
        for i in 0..parts.len() {
            trail.push((parts[i], parts[..=i].join("/")));
        }
    }
    html! {
        nav class="crumbs" aria-label="Group path" {
            a href=(page.link("/ui/fleet").build()) { "fleet" }
            @for (name, path) in &trail {
                " / "
                a href=(page.link("/ui/fleet").with("group", Some(path.clone())).build()) { (name) }
            }
        }
    }
}

fn totals(page: &Page, group: Option<&str>, summary: &Summary) -> Markup {
    let t = &summary.total;
    html! {
        section class="totals" aria-label="Totals" {
            dl class="figures" {
                div { dt { "Clusters" } dd id="total-clusters" { (t.clusters) } }
                div { dt { "Reporting" } dd id="total-reporting" { (t.reporting_clusters) } }
                div {
                    dt { "Stale" }
                    dd id="total-stale" {
                        a href=(page.link("/ui/stale").with("group", group).build()) { (t.stale_clusters) }
                    }
                }
                div { dt { "App instances" } dd id="total-instances" { (t.app_instances) } }
                div { dt { "In sync" } dd id="total-in-sync" { (view::in_sync_percent(&t.app_instances_by_state)) } }
            }
            (view::state_bar(&t.app_instances_by_state))
            p id="total-counts" { (view::state_counts(&t.app_instances_by_state)) }
            (view::legend())
        }
    }
}

fn group_table(page: &Page, children: &[&GroupRollup]) -> Markup {
    let hidden = children.len().saturating_sub(CHILD_GROUPS_SHOWN);
    html! {
        table class="groups" {
            thead {
                tr {
                    th scope="col" { "Group" }
                    th scope="col" class="num" { "Clusters" }
                    th scope="col" class="num" { "Stale" }
                    th scope="col" class="num" { "In sync" }
                    th scope="col" class="wide" { "App instances by state" }
                }
            }
            tbody {
                @for g in children.iter().take(CHILD_GROUPS_SHOWN) {
                    tr data-group=(g.group) {
                        th scope="row" {
                            a href=(page.link("/ui/fleet").with("group", Some(g.group.clone())).build()) { (g.group) }
                        }
                        td class="num clusters" { (g.rollup.clusters) }
                        td class="num stale" { (g.rollup.stale_clusters) }
                        td class="num share" { (view::in_sync_percent(&g.rollup.app_instances_by_state)) }
                        td class="wide" {
                            (view::state_bar(&g.rollup.app_instances_by_state))
                            (view::state_counts(&g.rollup.app_instances_by_state))
                        }
                    }
                }
            }
        }
        @if hidden > 0 {
            p { (hidden) " more groups, all with a larger share in sync, are not shown." }
        }
    }
}

/// The group's clusters, each with its pairs by state, a page of pairs at a time.
async fn cluster_list(
    ui: &Ui,
    caller: &Caller,
    page: &Page,
    group: &str,
    at: Option<String>,
    cursor: Option<&str>,
) -> Result<Markup, PageError> {
    let states: Vec<&str> = view::STATES.iter().map(|(name, _, _)| *name).collect();
    let pairs: DriftPage = ui
        .ask(
            caller,
            &Query::new("/api/v1/drift")
                .with("group", Some(group))
                .with("state", Some(states.join(",")))
                .with("limit", Some(CLUSTER_PAIRS_PER_PAGE.to_string()))
                .with("cursor", cursor)
                .with("at", at)
                .build(),
        )
        .await?;
    let mut clusters: BTreeMap<&str, ByState> = BTreeMap::new();
    for pair in &pairs.items {
        *clusters
            .entry(pair.cluster.as_str())
            .or_default()
            .entry(pair.state.clone())
            .or_default() += 1;
    }
    Ok(html! {
        section aria-labelledby="clusters" {
            h2 id="clusters" { "Clusters" }
            @if clusters.is_empty() {
                p { "No cluster of this group has an app desired or running." }
            } @else {
                table class="clusters" {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" class="wide" { "Apps by state" } } }
                    tbody {
                        @for (cluster, by_state) in &clusters {
                            tr data-cluster=(cluster) {
                                th scope="row" { a href=(page.link(format!("/ui/clusters/{}", super::segment(cluster))).build()) { (cluster) } }
                                td class="wide" { (view::state_counts(by_state)) }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = &pairs.next_cursor {
                p { a rel="next" href=(page.link("/ui/fleet").with("group", Some(group)).with("cursor", Some(next.clone())).build()) { "More clusters" } }
            }
        }
    })
}

fn apps_table(page: &Page, group: Option<&str>, environments: &Environments) -> Markup {
    html! {
        @if environments.apps.is_empty() {
            p { "No app is desired or running here." }
        } @else {
            table class="apps" {
                thead {
                    tr {
                        th scope="col" { "App" }
                        th scope="col" { "Environment" }
                        th scope="col" { "Desired" }
                        th scope="col" { "Running" }
                    }
                }
                tbody {
                    @for app in &environments.apps {
                        @for (i, env) in app.environments.iter().enumerate() {
                            tr data-app=(app.app) data-environment=(env.environment) {
                                @if i == 0 {
                                    th scope="row" rowspan=(app.environments.len()) {
                                        a href=(page.link(format!("/ui/apps/{}", super::segment(&app.app))).with("group", group).build()) { (app.app) }
                                    }
                                }
                                td { (env.environment) }
                                td class="desired" { (versions(&env.desired)) }
                                td class="running" { (versions(&env.running)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Versions with their cluster counts, `1.5.0 × 257`.
fn versions(counts: &BTreeMap<String, u64>) -> Markup {
    html! {
        @if counts.is_empty() { "—" }
        @for (i, (version, n)) in counts.iter().enumerate() {
            @if i > 0 { ", " }
            span class="version" { (version) } " × " (n)
        }
    }
}
