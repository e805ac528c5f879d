//! How sure a campaign and a fleet's matrix are, computed exactly (no normal
//! approximation: a campaign has tens of cycles, not thousands).
//!
//! - [`clopper_pearson_upper`]: the exact one-sided upper bound on the per-cut failure
//!   rate. At zero failures in n cuts it is 1 - 0.05^(1/n) at 95%, which the "rule of
//!   three" approximates as 3/n; we report the exact value. A drive that passed 20 cuts
//!   of 20 is not proven perfect: its rate is below 13.9%.
//! - [`fisher_exact_two_sided`]: whether two drives' failing and clean cuts differ by more
//!   than chance (Fisher's exact test on the 2×2 table), the test a user ran by hand
//!   between two configurations in an OpenZFS issue.

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

/// The two-sided p-value of Fisher's exact test on the table
/// `[[a, b], [c, d]]` (rows: two drives; columns: failing cuts, clean cuts): the
/// probability, with the margins fixed, of a table at most as likely as this one.
pub fn fisher_exact_two_sided(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let (row1, col1, n) = (a + b, a + c, a + b + c + d);
    if n == 0 {
        return 1.0;
    }
    let lf = ln_factorials(n);
    let row2 = n - row1;
    let ln_p = |x: u64| {
        // Hypergeometric: C(row1, x) C(row2, col1 - x) / C(n, col1).
        let choose = |m: u64, r: u64| lf[m as usize] - lf[r as usize] - lf[(m - r) as usize];
        choose(row1, x) + choose(row2, col1 - x) - choose(n, col1)
    };
    let lo = col1.saturating_sub(row2);
    let hi = col1.min(row1);
    let observed = ln_p(a);
    // A relative tolerance, as R's fisher.test and SciPy use, so tables as likely as the
    // observed one are not left out by rounding.
    let tolerance = 1e-7;
    let p: f64 = (lo..=hi)
        .map(ln_p)
        .filter(|&l| l <= observed + tolerance)
        .map(f64::exp)
        .sum();
    p.min(1.0)
}

/// ln(k!) for k in 0..=n.
fn ln_factorials(n: u64) -> Vec<f64> {
    let mut v = Vec::with_capacity(n as usize + 1);
    let mut acc = 0.0f64;
    v.push(0.0);
    for k in 1..=n {
        acc += (k as f64).ln();
        v.push(acc);
    }
    v
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
    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-6 * want.max(1e-12) + 1e-12
    }

    /// Published values: Fisher's tea-tasting table and others, as SciPy 1.17's
    /// `scipy.stats.fisher_exact` gives them (R's `fisher.test` agrees).
    #[test]
    fn fisher_matches_published_values() {
        let cases: [(u64, u64, u64, u64, f64); 6] = [
            // The lady tasting tea (Fisher 1935): 3 of 4 right each way.
            (3, 1, 1, 3, 0.48571428571428565),
            (8, 2, 1, 5, 0.034965034965034975),
            (6, 2, 1, 4, 0.10256410256410256),
            // A lying drive 20 of 20 against an honest one 0 of 20.
            (20, 0, 0, 20, 1.4508889103849688e-11),
            (7, 13, 0, 20, 0.008316008316008316),
            (0, 20, 0, 20, 1.0),
        ];
        for (a, b, c, d, want) in cases {
            let got = fisher_exact_two_sided(a, b, c, d);
            assert!(close(got, want), "[[{a},{b}],[{c},{d}]]: {got} != {want}");
            // Symmetric in the drives' order.
            assert!(close(fisher_exact_two_sided(c, d, a, b), want));
        }
    }

    /// The one-sided 95% Clopper-Pearson bound as SciPy 1.17 gives it
    /// (`scipy.stats.beta.ppf(0.95, k + 1, n - k)`); 0 of n is 1 - 0.05^(1/n).
    #[test]
    fn the_upper_bound_matches_published_values() {
        let cases: [(u64, u64, f64); 5] = [
            (0, 20, 0.13910834066826516),
            (0, 100, 0.029513049607039925),
            (1, 20, 0.2161061642068473),
            (7, 20, 0.5580345113154888),
            (19, 20, 0.9974386212234697),
        ];
        for (k, n, want) in cases {
            let got = clopper_pearson_upper(k, n, 0.05);
            assert!(close(got, want), "{k} of {n}: {got} != {want}");
        }
        assert_eq!(clopper_pearson_upper(0, 0, 0.05), 1.0);
        assert_eq!(clopper_pearson_upper(5, 5, 0.05), 1.0);
        assert!(close(
            clopper_pearson_upper(0, 20, 0.05),
            1.0 - 0.05f64.powf(1.0 / 20.0)
        ));
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
