//! Aligned plain-text tables, as `kubectl get` prints them: upper-case headers, every column
//! padded to its widest cell, three spaces between columns, no borders.

use std::fmt;

/// A table: headers and rows of cells, written as text by `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// Between two columns.
const GAP: &str = "   ";

impl Table {
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, cells beyond the headers are dropped.
    pub fn push<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells
            .into_iter()
            .map(|cell| printable(&cell.into()))
            .collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|column| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|row| row[column].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column > 0 {
                    line.push_str(GAP);
                }
                line.push_str(cell);
                let pad = widths[column] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad));
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// `text` safe to write to a terminal: every control character but the line end (ESC and the
/// rest of C0, DEL, C1) and every bidirectional override written as a visible `\u{…}` escape,
/// so that text from edge clusters (a reconciler's message) cannot move the cursor, recolour
/// or retitle the operator's terminal, or reorder what it shows.
pub fn printable(text: &str) -> String {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` on one line and at most `max` characters, the cut marked with `…`.
pub fn shorten(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A share from 0 to 1 as a percentage with one decimal.
pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A count with thousands separated by commas: `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Seconds in days, hours, minutes and seconds, units that are 0 left out: `2h`, `1h30m`,
/// `1m30s`; `0s` for none.
pub fn duration(seconds: u64) -> String {
    if seconds == 0 {
        return "0s".to_owned();
    }
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (hours, rest) = (rest / 3_600, rest % 3_600);
    let (minutes, secs) = (rest / 60, rest % 60);
    let mut out = String::new();
    for (value, unit) in [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {

    /// Text from edge clusters reaches the terminal with its control characters shown, not
    /// obeyed: no ESC, BEL or bidirectional override is written.
    #[test]
    fn control_characters_are_shown_not_sent() {
        let message = "Helm upgrade failed\u{1b}[2J\u{1b}]0;owned\u{7} \u{202e}txt.exe\u{9b}31m";
        let mut table = Table::new(["APP", "MESSAGE"]);
        table.push(["checkout", message]);
        let text = table.to_string();
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
            "{text:?}"
        );
        assert!(
            text.contains("failed\\u{1b}[2J\\u{1b}]0;owned\\u{7} \\u{202e}txt.exe\\u{9b}31m"),
            "{text}"
        );
        assert_eq!(printable("plain text\nand lines"), "plain text\nand lines");
    }

    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell_without_trailing_spaces() {
        let mut table = Table::new(["GROUP", "CLUSTERS", "MESSAGE"]);
        table.push(["emea/de", "12", "ok"]);
        table.push(["amer", "3"]);
        assert_eq!(
            table.to_string(),
            "GROUP     CLUSTERS   MESSAGE\nemea/de   12         ok\namer      3\n"
        );
    }

    #[test]
    fn long_messages_are_cut_on_one_line() {
        assert_eq!(shorten("a\nb  c", 10), "a b c");
        assert_eq!(shorten("0123456789abc", 8), "0123456…");
        assert_eq!(percent(0.825), "82.5%");
    }

    #[test]
    fn counts_and_durations_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234), "1,234");
        assert_eq!(thousands(30_000_000), "30,000,000");
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(90), "1m30s");
        assert_eq!(duration(7_200), "2h");
        assert_eq!(duration(5_400), "1h30m");
        assert_eq!(duration(2_592_000), "30d");
    }
}
