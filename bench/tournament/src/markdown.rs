//! Markdown building blocks for the report: tables that always have as many cells per row as
//! header columns, and number formatting.
//!
//! Numbers are shown with about three significant digits below 100 and as whole numbers with
//! thousands separators from 1,000 up, the way the reference reports print them. A measured
//! value with several runs is shown as `median (min–max)`.

use crate::aggregate::Aggregate;

/// A Markdown table.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose `left` columns (text) come first, then its `right` columns (numbers).
    pub fn new(left: &[&str], right: &[&str]) -> Table {
        Table {
            header: left.iter().chain(right).map(|h| escape(h)).collect(),
            right: left.iter().map(|_| false).chain(right.iter().map(|_| true)).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    ///
    /// # Panics
    ///
    /// When the row does not have one cell per column: a table with ragged rows renders
    /// wrongly, and that is a bug in the caller.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.header.len(), "row {cells:?} does not match header {:?}", self.header);
        self.rows.push(cells.iter().map(|c| escape(c)).collect());
    }

    /// The same table without the columns whose (escaped) header matches `drop`.
    pub fn without_columns(&self, drop: impl Fn(&str) -> bool) -> Table {
        let keep: Vec<bool> = self.header.iter().map(|h| !drop(h)).collect();
        let pick = |cells: &[String]| -> Vec<String> {
            cells.iter().zip(&keep).filter(|(_, k)| **k).map(|(c, _)| c.clone()).collect()
        };
        Table {
            header: pick(&self.header),
            right: self.right.iter().zip(&keep).filter(|(_, k)| **k).map(|(r, _)| *r).collect(),
            rows: self.rows.iter().map(|r| pick(r)).collect(),
        }
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as Markdown, ending with a newline.
    pub fn render(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let rule: Vec<String> =
            self.right.iter().map(|&r| if r { "---:".to_string() } else { "---".to_string() }).collect();
        let mut out = line(&self.header);
        out += &line(&rule);
        for row in &self.rows {
            out += &line(row);
        }
        out
    }
}

/// Makes text safe inside a table cell: no newlines, `|` escaped.
pub fn escape(cell: &str) -> String {
    let one_line: Vec<&str> = cell.split(['\n', '\r']).map(str::trim).collect();
    let joined = one_line.into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
    // Already-escaped pipes stay as they are.
    joined.replace("\\|", "|").replace('|', "\\|")
}

/// Formats a number the way the reference reports do.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        thousands(v.round())
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let decimals = (2 - a.log10().floor() as i32).clamp(3, 9) as usize;
        format!("{v:.decimals$}")
    }
}

fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// `median (min–max)` for several runs, the median alone for one run or no spread.
pub fn spread(row: &Aggregate) -> String {
    if row.runs > 1 && row.min != row.max {
        format!("{} ({}–{})", num(row.value), num(row.min), num(row.max))
    } else {
        num(row.value)
    }
}

/// A ratio of spindle against a peer; bold when spindle is ahead.
pub fn ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 1.0 => format!("**{r:.2}×**"),
        Some(r) => format!("{r:.2}×"),
        None => "—".into(),
    }
}

/// Splits a rendered table row into its cells (the inverse of [`Table::render`] for one line).
pub fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            _ => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_look_like_the_seeds() {
        assert_eq!(num(13_668.4), "13,668");
        assert_eq!(num(3_148_437.0), "3,148,437");
        assert_eq!(num(199.01), "199.0");
        assert_eq!(num(3.363), "3.36");
        assert_eq!(num(0.081), "0.0810");
        assert_eq!(num(0.000_123_4), "0.000123");
        assert_eq!(num(0.5), "0.500");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-1234.0), "-1,234");
        assert_eq!(num(f64::NAN), "—");
    }

    #[test]
    fn ratios_are_bold_when_spindle_is_ahead() {
        assert_eq!(ratio(Some(2.345)), "**2.35×**");
        assert_eq!(ratio(Some(0.5)), "0.50×");
        assert_eq!(ratio(None), "—");
    }

    #[test]
    fn tables_escape_and_round_trip() {
        let mut t = Table::new(&["Name"], &["Value"]);
        t.row(vec!["a|b".into(), "1\n2".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "| Name | Value |");
        assert_eq!(lines[1], "| --- | ---: |");
        assert_eq!(split_row(lines[2]), vec!["a|b", "1 2"]);
        assert!(!t.is_empty());
    }

    #[test]
    #[should_panic(expected = "does not match header")]
    fn ragged_rows_are_refused() {
        let mut t = Table::new(&["A", "B"], &[]);
        t.row(vec!["only one".into()]);
    }

    #[test]
    fn spread_shows_min_and_max_for_several_runs() {
        let mut row = Aggregate {
            suite: "tcp".into(),
            case: "bind".into(),
            competitor: "spindle".into(),
            metric: "ns_per_op".into(),
            value: 13_668.0,
            unit: "ns".into(),
            runs: 5,
            min: 13_001.0,
            max: 14_200.0,
            per_run: Vec::new(),
        };
        assert_eq!(spread(&row), "13,668 (13,001–14,200)");
        row.runs = 1;
        assert_eq!(spread(&row), "13,668");
    }
}
