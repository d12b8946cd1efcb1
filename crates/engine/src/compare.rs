//! Two sets of metrics side by side (measured against replayed, before against after a configuration change).
//!
//! Every number of the two [`Metrics`] objects is paired by its path in the JSON object (`overall.latency.ttft.p99`,
//! `groups.<key>.throughput.requests_per_s`, …), so the comparison covers whatever `metrics` reports, now and when
//! it grows, without a list to keep in step. A row is written for every path that is a number on at least one side;
//! `delta` is B − A and `relative` is `delta / |A|` (null when A is zero or missing). Rows are in path order.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::Metrics;

/// One figure of both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Path of the figure in the `metrics --json` object, dot-separated.
    pub path: String,
    /// Its value in A, or null.
    pub a: Option<f64>,
    /// Its value in B, or null.
    pub b: Option<f64>,
    /// B − A, when both exist.
    pub delta: Option<f64>,
    /// (B − A) / |A|, when both exist and A is not zero.
    pub relative: Option<f64>,
}

/// Pairs every number of `a` and `b` by path; the run-level settings (version, quantile method, SLO, grouping)
/// are not figures and are left out.
pub fn compare(a: &Metrics, b: &Metrics) -> Vec<Difference> {
    compare_values(&figures(a), &figures(b))
}

fn compare_values(a: &Value, b: &Value) -> Vec<Difference> {
    let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
    flatten("", a, &mut left);
    flatten("", b, &mut right);
    let mut paths: Vec<&String> = left.keys().chain(right.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .map(|path| {
            let (a, b) = (left.get(path).copied(), right.get(path).copied());
            let delta = a.zip(b).map(|(a, b)| b - a);
            let relative = a.zip(delta).and_then(|(a, d)| (a != 0.0).then(|| d / a.abs()));
            Difference { path: path.clone(), a, b, delta, relative }
        })
        .collect()
}

fn figures(metrics: &Metrics) -> Value {
    let mut value = serde_json::to_value(metrics).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        for key in ["metrics_version", "quantile_method", "slo", "by"] {
            map.remove(key);
        }
    }
    value
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, f64>) {
    match value {
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                out.insert(prefix.to_owned(), n);
            }
        }
        Value::Object(map) => {
            for (key, value) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&path, value, out);
            }
        }
        // Nulls are absent figures; strings and arrays are labels, not figures.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_pair_by_path_with_absolute_and_relative_differences() {
        let a = serde_json::json!({"x": {"p50": 2.0, "p99": null, "n": 4}, "only_a": 1, "label": "s"});
        let b = serde_json::json!({"x": {"p50": 3.0, "p99": 5.0, "n": 0}, "only_b": 0});
        let rows: Vec<_> =
            compare_values(&a, &b).into_iter().map(|d| (d.path, d.a, d.b, d.delta, d.relative)).collect();
        assert_eq!(
            rows,
            [
                ("only_a".to_owned(), Some(1.0), None, None, None),
                ("only_b".to_owned(), None, Some(0.0), None, None),
                // 4 → 0: −4, −100 %.
                ("x.n".to_owned(), Some(4.0), Some(0.0), Some(-4.0), Some(-1.0)),
                // 2 → 3: +1, +50 %.
                ("x.p50".to_owned(), Some(2.0), Some(3.0), Some(1.0), Some(0.5)),
                ("x.p99".to_owned(), None, Some(5.0), None, None),
            ]
        );
        // A zero on the A side has no relative difference.
        let zero = compare_values(&serde_json::json!({"z": 0}), &serde_json::json!({"z": 2}));
        assert_eq!((zero[0].delta, zero[0].relative), (Some(2.0), None));
    }
}
