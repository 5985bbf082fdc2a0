//! Text laid out for people: durations rounded (`1.0s`, `2m30s`, never
//! `1.001550807s`) and columns as wide as what they hold.

/// A duration for people, rounded to what they read: `40ms`, `1.5s`
/// (tenths under ten seconds), `12s`, `3m05s`, `1h05m`: the library's, so
/// that its error messages and the CLI's lines agree.
pub(crate) use mcp_tasks::task::human_duration;

/// How wide a column may grow, and what becomes of a longer cell.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fit {
    /// At most this many characters; a longer cell is cut, with `…` as
    /// its last character (a value of the JSON output, shown whole there).
    Cut(usize),
    /// At most this many characters; a longer cell is shown whole, and
    /// pushes the rest of its own line to the right (a name to be typed).
    Whole(usize),
}

/// The space between two columns.
const GAP: &str = "  ";

/// `rows` (a header first, if any) as lines of columns: each column as
/// wide as its widest cell within its [`Fit`] (`fits` has one for every
/// column but the last), the last column never cut nor padded, no line
/// ending in spaces.
pub(crate) fn columns(rows: &[Vec<String>], fits: &[Fit]) -> Vec<String> {
    let widths: Vec<usize> = fits
        .iter()
        .enumerate()
        .map(|(column, fit)| {
            let widest = rows
                .iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0);
            let (Fit::Cut(max) | Fit::Whole(max)) = *fit;
            widest.min(max)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                let Some((width, fit)) = widths.get(column).zip(fits.get(column)) else {
                    // The last column, whole.
                    line.push_str(cell);
                    break;
                };
                let chars = cell.chars().count();
                match fit {
                    Fit::Cut(_) if chars > *width => {
                        line.extend(cell.chars().take(width.saturating_sub(1)));
                        line.push('…');
                    }
                    _ => {
                        line.push_str(cell);
                        line.extend(std::iter::repeat_n(' ', width.saturating_sub(chars)));
                    }
                }
                line.push_str(GAP);
            }
            line.truncate(line.trim_end().len());
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|&cell| cell.to_owned()).collect()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = [
            row(&["NAME", "WHAT"]),
            row(&["everything__simulate-research-query", "researches"]),
            row(&["echo", ""]),
        ];
        let lines = columns(&rows, &[Fit::Whole(48)]);
        assert_eq!(
            lines,
            [
                "NAME                                 WHAT",
                "everything__simulate-research-query  researches",
                "echo",
            ]
        );
    }

    #[test]
    fn past_its_maximum_a_cell_is_cut_or_shown_whole_as_its_column_says() {
        let long = "x".repeat(30);
        let rows = [row(&[&long, &long, "id-1"]), row(&["a", "b", "id-2"])];
        let lines = columns(&rows, &[Fit::Cut(10), Fit::Whole(10)]);
        assert_eq!(lines[0], format!("xxxxxxxxx…  {long}  id-1"));
        assert_eq!(lines[1], "a           b           id-2");
        // Counted in characters, not bytes.
        let rows = [row(&["…12345678", "x"]), row(&["ab", "y"])];
        assert_eq!(
            columns(&rows, &[Fit::Cut(20)]),
            ["…12345678  x", "ab         y"]
        );
    }
}
