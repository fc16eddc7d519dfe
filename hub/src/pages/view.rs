//! What every page is made of: the frame (navigation, the time picker, sign-out), bars of
//! pairs by drift state, the states' names and marks, and times as people read them.
//!
//! Drift states are told apart without colour: each has a mark (`✓`, `✗`, …) beside its name
//! wherever it is counted, and a fill pattern of its own in the bars.

use axum::http::{StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::answers::ByState;
use super::Query;

/// The drift states in the order bars and tables show them, worst last: (API name, words,
/// mark).
pub const STATES: &[(&str, &str, &str)] = &[
    ("in_sync", "in sync", "✓"),
    ("progressing", "progressing", "↻"),
    ("out_of_sync", "out of sync", "≠"),
    ("failed", "failed", "✗"),
    ("missing", "missing", "∅"),
    ("unexpected", "unexpected", "+"),
    ("stale", "stale", "⌛"),
    ("unknown", "unknown", "?"),
];

/// The words and mark of a state's API name (the name itself when it is not known here).
pub fn state_label(state: &str) -> Markup {
    let (words, mark) = STATES
        .iter()
        .find(|(name, _, _)| *name == state)
        .map_or((state, "•"), |(_, words, mark)| (*words, *mark));
    html! {
        span class={"state s-" (state)} {
            span class="mark" aria-hidden="true" { (mark) } " " (words)
        }
    }
}

/// An API time (RFC 3339, UTC) as `2026-11-20 14:05:09 UTC`; `never` for none.
pub fn time(value: Option<&str>) -> String {
    match value {
        Some(t) => format!("{} UTC", t.trim_end_matches('Z').replacen('T', " ", 1)),
        None => "never".to_owned(),
    }
}

/// A share (0 to 1) as a percentage with one decimal.
pub fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// The share of pairs in sync of `by_state`, 1 when there are none.
pub fn in_sync_share(by_state: &ByState) -> f64 {
    let total: u64 = by_state.values().sum();
    if total == 0 {
        return 1.0;
    }
    by_state.get("in_sync").copied().unwrap_or(0) as f64 / total as f64
}

/// The share of pairs in sync of `by_state` as a percentage, or `—` when there are none: an
/// empty selection is not a healthy one.
pub fn in_sync_percent(by_state: &ByState) -> String {
    if by_state.values().sum::<u64>() == 0 {
        return NO_SHARE.to_owned();
    }
    percent(in_sync_share(by_state))
}

/// What a share of nothing reads as.
pub const NO_SHARE: &str = "—";

/// A horizontal bar of `by_state`, each state's part as wide as its share, with a text
/// equivalent for screen readers.
pub fn state_bar(by_state: &ByState) -> Markup {
    let total: u64 = by_state.values().sum();
    let described: Vec<String> = STATES
        .iter()
        .filter_map(|(name, words, _)| {
            let n = by_state.get(*name).copied().unwrap_or(0);
            (n > 0).then(|| format!("{n} {words}"))
        })
        .collect();
    let label = if described.is_empty() {
        "no app instances".to_owned()
    } else {
        described.join(", ")
    };
    let mut x = 0.0;
    let parts: Vec<(&str, String, String)> = STATES
        .iter()
        .filter_map(|(name, _, _)| {
            let n = by_state.get(*name).copied().unwrap_or(0);
            (n > 0).then(|| {
                let w = n as f64 * 100.0 / total as f64;
                let part = (*name, format!("{x:.3}"), format!("{w:.3}"));
                x += w;
                part
            })
        })
        .collect();
    html! {
        svg class="bar" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label=(label) {
            title { (label) }
            @if total == 0 {
                rect class="empty" x="0" y="0" width="100" height="10" {}
            }
            @for (name, x, w) in &parts {
                rect class={"p-" (name)} x=(x) y="0" width=(w) height="10" {}
            }
        }
    }
}

/// Counts by state as a compact list of marks and numbers (only the states present).
pub fn state_counts(by_state: &ByState) -> Markup {
    html! {
        span class="counts" {
            @for (name, words, mark) in STATES {
                @let n = by_state.get(*name).copied().unwrap_or(0);
                @if n > 0 {
                    span class={"count s-" (name)} title=(words) data-state=(name) {
                        span class="mark" aria-hidden="true" { (mark) }
                        span class="visually-hidden" { (words) " " }
                        span class="n" { (n) }
                    }
                }
            }
        }
    }
}

/// The legend of the bars' patterns.
pub fn legend() -> Markup {
    html! {
        ul class="legend" aria-label="Drift states" {
            @for (name, _, _) in STATES {
                li {
                    svg class="swatch" viewBox="0 0 10 10" aria-hidden="true" {
                        rect class={"p-" (name)} x="0" y="0" width="10" height="10" {}
                    }
                    (state_label(name))
                }
            }
        }
    }
}

/// The patterns the bars fill their parts with, once per page.
fn patterns() -> Markup {
    html! {
        svg class="defs" aria-hidden="true" focusable="false" width="0" height="0" {
            defs {
                pattern id="hatch-progressing" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-progressing" width="4" height="4" {}
                    path class="ink" d="M0 2h4" {}
                }
                pattern id="hatch-out_of_sync" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-out_of_sync" width="4" height="4" {}
                    circle class="dot" cx="2" cy="2" r="0.8" {}
                }
                pattern id="hatch-failed" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-failed" width="4" height="4" {}
                    path class="ink" d="M0 4L4 0M-1 1L1 -1M3 5L5 3" {}
                }
                pattern id="hatch-missing" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-missing" width="4" height="4" {}
                    path class="ink" d="M0 0L4 4M4 0L0 4" {}
                }
                pattern id="hatch-unexpected" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-unexpected" width="4" height="4" {}
                    path class="ink" d="M2 0v4" {}
                }
                pattern id="hatch-stale" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-stale" width="4" height="4" {}
                    path class="ink" d="M0 0L4 4" {}
                }
                pattern id="hatch-unknown" width="4" height="4" patternUnits="userSpaceOnUse" {
                    rect class="bg-unknown" width="4" height="4" {}
                    circle class="dot" cx="1" cy="1" r="0.6" {}
                    circle class="dot" cx="3" cy="3" r="0.6" {}
                }
            }
        }
    }
}

