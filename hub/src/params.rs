//! Request parameters: every route lists the ones it takes; anything else, and every value
//! that does not parse, is a 400 whose JSON body names the parameter. Values are only ever
//! compared with data in memory or bound as query parameters, never spliced into SQL.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fleetscope_model::{AppName, DriftState, GroupPath, Timestamp};

/// An error answer: status and a JSON body `{"error": …, "parameter": …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub parameter: Option<String>,
}

impl ApiError {
    pub fn bad(parameter: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("{parameter}: {}", message.into()),
            parameter: Some(parameter.to_owned()),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            parameter: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            parameter: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = crate::answers::ErrorBody {
            error: self.message,
            parameter: self.parameter,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// The longest time range a history request may ask for.
pub const MAX_RANGE_SECONDS: i64 = 31 * 86_400;

/// The query string of one request, checked against the parameters its route takes.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Fails on a parameter the route does not take, or a repeated one that cannot repeat.
    pub fn new(
        pairs: Vec<(String, String)>,
        allowed: &[&str],
        repeatable: &[&str],
    ) -> Result<Params, ApiError> {
        for (i, (key, _)) in pairs.iter().enumerate() {
            if !allowed.contains(&key.as_str()) {
                let takes = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                return Err(ApiError::bad(
                    key,
                    format!("unknown parameter; this route takes {takes}"),
                ));
            }
            if !repeatable.contains(&key.as_str()) && pairs[..i].iter().any(|(k, _)| k == key) {
                return Err(ApiError::bad(key, "given more than once"));
            }
        }
        Ok(Params { pairs })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn group(&self) -> Result<Option<GroupPath>, ApiError> {
        self.get("group")
            .map(|g| GroupPath::parse(g).map_err(|err| ApiError::bad("group", err.to_string())))
            .transpose()
    }

    pub fn app(&self) -> Result<Option<String>, ApiError> {
        self.get("app")
            .map(|a| {
                AppName::parse(a)
                    .map(|a| a.as_str().to_owned())
                    .map_err(|err| ApiError::bad("app", err.to_string()))
            })
            .transpose()
    }

    pub fn environment(&self) -> Result<Option<String>, ApiError> {
        self.get("environment")
            .map(|e| {
                fleetscope_model::ids::validate_dns_label("environment", e)
                    .map(|()| e.to_owned())
                    .map_err(|err| ApiError::bad("environment", err.to_string()))
            })
            .transpose()
    }

    /// `label=key=value`, repeatable; every one must match.
    pub fn labels(&self) -> Result<Vec<(String, String)>, ApiError> {
        self.all("label")
            .map(|l| match l.split_once('=') {
                Some((k, v)) if !k.is_empty() && k.len() <= 317 && v.len() <= 63 => {
                    Ok((k.to_owned(), v.to_owned()))
                }
                _ => Err(ApiError::bad("label", format!("{l:?} is not key=value"))),
            })
            .collect()
    }

    /// `state=…`, repeatable or comma-separated.
    pub fn states(&self) -> Result<Vec<DriftState>, ApiError> {
        let mut out = Vec::new();
        for value in self.all("state") {
            for part in value.split(',') {
                let state = DriftState::parse(part).ok_or_else(|| {
                    ApiError::bad(
                        "state",
                        format!(
                            "{part:?} is not one of {}",
                            DriftState::ALL
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })?;
                if !out.contains(&state) {
                    out.push(state);
                }
            }
        }
        Ok(out)
    }

    /// `limit`: a page's items, a whole number in `[min, max]` written in digits only, or
    /// `default` when absent.
    pub fn limit(&self, min: u64, max: u64, default: u64) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(default as usize),
            Some(text) => match digits(text) {
                Some(n) if (min..=max).contains(&n) => Ok(n as usize),
                _ => Err(ApiError::bad(
                    "limit",
                    format!("{text:?} is not a number from {min} to {max}"),
                )),
            },
        }
    }

    /// An opaque position from a previous page's `next_cursor`.
    pub fn cursor(&self) -> Result<Option<String>, ApiError> {
        self.get("cursor").map(decode_cursor).transpose()
    }

    /// `format=json` (default) or `format=csv`.
    pub fn csv(&self) -> Result<bool, ApiError> {
        match self.get("format") {
            None | Some("json") => Ok(false),
            Some("csv") => Ok(true),
            Some(other) => Err(ApiError::bad(
                "format",
                format!("{other:?} is not json or csv"),
            )),
        }
    }

    /// A whole number in `[min, max]` written in decimal digits only (a sign, a fraction or an
    /// exponent is refused), or `default` when absent.
    pub fn integer(&self, key: &str, min: u64, max: u64, default: u64) -> Result<u64, ApiError> {
        match self.get(key) {
            None => Ok(default),
            Some(text) => match digits(text) {
                Some(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad(
                    key,
                    format!("{text:?} is not a whole number from {min} to {max}"),
                )),
            },
        }
    }

    /// A number in `[min, max]`, or `default` when absent.
    pub fn number(&self, key: &str, min: f64, max: f64, default: f64) -> Result<f64, ApiError> {
        match self.get(key) {
            None => Ok(default),
            Some(text) => match text.parse::<f64>() {
                Ok(n) if n.is_finite() && n >= min && n <= max => Ok(n),
                _ => Err(ApiError::bad(
                    key,
                    format!("{text:?} is not a number from {min} to {max}"),
                )),
            },
        }
    }

    /// A time: seconds since the epoch, or RFC 3339 (`2026-11-22T10:00:00Z`).
    pub fn time(&self, key: &str) -> Result<Option<Timestamp>, ApiError> {
        self.get(key)
            .map(|text| {
                if let Ok(seconds) = text.parse::<i64>() {
                    if (0..=4_294_967_295).contains(&seconds) {
                        return Ok(Timestamp(seconds));
                    }
                }
                text.parse::<jiff::Timestamp>()
                    .map(|t| Timestamp(t.as_second()))
                    .map_err(|_| {
                        ApiError::bad(
                            key,
                            format!("{text:?} is neither seconds since 1970 nor an RFC 3339 time"),
                        )
                    })
            })
            .transpose()
    }
}

/// A time range from optional ends: `to` defaults to just after `now`, `from` to
/// `default_seconds` before `to`; `from` must lie before `to`, at most
/// [`MAX_RANGE_SECONDS`] apart.
pub fn range(
    from: Option<Timestamp>,
    to: Option<Timestamp>,
    now: Timestamp,
    default_seconds: i64,
) -> Result<(Timestamp, Timestamp), ApiError> {
    let to = to.unwrap_or(now.plus_seconds(1));
    let from = from.unwrap_or(to.plus_seconds(-default_seconds));
    if from >= to {
        return Err(ApiError::bad("from", "must lie before `to`"));
    }
    if to.seconds() - from.seconds() > MAX_RANGE_SECONDS {
        return Err(ApiError::bad(
            "from",
            format!(
                "the range may span at most {} days",
                MAX_RANGE_SECONDS / 86_400
            ),
        ));
    }
    Ok((from, to))
}

/// A whole number written in decimal digits only, without a sign.
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Cursors are the last key of the previous page, hex-encoded so that they stay opaque.
pub fn encode_cursor(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`encode_cursor`]: pairs of lowercase hex digits spelling UTF-8. Read byte
/// by byte, never sliced, so that any text (a multi-byte character, a sign) is a 400, not a
/// panic.
fn decode_cursor(text: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad("cursor", "not a cursor this service handed out");
    fn digit(byte: u8) -> Option<u8> {
        match byte {
            b'0'..=b'9' => Some(byte - b'0'),
            b'a'..=b'f' => Some(byte - b'a' + 10),
            _ => None,
        }
    }
    if text.len() > 1_024 || !text.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = text
        .as_bytes()
        .chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? << 4) | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    String::from_utf8(bytes).map_err(|_| bad())
}

/// A CSV document: a header and rows, fields quoted where they need it.
pub fn csv(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    fn field(text: &str) -> String {
        if text.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text.to_owned()
        }
    }
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        out.push_str(&row.iter().map(|f| field(f)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)], allowed: &[&str]) -> Result<Params, ApiError> {
        Params::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            allowed,
            &["label", "state"],
        )
    }

    #[test]
    fn unknown_repeated_and_invalid_parameters_are_named() {
        let err = params(&[("grup", "emea")], &["group"]).unwrap_err();
        assert_eq!(err.parameter.as_deref(), Some("grup"));
        let err = params(&[("group", "a"), ("group", "b")], &["group"]).unwrap_err();
        assert_eq!(err.message, "group: given more than once");
        let p = params(&[("group", "emea//de")], &["group"]).unwrap();
        assert_eq!(p.group().unwrap_err().parameter.as_deref(), Some("group"));
        let p = params(&[("limit", "0")], &["limit"]).unwrap();
        assert!(p.limit(1, 1000, 100).is_err());
        let p = params(&[("limit", "1001")], &["limit"]).unwrap();
        assert!(p.limit(1, 1000, 100).is_err());
        let p = params(&[("limit", "+5")], &["limit"]).unwrap();
        assert!(p.limit(1, 1000, 100).is_err());
        let p = params(&[("limit", "1000")], &["limit"]).unwrap();
        assert_eq!(p.limit(1, 1000, 100).unwrap(), 1000);
        let p = params(
            &[("state", "in_sync,failed"), ("state", "stale")],
            &["state"],
        )
        .unwrap();
        assert_eq!(
            p.states().unwrap(),
            vec![DriftState::InSync, DriftState::Failed, DriftState::Stale]
        );
        let p = params(&[("state", "broken")], &["state"]).unwrap();
        assert!(p.states().unwrap_err().message.contains("in_sync"));
        let p = params(&[("label", "tier")], &["label"]).unwrap();
        assert!(p.labels().is_err());
    }

    #[test]
    fn integers_refuse_fractions_exponents_and_signs() {
        for text in [
            "1.5",
            "2.0",
            "1e1",
            "-1",
            "+2",
            "",
            " 2",
            "0x2",
            "99999999999999999999999",
        ] {
            let p = params(&[("depth", text)], &["depth"]).unwrap();
            let err = p.integer("depth", 0, 16, 16).unwrap_err();
            assert_eq!(err.parameter.as_deref(), Some("depth"), "{text:?}");
        }
        let p = params(&[("depth", "17")], &["depth"]).unwrap();
        assert!(p.integer("depth", 0, 16, 16).is_err());
        let p = params(&[("depth", "3")], &["depth"]).unwrap();
        assert_eq!(p.integer("depth", 0, 16, 16).unwrap(), 3);
        let p = params(&[], &["depth"]).unwrap();
        assert_eq!(p.integer("depth", 1, 16, 1).unwrap(), 1);
    }

    #[test]
    fn time_ranges_are_bounded() {
        let now = Timestamp(1_800_000_000);
        let p = params(&[], &["from", "to"]).unwrap();
        let (from, to) = range(p.time("from").unwrap(), p.time("to").unwrap(), now, 3_600).unwrap();
        assert_eq!((to.seconds() - from.seconds()), 3_600);
        let p = params(&[("from", "1700000000")], &["from", "to"]).unwrap();
        assert_eq!(
            range(p.time("from").unwrap(), p.time("to").unwrap(), now, 3_600)
                .unwrap_err()
                .parameter
                .as_deref(),
            Some("from")
        );
        let p = params(
            &[
                ("from", "2026-11-22T00:00:00Z"),
                ("to", "2026-11-21T00:00:00Z"),
            ],
            &["from", "to"],
        )
        .unwrap();
        assert!(
            range(p.time("from").unwrap(), p.time("to").unwrap(), now, 3_600)
                .unwrap_err()
                .message
                .contains("before")
        );
        let p = params(&[("to", "yesterday")], &["from", "to"]).unwrap();
        assert_eq!(p.time("to").unwrap_err().parameter.as_deref(), Some("to"));
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let cursor = encode_cursor("berlin-01/checkout");
        let p = params(&[("cursor", &cursor)], &["cursor"]).unwrap();
        assert_eq!(p.cursor().unwrap().as_deref(), Some("berlin-01/checkout"));
        let p = params(&[("cursor", "zz")], &["cursor"]).unwrap();
        assert!(p.cursor().is_err());
    }

    #[test]
    fn a_cursor_that_is_not_ascii_hex_is_refused_not_a_panic() {
        // Even byte lengths whose pairs of bytes are not characters: 名前 is six bytes.
        for text in [
            "名前",
            "\u{fffd}\u{fffd}",
            "é0",
            "0é",
            "+1",
            "-1",
            " 1",
            "0x",
        ] {
            let p = params(&[("cursor", text)], &["cursor"]).unwrap();
            let err = p.cursor().unwrap_err();
            assert_eq!(err.parameter.as_deref(), Some("cursor"), "{text:?}");
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{text:?}");
        }
        // Hex of bytes that are not UTF-8.
        let p = params(&[("cursor", "fffe")], &["cursor"]).unwrap();
        assert_eq!(p.cursor().unwrap_err().parameter.as_deref(), Some("cursor"));
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let text = csv(
            &["a", "b"],
            [vec!["x,y".to_owned(), "say \"hi\"".to_owned()]],
        );
        assert_eq!(text, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n");
    }
}
