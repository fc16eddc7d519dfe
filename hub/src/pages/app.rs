//! The app page: desired and running versions per group, its instances by drift state and the
//! first clusters holding their desired version back, what the failing clusters share, and the app's rollouts with the newest one's
//! progress curve.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};

use super::answers::{
    DriftPage, Insights, RolloutDetail, RolloutPage, Summary, VersionCount, Versions,
};
use super::lists::Params;
use super::view::{self, Page};
use super::{api_moment, segment, Caller, PageError, Query, Ui};

/// Clusters holding their desired version back shown (a version's gate page pages through
/// all).
const HOLDING_BACK_SHOWN: u32 = 20;

/// Rollouts listed, newest first.
const ROLLOUTS_SHOWN: u32 = 5;

/// Findings of the failure insights shown.
const FINDINGS_SHOWN: usize = 10;

/// `GET /ui/apps/{app}?group=&at=`.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    Path(app): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let (group, at) = (params.get("group"), params.get("at"));
    let page = ui.page(format!("App {app}"), at, &uri).keep("group", group);
    let content = async {
        let caller = ui.caller(&headers)?;
        content(&ui, &caller, &page, &app, group, api_moment(at)).await
    };
    page.answer(&uri, content.await)
}

async fn content(
    ui: &Ui,
    caller: &Caller,
    page: &Page,
    app: &str,
    group: Option<&str>,
    at: Option<String>,
) -> Result<Markup, PageError> {
    let level = group.map_or(0, |g| g.split('/').count());
    let versions: Versions = ui
        .ask(
            caller,
            &Query::new(format!("/api/v1/apps/{}/versions", segment(app)))
                .with("group", group)
                .with("depth", Some((level + 1).to_string()))
                .with("at", at.clone())
                .build(),
        )
        .await?;
    let mut desired: Vec<&VersionCount> = versions.desired.iter().collect();
    desired.sort_by(|a, b| b.clusters.cmp(&a.clusters).then(a.version.cmp(&b.version)));
    // The app's pairs by state, and the first clusters where it is not in sync: both kept
    // current by the hub, so the page costs little however large the fleet.
    let counts_path = Query::new("/api/v1/summary")
        .with("app", Some(app))
        .with("group", group)
        .with("depth", Some("0"))
        .with("at", at.clone())
        .build();
    let counts = ui.ask::<Summary>(caller, &counts_path);
    let held_path = Query::new("/api/v1/drift")
        .with("app", Some(app))
        .with("group", group)
        .with("limit", Some(HOLDING_BACK_SHOWN.to_string()))
        .with("at", at.clone())
        .build();
    let held = ui.ask::<DriftPage>(caller, &held_path);
    let insights_path = Query::new("/api/v1/insights/failures")
        .with("app", Some(app))
        .with("group", group)
        .with("at", at.clone())
        .build();
    let insights = ui.ask::<Insights>(caller, &insights_path);
    let rollouts = rollouts(ui, caller, page, app, group, at.is_some());
    // Asked at once: each is worked out on a thread of its own.
    let (counts, held, insights, rollouts) = tokio::join!(counts, held, insights, rollouts);
    let (counts, held, insights, rollouts) = (counts?, held?, insights?, rollouts?);
    Ok(html! {
        nav class="crumbs" aria-label="Group path" {
            a href=(page.link("/ui/fleet").with("group", group).build()) { (group.unwrap_or("fleet")) }
            " / " (app)
        }
        section aria-labelledby="versions" {
            h2 id="versions" { "Versions, desired and running" }
            (version_table(&versions))
        }
        section aria-labelledby="holding" {
            h2 id="holding" { "Clusters holding a version back" }
            (holding_back(page, app, group, &counts, &held, &desired))
        }
        section aria-labelledby="insights" {
            h2 id="insights" { "What failing clusters share" }
            (insights_table(&insights))
        }
        (rollouts)
    })
}