/// A page: its title, the moment it shows (`at` as the page was asked, `None` for now) and
/// the parameters the time picker keeps when it sets another moment.
#[derive(Debug)]
pub struct Page {
    title: String,
    at: Option<String>,
    path: String,
    keep: Vec<(String, String)>,
    signed_in: bool,
    /// Whether the hub signs people in (it has a token file): then the page offers to sign out.
    sessions: bool,
    /// A page of the hub's own the browser goes on to at once (`meta refresh`).
    going_to: Option<String>,
}

impl Page {
    /// A page at `uri` titled `title`, showing the moment `at`.
    pub fn new(title: impl Into<String>, at: Option<&str>, uri: &Uri) -> Page {
        Page {
            title: title.into(),
            at: at.map(str::to_owned).filter(|a| !a.trim().is_empty()),
            path: uri.path().to_owned(),
            keep: Vec::new(),
            signed_in: true,
            sessions: true,
            going_to: None,
        }
    }

    /// A page the browser leaves at once for `path` (one of the hub's own): the answer to a
    /// sign-in that came back from an identity provider, so that the next page is asked
    /// from this site and carries the `SameSite=Strict` session cookie.
    pub fn going_to(mut self, path: &str) -> Page {
        self.going_to = Some(path.to_owned());
        self
    }

    /// A page of a hub that signs nobody in (no token file): no sign-out button.
    pub fn without_sessions(mut self) -> Page {
        self.sessions = false;
        self
    }

    /// Keeps `name=value` in the time picker's form.
    pub fn keep(mut self, name: &str, value: Option<&str>) -> Page {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            self.keep.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// A page for someone not signed in: no navigation, no time picker.
    pub fn signed_out(mut self) -> Page {
        self.signed_in = false;
        self
    }

    /// A link to `path` that keeps this page's moment.
    pub fn link(&self, path: impl Into<String>) -> Query {
        Query::new(path).with("at", self.at.clone())
    }

    /// The whole document with `content` as its main part.
    pub fn render(&self, content: Markup) -> Html<String> {
        let doc = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · Fleetscope" }
                    link rel="stylesheet" href="/ui/static/style.css";
                    link rel="icon" href="/ui/static/icon.svg" type="image/svg+xml";
                    @if let Some(path) = &self.going_to {
                        meta http-equiv="refresh" content=(format!("0; url={path}"));
                    }
                }
                body {
                    a class="skip" href="#main" { "Skip to content" }
                    header class="top" {
                        a class="brand" href=(self.link("/ui/fleet").build()) { "Fleetscope" }
                        @if self.signed_in {
                            nav aria-label="Pages" {
                                a href=(self.link("/ui/fleet").build()) { "Fleet" }
                                a href=(self.link("/ui/stale").build()) { "Stale clusters" }
                                a href=(self.link("/ui/gate").build()) { "Gate" }
                            }
                            (self.time_picker())
                            @if self.sessions {
                                form class="sign-out" method="post" action="/ui/sign-out" {
                                    button type="submit" { "Sign out" }
                                }
                            }
                        }
                    }
                    (patterns())
                    main id="main" {
                        h1 { (self.title) }
                        @if let Some(at) = &self.at {
                            p class="moment" role="status" {
                                "As the hub saw it at " strong { (time(super::api_moment(Some(at)).as_deref())) } ". "
                                a href=(self.now_link()) { "Back to now" }
                            }
                        }
                        (content)
                    }
                }
            }
        };
        Html(doc.into_string())
    }

    /// The answer to a request for this page at `uri`: the page with `content`, or where
    /// `content` failed to (sign-in, an error page).
    pub fn answer(&self, uri: &Uri, content: Result<Markup, super::PageError>) -> Response {
        match content {
            Ok(content) => self.render(content).into_response(),
            Err(err) => err.respond(uri),
        }
    }

    /// This page now: the same parameters without `at`.
    fn now_link(&self) -> String {
        let mut q = Query::new(self.path.clone());
        for (name, value) in &self.keep {
            q = q.with(name, Some(value.clone()));
        }
        q.build()
    }

    /// The form that sets `at` on this page (UTC), keeping the page's other parameters.
    fn time_picker(&self) -> Markup {
        let value = self
            .at
            .as_deref()
            .and_then(|a| super::api_moment(Some(a)))
            .filter(|a| a.len() >= 16 && a.as_bytes()[10] == b'T')
            .map(|a| a[..16].to_owned());
        html! {
            form class="moment-picker" method="get" action=(self.path) {
                @for (name, value) in &self.keep {
                    input type="hidden" name=(name) value=(value);
                }
                label for="at" { "Moment (UTC)" }
                input id="at" type="datetime-local" name="at" value=[value];
                button type="submit" { "Show" }
            }
        }
    }
}

