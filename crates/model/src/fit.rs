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
    fit_quadratic_by(|f: &mut dyn FnMut(f64, f64)| {
        points.iter().for_each(|&(n, y)| f(n, y));
        Ok::<(), std::convert::Infallible>(())
    })
    .unwrap_or_else(|never| match never {})
}

/// [`fit_quadratic`] over points that are read, not held: `each(f)` calls `f(n, y)` for every point, in the same
/// order every time. It is called three times (the scale and mean, the normal equations, the residuals), so that
/// memory does not grow with the points; the fit is the one of the points in that order, to the bit. An error of
/// `each` stops the fit.
pub fn fit_quadratic_by<E>(
    mut each: impl FnMut(&mut dyn FnMut(f64, f64)) -> Result<(), E>,
) -> Result<Option<Quadratic>, E> {
    // The scale of `n` (its largest magnitude, for conditioning) and the mean of `y`.
    // Sums start from −0.0, as `Iterator::sum` does.
    let (mut count, mut scale, mut sum_y) = (0u64, 0.0f64, -0.0f64);
    each(&mut |n, y| {
        count += 1;
        scale = scale.max(n.abs());
        sum_y += y;
    })?;
    let scale = scale.max(1.0);
    let mut quadratic = Normal::new(3, scale);
    let mut line = Normal::new(2, scale);
    each(&mut |n, y| {
        quadratic.add(n, y);
        line.add(n, y);
    })?;
    let solved = if count >= 3 { quadratic.solve() } else { None };
    let (a, b, c) = match solved {
        Some(q) if q[2] >= 0.0 => (q[0], q[1], q[2]),
        _ => match (count >= 2).then(|| line.solve()).flatten() {
            Some(line) => (line[0], line[1], 0.0),
            None => return Ok(None),
        },
    };
    let fit = Quadratic { a, b, c, points: count, r_squared: None };
    let mean = sum_y / count as f64;
    let (mut total, mut residual) = (-0.0f64, -0.0f64);
    each(&mut |n, y| {
        total += (y - mean).powi(2);
        residual += (y - fit.at(n)).powi(2);
    })?;
    Ok(Some(Quadratic { r_squared: (total > 0.0).then(|| 1.0 - residual / total), ..fit }))
}

/// The normal equations of least squares over the basis `1, x, x², …` (`terms` of them), `x = n / scale`.
struct Normal {
    terms: usize,
    scale: f64,
    m: Vec<Vec<f64>>,
}

impl Normal {
    fn new(terms: usize, scale: f64) -> Self {
        Self { terms, scale, m: vec![vec![0.0; terms + 1]; terms] }
    }

    fn add(&mut self, n: f64, y: f64) {
        let terms = self.terms;
        let x = n / self.scale;
        let basis: Vec<f64> = (0..terms).map(|k| x.powi(k as i32)).collect();
        for i in 0..terms {
            for j in 0..terms {
                self.m[i][j] += basis[i] * basis[j];
            }
            self.m[i][terms] += basis[i] * y;
        }
    }

    /// The coefficients of `1, n, n², …`; `None` for a degenerate design.
    fn solve(mut self) -> Option<Vec<f64>> {
        let (terms, m) = (self.terms, &mut self.m);
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
        Some((0..terms).map(|k| m[k][terms] / m[k][k] / self.scale.powi(k as i32)).collect())
    }
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

    #[test]
    fn points_read_three_times_and_an_error_stops_the_fit() {
        let points = [(0.0, 0.0), (1.0, 2.0), (2.0, 3.0), (3.0, 3.0)];
        let mut passes = 0;
        let fit = fit_quadratic_by(|f: &mut dyn FnMut(f64, f64)| {
            passes += 1;
            points.iter().for_each(|&(n, y)| f(n, y));
            Ok::<(), String>(())
        });
        assert_eq!((fit, passes), (Ok(fit_quadratic(&points)), 3));
        let failed = fit_quadratic_by(|_: &mut dyn FnMut(f64, f64)| Err("cannot read"));
        assert_eq!(failed, Err("cannot read"));
    }
}
