//! The stale clusters page and the gate page, and the pages' query parameters.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};

use super::answers::{Gate, StalePage};
use super::view::{self, Page};
use super::{api_moment, PageError, Ui};

/// Stale clusters per page.
const STALE_PER_PAGE: u32 = 100;

/// Clusters holding a gate back per page.
const HOLDING_BACK_PER_PAGE: u32 = 100;

/// A page's query parameters as a form sends them (`+` for a space), decoded as the API's are
/// (axum's `Query`); a page reads the first of each name.
#[derive(Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = <Query<Vec<(String, String)>> as FromRequestParts<S>>::Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Params, Self::Rejection> {
        let Query(pairs) = Query::from_request_parts(parts, state).await?;
        Ok(Params(pairs))
    }
}

impl Params {
    /// The first value of `name`, when it is not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, v)| n == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    }
}

/// `GET /ui/stale?group=&at=&cursor=`.
pub async fn stale(
    State(ui): State<Arc<Ui>>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let (group, at, cursor) = (params.get("group"), params.get("at"), params.get("cursor"));
    let page = ui.page("Stale clusters", at, &uri).keep("group", group);
    let content = async {
        let caller = ui.caller(&headers)?;
        let answer: StalePage = ui
            .ask(
                &caller,
                &super::Query::new("/api/v1/stale")
                    .with("group", group)
                    .with("limit", Some(STALE_PER_PAGE.to_string()))
                    .with("cursor", cursor)
                    .with("at", api_moment(at))
                    .build(),
            )
            .await?;
        Ok::<Markup, PageError>(stale_content(&page, group, &answer))
    };
    page.answer(&uri, content.await)
}

fn stale_content(page: &Page, group: Option<&str>, answer: &StalePage) -> Markup {
    html! {
        p {
            strong id="stale-total" { (answer.total) }
            " clusters not heard from within the hub's stale threshold"
            @if let Some(group) = group { " in " (group) }
            ", never seen first, then the longest silent."
        }
        @if !answer.items.is_empty() {
            table class="stale" {
                thead {
                    tr {
                        th scope="col" { "Cluster" }
                        th scope="col" { "Group" }
                        th scope="col" { "Environment" }
                        th scope="col" { "Last seen" }
                        th scope="col" class="num" { "Silent for" }
                    }
                }
                tbody {
                    @for c in &answer.items {
                        tr data-cluster=(c.cluster) {
                            th scope="row" { a href=(page.link(format!("/ui/clusters/{}", super::segment(&c.cluster))).build()) { (c.cluster) } }
                            td { a href=(page.link("/ui/fleet").with("group", Some(c.group.clone())).build()) { (c.group) } }
                            td { (c.environment) }
                            td { (view::time(c.last_seen.as_deref())) }
                            td class="num" { (c.silent_seconds.map_or_else(|| "—".to_owned(), duration)) }
                        }
                    }
                }
            }
        }
        @if let Some(next) = &answer.next_cursor {
            p { a rel="next" href=(page.link("/ui/stale").with("group", group).with("cursor", Some(next.clone())).build()) { "More stale clusters" } }
        }
    }
}

/// Seconds as `2 h 5 min`, `3 min 20 s` or `40 s`.
pub fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// `GET /ui/gate?app=&version=&threshold=&soak=&group=&at=&cursor=`: the form, and with an
/// app and a version the verdict and the clusters holding it back.
pub async fn gate(
    State(ui): State<Arc<Ui>>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let get = |n| params.get(n);
    let at = get("at");
    let mut page = ui.page("Rollout gate", at, &uri);
    for name in ["app", "version", "threshold", "soak", "group"] {
        page = page.keep(name, get(name));
    }
    let content = async {
        let caller = ui.caller(&headers)?;
        let form = gate_form(&params);
        let (Some(app), Some(version)) = (get("app"), get("version")) else {
            return Ok::<Markup, PageError>(form);
        };
        let query = super::Query::new("/api/v1/gate")
            .with("app", Some(app))
            .with("version", Some(version))
            .with("threshold", get("threshold"))
            .with("soak", get("soak"))
            .with("group", get("group"))
            .with("limit", Some(HOLDING_BACK_PER_PAGE.to_string()))
            .with("cursor", get("cursor"))
            .with("at", api_moment(at));
        let answer = match ui.ask::<Gate>(&caller, &query.build()).await {
            Ok(answer) => answer,
            Err(PageError::Api(status, message)) if status.is_client_error() => {
                return Ok(html! { (form) (view::error(status, &message)) });
            }
            Err(err) => return Err(err),
        };
        Ok(html! { (form) (verdict(&page, &params, &answer)) })
    };
    page.answer(&uri, content.await)
}