/// The body of an error page.
pub fn error(status: StatusCode, message: &str) -> Markup {
    html! {
        div class="error" role="alert" {
            p { strong { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) } }
            p { (message) }
        }
    }
}

/// An SVG chart of a rollout's curve: in sync, failed and waiting clusters stacked over time.
pub fn curve_chart(points: &[(u64, u64, u64)], labels: (&str, &str)) -> Markup {
    let total = points
        .iter()
        .map(|(a, b, c)| a + b + c)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let n = points.len().max(2) - 1;
    let x = |i: usize| i as f64 * 300.0 / n as f64;
    let y = |v: u64| 100.0 - v as f64 * 100.0 / total;
    let band = |low: &dyn Fn(&(u64, u64, u64)) -> u64, high: &dyn Fn(&(u64, u64, u64)) -> u64| {
        let mut d = String::new();
        for (i, p) in points.iter().enumerate() {
            d.push_str(&format!(
                "{}{:.2} {:.2} ",
                if i == 0 { "M" } else { "L" },
                x(i),
                y(high(p))
            ));
        }
        for (i, p) in points.iter().enumerate().rev() {
            d.push_str(&format!("L{:.2} {:.2} ", x(i), y(low(p))));
        }
        d.push('Z');
        d
    };
    let in_sync = band(&|_| 0, &|p| p.0);
    let failed = band(&|p| p.0, &|p| p.0 + p.1);
    let waiting = band(&|p| p.0 + p.1, &|p| p.0 + p.1 + p.2);
    let last = points.last().copied().unwrap_or_default();
    let summary = format!(
        "from {} to {}: {} in sync, {} failed, {} waiting at the end",
        labels.0, labels.1, last.0, last.1, last.2
    );
    html! {
        figure class="curve" {
            svg viewBox="0 0 300 100" preserveAspectRatio="none" role="img" aria-label=(summary) {
                title { (summary) }
                @if points.len() > 1 {
                    path class="p-in_sync" d=(in_sync) {}
                    path class="p-failed" d=(failed) {}
                    path class="p-waiting" d=(waiting) {}
                }
            }
            figcaption {
                (state_label("in_sync")) " · " (state_label("failed")) " · "
                span class="state s-waiting" { span class="mark" aria-hidden="true" { "…" } " waiting" }
                " — " (summary)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A selection with no app instances (a group outside a scoped token's subtree, an empty
    /// group) shows no share, never 100 %.
    #[test]
    fn nothing_in_a_selection_is_no_share_not_all_in_sync() {
        assert_eq!(in_sync_percent(&ByState::new()), "—");
        let zeros: ByState = [("in_sync".to_owned(), 0), ("failed".to_owned(), 0)].into();
        assert_eq!(in_sync_percent(&zeros), "—");
        let half: ByState = [("in_sync".to_owned(), 1), ("failed".to_owned(), 1)].into();
        assert_eq!(in_sync_percent(&half), "50.0 %");
    }

    #[test]
    fn a_bar_is_as_wide_as_its_parts_and_says_them_in_words() {
        let by: ByState = [("in_sync".to_owned(), 3), ("failed".to_owned(), 1)].into();
        let bar = state_bar(&by).into_string();
        assert!(bar.contains("aria-label=\"3 in sync, 1 failed\""), "{bar}");
        assert!(bar.contains("class=\"p-in_sync\" x=\"0.000\" y=\"0\" width=\"75.000\""));
        assert!(bar.contains("class=\"p-failed\" x=\"75.000\" y=\"0\" width=\"25.000\""));
        let none = state_bar(&ByState::new()).into_string();
        assert!(none.contains("no app instances"));
    }

    #[test]
    fn every_state_has_a_mark_of_its_own() {
        let mut marks: Vec<&str> = STATES.iter().map(|(_, _, m)| *m).collect();
        marks.sort();
        marks.dedup();
        assert_eq!(marks.len(), STATES.len());
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(
            time(Some("2026-11-20T14:05:09Z")),
            "2026-11-20 14:05:09 UTC"
        );
        assert_eq!(time(None), "never");
    }
}
