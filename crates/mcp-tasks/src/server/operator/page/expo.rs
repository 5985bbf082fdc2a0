//! Reads back the Prometheus text this process renders (`/metrics`), so
//! that the page shows the very numbers a scrape gets: [`Samples::parse`].
//!
//! Written here rather than taken from a crate: it reads one producer's
//! output (`metrics-exporter-prometheus`: `name{label="value",...} number`
//! lines and `#` comments, no timestamps, no exemplars), in some sixty
//! lines, where the parsers on crates.io bring a date library and a regex
//! engine for the parts of the format that producer never writes. A line it
//! cannot read is left out, never an error: the page then lacks a number,
//! `/metrics` is unchanged.

/// One sample: a series and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl Sample {
    /// The value of the label `key`, if the series has it.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// The upper bound of a histogram bucket (its `le`), if it is one.
    pub(crate) fn bound(&self) -> Option<f64> {
        match self.label("le")? {
            "+Inf" => Some(f64::INFINITY),
            bound => bound.parse().ok(),
        }
    }
}

/// Every sample of one rendering.
#[derive(Debug, Clone, Default)]
pub(crate) struct Samples(pub(crate) Vec<Sample>);

impl Samples {
    /// The samples of `text` (the exposition format), those of the families
    /// `keep` accepts by name.
    pub(crate) fn parse(text: &str, keep: impl Fn(&str) -> bool) -> Self {
        Self(
            text.lines()
                .filter(|line| !line.starts_with('#'))
                .filter_map(parse_line)
                .filter(|sample| keep(&sample.name))
                .collect(),
        )
    }

    /// The samples of the series `name`.
    pub(crate) fn of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |sample| sample.name == name)
    }

    /// The value of the series `name` with exactly these labels (in any
    /// order), if rendered.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.of(name)
            .find(|sample| {
                sample.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(key, value)| sample.label(key) == Some(value))
            })
            .map(|sample| sample.value)
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        number => number.parse().ok()?,
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, Vec::new()),
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `a="1",b="x\"y"` (the inside of the braces) as pairs, escapes undone.
fn parse_labels(mut text: &str) -> Option<Vec<(String, String)>> {
    let mut labels = Vec::new();
    while !text.is_empty() {
        let (key, rest) = text.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (at, '"') => break at,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, other) => value.push(other),
            }
        };
        labels.push((key.trim_start_matches(',').to_owned(), value));
        text = rest[end + 1..].trim_start_matches(',');
    }
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporters_lines_are_read_back() {
        let text = "# HELP x_total Things.\n# TYPE x_total counter\n\
            x_total{tool=\"a\",outcome=\"failed\"} 3\n\
            x_total{tool=\"q\\\"uote\\\\d\\nl\"} 1.5\n\
            plain 7\n\
            h_bucket{le=\"+Inf\"} 4\n\
            broken{tool=\"a\" 1\n\
            nonumber{a=\"b\"} x\n";
        let samples = Samples::parse(text, |_| true);
        assert_eq!(samples.0.len(), 4, "{samples:?}");
        assert_eq!(
            samples.value("x_total", &[("outcome", "failed"), ("tool", "a")]),
            Some(3.0)
        );
        assert_eq!(
            samples.value("x_total", &[("tool", "q\"uote\\d\nl")]),
            Some(1.5)
        );
        assert_eq!(samples.value("plain", &[]), Some(7.0));
        assert_eq!(samples.value("h_bucket", &[("le", "+Inf")]), Some(4.0));
        assert_eq!(samples.value("x_total", &[("tool", "a")]), None);
        let kept = Samples::parse(text, |name| name == "plain");
        assert_eq!(kept.0.len(), 1);
    }
}
