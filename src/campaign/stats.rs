//! How sure a campaign is: the exact (Clopper-Pearson) one-sided 95% upper bound on the
//! per-cycle failure rate. At zero failures in n cycles it is 1 - 0.05^(1/n), which the
//! "rule of three" approximates as 3/n; we report the exact value.

/// P(X <= x) for X ~ Binomial(n, p), summed in log space (stable for thousands of cycles).
pub fn binom_cdf(x: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if x >= n { 1.0 } else { 0.0 };
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut log_choose = 0.0f64; // ln C(n, 0)
    let mut sum = 0.0f64;
    for k in 0..=x.min(n) {
        if k > 0 {
            log_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        sum += (log_choose + k as f64 * lp + (n - k) as f64 * lq).exp();
    }
    sum.min(1.0)
}

/// The exact one-sided upper confidence bound on p after `failures` in `n` trials, at
/// confidence `1 - alpha`: the p with P(X <= failures; n, p) = alpha.
pub fn clopper_pearson_upper(failures: u64, n: u64, alpha: f64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    if failures >= n {
        return 1.0;
    }
    let (mut lo, mut hi) = (failures as f64 / n as f64, 1.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if binom_cdf(failures, n, mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Quantile of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    crate::latency::nearest_rank(sorted, q)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn zero_failures_is_about_three_over_n() {
        for n in [10u64, 50, 100, 1000, 3000] {
            let u = clopper_pearson_upper(0, n, 0.05);
            let exact = 1.0 - 0.05f64.powf(1.0 / n as f64);
            assert!((u - exact).abs() < 1e-9, "n={n}: {u} vs {exact}");
            assert!((u * n as f64 - 3.0).abs() < 0.5, "n={n}: {u}");
        }
    }
    #[test]
    fn known_values() {
        // 1 failure in 20: exact one-sided 95% upper bound 0.2161 (tables).
        let u = clopper_pearson_upper(1, 20, 0.05);
        assert!((u - 0.2161).abs() < 1e-3, "{u}");
        // 50 of 50: 1.
        assert_eq!(clopper_pearson_upper(50, 50, 0.05), 1.0);
    }
}