/// Versions as rows, desired and running clusters as columns, per group and in all, each with
/// a bar of its share.
fn version_table(versions: &Versions) -> Markup {
    let all: BTreeSet<&str> = versions
        .desired
        .iter()
        .chain(&versions.running)
        .map(|v| v.version.as_str())
        .collect();
    let groups: BTreeSet<&str> = versions
        .desired
        .iter()
        .chain(&versions.running)
        .flat_map(|v| v.groups.keys().map(String::as_str))
        .collect();
    let find = |list: &'_ [VersionCount], v: &str| {
        list.iter().find(|c| c.version == v).map(|c| c.clusters)
    };
    let total_desired: u64 = versions.desired.iter().map(|v| v.clusters).sum();
    let total_running: u64 = versions.running.iter().map(|v| v.clusters).sum();
    let group_cell = |list: &[VersionCount], v: &str, g: &str| {
        list.iter()
            .find(|c| c.version == v)
            .and_then(|c| c.groups.get(g).copied())
            .unwrap_or(0)
    };
    html! {
        @if all.is_empty() {
            p { "No cluster here desires or runs this app." }
        } @else {
            div class="scroll" {
                table class="versions" {
                    thead {
                        tr {
                            th scope="col" rowspan="2" { "Version" }
                            th scope="colgroup" colspan="2" { "All" }
                            @for g in &groups { th scope="colgroup" colspan="2" { (g) } }
                        }
                        tr {
                            th scope="col" class="num" { "desired" } th scope="col" class="num" { "running" }
                            @for _ in &groups { th scope="col" class="num" { "desired" } th scope="col" class="num" { "running" } }
                        }
                    }
                    tbody {
                        @for v in &all {
                            @let d = find(&versions.desired, v).unwrap_or(0);
                            @let r = find(&versions.running, v).unwrap_or(0);
                            tr data-version=(v) {
                                th scope="row" { span class="version" { (v) } }
                                td class="num desired" { (d) (share_bar(d, total_desired)) }
                                td class="num running" { (r) (share_bar(r, total_running)) }
                                @for g in &groups {
                                    td class="num" data-group=(g) data-kind="desired" { (group_cell(&versions.desired, v, g)) }
                                    td class="num" data-group=(g) data-kind="running" { (group_cell(&versions.running, v, g)) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A small bar of `n` out of `total`.
fn share_bar(n: u64, total: u64) -> Markup {
    let w = if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    };
    html! {
        svg class="share" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true" {
            rect class="track" x="0" y="0" width="100" height="6" {}
            rect class="fill" x="0" y="0" width=(format!("{w:.2}")) height="6" {}
        }
    }
}

fn holding_back(
    page: &Page,
    app: &str,
    group: Option<&str>,
    counts: &Summary,
    held: &DriftPage,
    desired: &[&VersionCount],
) -> Markup {
    let by_state = &counts.total.app_instances_by_state;
    let in_sync = by_state.get("in_sync").copied().unwrap_or(0);
    let all = counts.total.app_instances;
    html! {
        div class="held" id="app-pairs" {
            p {
                strong id="app-in-sync" { (in_sync) } " of " strong id="app-instances" { (all) }
                " instances of " (app) " in sync (" (view::in_sync_percent(by_state)) "), "
                (all - in_sync) " holding their desired version back."
            }
            (view::state_bar(by_state))
            p { (view::state_counts(by_state)) }
            @if held.items.is_empty() {
                p { "Every cluster runs the version it should." }
            } @else {
                table class="holding" {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "State" } th scope="col" { "Desired" } th scope="col" { "Running" } th scope="col" { "Since" } } }
                    tbody {
                        @for h in &held.items {
                            tr data-cluster=(h.cluster) {
                                th scope="row" { a href=(page.link(format!("/ui/clusters/{}", segment(&h.cluster))).build()) { (h.cluster) } }
                                td { (view::state_label(&h.state)) }
                                td { span class="version" { (h.desired_version.as_deref().unwrap_or("—")) } }
                                td { span class="version" { (h.observed_version.as_deref().unwrap_or("—")) } }
                                td { (view::time(h.since.as_deref())) }
                            }
                        }
                    }
                }
                @if held.next_cursor.is_some() { p { "The first " (held.items.len()) ", by cluster id; a version's gate lists them all." } }
            }
            @if !desired.is_empty() {
                p {
                    "The gate of each desired version: "
                    @for (i, v) in desired.iter().enumerate() {
                        @if i > 0 { ", " }
                        a href=(page.link("/ui/gate").with("app", Some(app)).with("version", Some(v.version.clone())).with("group", group).build()) {
                            span class="version" { (v.version) }
                        }
                    }
                    "."
                }
            }
        }
    }
}

fn insights_table(insights: &Insights) -> Markup {
    html! {
        p { (insights.failing) " failing and " (insights.in_sync) " in sync clusters compared." }
        @if insights.findings.is_empty() {
            p { "Nothing that the failing clusters share stands out." }
        } @else {
            table class="findings" {
                thead {
                    tr {
                        th scope="col" { "Attribute" }
                        th scope="col" class="num" { "Failing with it" }
                        th scope="col" class="num" { "In sync with it" }
                        th scope="col" class="num" { "Failure rate with" }
                        th scope="col" class="num" { "without" }
                        th scope="col" class="num" { "Adjusted p" }
                        th scope="col" { "Significant" }
                    }
                }
                tbody {
                    @for f in insights.findings.iter().take(FINDINGS_SHOWN) {
                        tr {
                            th scope="row" { (f.attribute) " " code { (f.value) } }
                            td class="num" { (f.failing_with) }
                            td class="num" { (f.in_sync_with) }
                            td class="num" { (view::percent(f.failure_rate_with)) }
                            td class="num" { (view::percent(f.failure_rate_without)) }
                            td class="num" { (format!("{:.3}", f.p_adjusted)) }
                            td { (if f.significant { "yes" } else { "no" }) }
                        }
                    }
                }
            }
        }
    }
}

/// The app's newest rollouts, and the newest one's progress curve and stragglers. Rollouts
/// carry their own history and take no `at`: on a page at a past moment they are the ones
/// started by then.
async fn rollouts(
    ui: &Ui,
    caller: &Caller,
    page: &Page,
    app: &str,
    group: Option<&str>,
    past: bool,
) -> Result<Markup, PageError> {
    let list: RolloutPage = ui
        .ask(
            caller,
            &Query::new("/api/v1/rollouts")
                .with("app", Some(app))
                .with("group", group)
                .with("limit", Some(ROLLOUTS_SHOWN.to_string()))
                .build(),
        )
        .await?;
    let newest = match list.items.first() {
        Some(r) => Some(
            ui.ask::<RolloutDetail>(
                caller,
                &Query::new(format!("/api/v1/rollouts/{}", segment(&r.id)))
                    .with("group", group)
                    // The page shows the rollout's curve, not one per group.
                    .with("depth", Some("0"))
                    .with("limit", Some("10"))
                    .build(),
            )
            .await?,
        ),
        None => None,
    };
    Ok(html! {
        section aria-labelledby="rollouts" {
            h2 id="rollouts" { "Rollouts" }
            @if past { p class="note" { "Rollouts carry their own history: this list is as of now." } }
            @if list.items.is_empty() {
                p { "No rollout of " (app) " is known." }
            } @else {
                table class="rollouts" {
                    thead { tr { th scope="col" { "Version" } th scope="col" { "Started" } th scope="col" { "Status" } th scope="col" class="num" { "Targeted" } th scope="col" class="num" { "In sync" } th scope="col" class="num" { "Failed" } th scope="col" class="num" { "Stale" } } }
                    tbody {
                        @for r in &list.items {
                            tr data-rollout=(r.id) {
                                th scope="row" { span class="version" { (r.version) } }
                                td { (view::time(r.started_at.as_deref())) }
                                td { (r.status.replace('_', " ")) }
                                td class="num" { (r.targeted) }
                                td class="num" { (r.in_sync) }
                                td class="num" { (r.failed) }
                                td class="num" { (r.stale) }
                            }
                        }
                    }
                }
            }
            @if let Some(detail) = &newest { (progress(page, detail)) }
        }
    })
}

fn progress(page: &Page, detail: &RolloutDetail) -> Markup {
    let points: Vec<(u64, u64, u64)> = detail
        .curve
        .iter()
        .map(|p| (p.in_sync, p.failed, p.waiting))
        .collect();
    let from = detail.curve.first().and_then(|p| p.at.as_deref());
    let to = detail.curve.last().and_then(|p| p.at.as_deref());
    html! {
        h3 { "Progress of " span class="version" { (detail.rollout.version) } ", a point every " (super::lists::duration(detail.step_seconds as i64)) }
        (view::curve_chart(&points, (&view::time(from), &view::time(to))))
        @if !detail.stragglers.is_empty() {
            h4 { "Stragglers" }
            ul class="holding" {
                @for s in &detail.stragglers {
                    li data-cluster=(s.cluster) {
                        a href=(page.link(format!("/ui/clusters/{}", segment(&s.cluster))).build()) { (s.cluster) }
                        " " (view::state_label(&s.state))
                        @if let Some(m) = s.message.as_deref().filter(|m| !m.is_empty()) { ": " (m) }
                    }
                }
            }
        }
    }
}
