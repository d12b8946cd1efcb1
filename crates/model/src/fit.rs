//! Least-squares fits of measured durations against token counts, for parameters measured from a dataset.

use serde::Serialize;

/// `y ≈ a + b n + c n²`, fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quadratic {
    /// Constant term, s.
    pub a: f64,
    /// Per token, s.
    pub b: f64,
    /// Per token squared, s.
    pub c: f64,
    /// Points fitted.
    pub points: u64,
    /// Coefficient of determination.
    pub r_squared: Option<f64>,
}

impl Quadratic {
    /// The fitted value at `n`.
    pub fn at(&self, n: f64) -> f64 {
        self.a + self.b * n + self.c * n * n
    }
}

/// Fits `y = a + b n + c n²` to `(n, y)` points; when the best quadratic bends down (`c < 0`), which prefill time
/// cannot, fits the line `a + b n` instead. `None` with fewer than 3 points (2 for the line) or a degenerate design
/// (all `n` equal).
pub fn fit_quadratic(points: &[(f64, f64)]) -> Option<Quadratic> {
    let quadratic = solve(points, 3);
    let (a, b, c) = match quadratic {
        Some(q) if q[2] >= 0.0 => (q[0], q[1], q[2]),
        _ => {
            let line = solve(points, 2)?;
            (line[0], line[1], 0.0)
        }
    };
    let fit = Quadratic { a, b, c, points: points.len() as u64, r_squared: None };
    let mean = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
    let total: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let residual: f64 = points.iter().map(|p| (p.1 - fit.at(p.0)).powi(2)).sum();
    Some(Quadratic { r_squared: (total > 0.0).then(|| 1.0 - residual / total), ..fit })
}

/// Least squares over the basis `1, n, n², …` (`terms` of them) by the normal equations, with `n` scaled by its
/// largest magnitude for conditioning.
fn solve(points: &[(f64, f64)], terms: usize) -> Option<Vec<f64>> {
    if points.len() < terms {
        return None;
    }
    let scale = points.iter().map(|p| p.0.abs()).fold(0.0, f64::max).max(1.0);
    let mut m = vec![vec![0.0; terms + 1]; terms];
    for &(n, y) in points {
        let x = n / scale;
        let basis: Vec<f64> = (0..terms).map(|k| x.powi(k as i32)).collect();
        for i in 0..terms {
            for j in 0..terms {
                m[i][j] += basis[i] * basis[j];
            }
            m[i][terms] += basis[i] * y;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..terms {
        let pivot = (col..terms).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-12 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (row, values) in m.iter_mut().enumerate() {
            if row != col {
                let factor = values[col] / pivot_row[col];
                for (value, pivot) in values.iter_mut().zip(&pivot_row).skip(col) {
                    *value -= factor * pivot;
                }
            }
        }
    }
    Some((0..terms).map(|k| m[k][terms] / m[k][k] / scale.powi(k as i32)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_points_give_their_polynomial() {
        // y = 0.01 + 2e-5 n + 3e-9 n².
        let points: Vec<(f64, f64)> =
            [100.0, 1000.0, 4000.0, 8000.0].iter().map(|&n| (n, 0.01 + 2e-5 * n + 3e-9 * n * n)).collect();
        let q = fit_quadratic(&points).unwrap();
        assert!((q.a - 0.01).abs() < 1e-9 && (q.b - 2e-5).abs() < 1e-12 && (q.c - 3e-9).abs() < 1e-15, "{q:?}");
        assert!((q.r_squared.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(q.points, 4);
    }

    #[test]
    fn a_downward_bend_falls_back_to_a_line() {
        // Concave points: the line through them by least squares. x = 0, 1, 2, 3; y = 0, 2, 3, 3.
        let q = fit_quadratic(&[(0.0, 0.0), (1.0, 2.0), (2.0, 3.0), (3.0, 3.0)]).unwrap();
        // Slope = Σ(x − 1.5)(y − 2) / Σ(x − 1.5)² = (3 + 0 + 0.5 + 1.5) / 5 = 1; intercept 2 − 1.5 = 0.5.
        assert_eq!(q.c, 0.0);
        assert!((q.b - 1.0).abs() < 1e-12 && (q.a - 0.5).abs() < 1e-12, "{q:?}");
        assert_eq!(fit_quadratic(&[(5.0, 1.0), (5.0, 2.0), (5.0, 3.0)]), None);
        assert_eq!(fit_quadratic(&[(1.0, 1.0)]), None);
    }
}
