//! SQL literals for test data (`VALUES` lists), so the same rows can be sent to engines that
//! the Rust client cannot reach. Test-only: the store itself never builds SQL from values.

/// A value that can be written as a ClickHouse literal.
pub trait Literal {
    fn literal(&self) -> String;
}

impl Literal for str {
    fn literal(&self) -> String {
        let mut out = String::with_capacity(self.len() + 2);
        out.push('\'');
        for c in self.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                other => out.push(other),
            }
        }
        out.push('\'');
        out
    }
}

impl Literal for String {
    fn literal(&self) -> String {
        self.as_str().literal()
    }
}

macro_rules! number_literal {
    ($($t:ty),*) => {$(
        impl Literal for $t {
            fn literal(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
number_literal!(u8, u32, u64, i64);

impl Literal for Vec<String> {
    fn literal(&self) -> String {
        format!(
            "[{}]",
            self.iter()
                .map(|s| s.literal())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// `INSERT INTO table (columns) VALUES (…), (…)`; values in column order.
pub fn insert_statement(table: &str, columns: &[&str], rows: &[Vec<String>]) -> String {
    let values: Vec<String> = rows
        .iter()
        .map(|row| format!("({})", row.join(", ")))
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES {}",
        columns.join(", "),
        values.join(", ")
    )
}