fn gate_form(params: &Params) -> Markup {
    let field = |name: &str, label: &str, hint: &str, required: bool| {
        html! {
            div class="field" {
                label for=(format!("gate-{name}")) { (label) }
                input id=(format!("gate-{name}")) name=(name) value=[params.get(name)] required[required] aria-describedby=(format!("gate-{name}-hint"));
                small id=(format!("gate-{name}-hint")) { (hint) }
            }
        }
    };
    html! {
        form class="gate" method="get" action="/ui/gate" {
            (field("app", "App", "the app rolled out", true))
            (field("version", "Version", "the version rolled out", true))
            (field("threshold", "Threshold", "share that must be in sync, 0 to 1 (default 1)", false))
            (field("soak", "Soak", "how long in sync to count: 7200, 30m, 2h (default 0)", false))
            (field("group", "Group", "only this group subtree (optional)", false))
            @if let Some(at) = params.get("at") {
                input type="hidden" name="at" value=(at);
            }
            button type="submit" { "Check" }
        }
    }
}

fn verdict(page: &Page, params: &Params, gate: &Gate) -> Markup {
    let passed = gate.verdict == "pass";
    let more = gate.next_cursor.as_ref().map(|next| {
        ["app", "version", "threshold", "soak", "group"]
            .into_iter()
            .fold(page.link("/ui/gate"), |q, name| {
                q.with(name, params.get(name))
            })
            .with("cursor", Some(next.clone()))
            .build()
    });
    html! {
        section class="verdict" aria-labelledby="verdict" {
            h2 id="verdict" class={"verdict-" (gate.verdict)} {
                (if passed { "✓ Pass" } else { "✗ Fail" })
                ": " (gate.app) " " (gate.version.as_deref().unwrap_or(""))
            }
            p id="gate-reason" { (gate.reason) }
            dl class="figures" {
                div { dt { "Targeted" } dd id="gate-targeted" { (gate.targeted_clusters) } }
                div { dt { "In sync" } dd id="gate-in-sync" { (gate.in_sync) " (" (view::percent(gate.share_in_sync)) ")" } }
                div { dt { "Soaked " (gate.soak_seconds) " s" } dd id="gate-soaked" { (gate.soaked) " (" (view::percent(gate.share_soaked)) ")" } }
                div { dt { "Threshold" } dd { (view::percent(gate.threshold)) } }
                div { dt { "Failed" } dd id="gate-failed" { (gate.failed) } }
                div { dt { "Stale" } dd { (gate.stale_clusters) } }
            }
            (view::state_bar(&gate.by_state))
            p { (view::state_counts(&gate.by_state)) }
        }
        section aria-labelledby="holding" {
            h2 id="holding" { "Holding it back" }
            @if gate.holding_back.is_empty() {
                p { "No targeted cluster holds the gate back." }
            } @else {
                table class="holding" {
                    thead { tr { th scope="col" { "Cluster" } th scope="col" { "Group" } th scope="col" { "State" } th scope="col" { "Since" } th scope="col" { "Soaks at" } } }
                    tbody {
                        @for h in &gate.holding_back {
                            tr data-cluster=(h.cluster) {
                                th scope="row" { a href=(page.link(format!("/ui/clusters/{}", super::segment(&h.cluster))).build()) { (h.cluster) } }
                                td { (h.group) }
                                td { (view::state_label(&h.state)) }
                                td { (view::time(h.since.as_deref())) }
                                td { (h.soaks_at.as_deref().map_or_else(|| "—".to_owned(), |t| view::time(Some(t)))) }
                            }
                        }
                    }
                }
            }
            @if let Some(more) = &more {
                p { a rel="next" href=(more) { "More clusters holding it back" } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parameters_decode_as_a_form_sends_them_and_the_first_counts() {
        let params = |uri: &str| {
            let (mut parts, ()) = axum::http::Request::builder()
                .uri(uri)
                .body(())
                .unwrap()
                .into_parts();
            async move { Params::from_request_parts(&mut parts, &()).await.unwrap() }
        };
        let p =
            params("/ui/gate?app=a+b&group=emea%2Fde&app=second&empty=&version=%E2%9C%93").await;
        assert_eq!(p.get("app"), Some("a b"));
        assert_eq!(p.get("group"), Some("emea/de"));
        assert_eq!(p.get("empty"), None);
        assert_eq!(p.get("version"), Some("✓"));
        assert_eq!(params("/ui/gate").await.get("app"), None);
    }

    #[test]
    fn durations_read_in_the_largest_units() {
        assert_eq!(duration(40), "40 s");
        assert_eq!(duration(200), "3 min 20 s");
        assert_eq!(duration(7500), "2 h 5 min");
        assert_eq!(duration(90000), "1 d 1 h");
    }
}
