//! The two numbers a qualification matrix rests on, computed exactly (no normal
//! approximation: a fleet campaign has tens of cycles, not thousands).
//!
//! - [`failure_rate_upper_95`]: with `k` failing cuts in `n`, the most the drive's
//!   failure rate per cut can be at 95% confidence (one-sided Clopper-Pearson). A drive
//!   that passed 20 cuts of 20 is not proven perfect: its rate is below 13.9%.
//! - [`fisher_exact_two_sided`]: whether two drives' failing and clean cuts differ by
//!   more than chance (Fisher's exact test on the 2×2 table), the test a user ran by hand
//!   between two configurations in an OpenZFS issue.

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

/// P(X <= k) for X ~ Binomial(n, p).
fn binomial_cdf(k: u64, n: u64, p: f64, lf: &[f64]) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if k >= n { 1.0 } else { 0.0 };
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    (0..=k.min(n))
        .map(|i| {
            let ln_choose = lf[n as usize] - lf[i as usize] - lf[(n - i) as usize];
            (ln_choose + i as f64 * lp + (n - i) as f64 * lq).exp()
        })
        .sum::<f64>()
        .min(1.0)
}

/// The one-sided 95% upper bound on a failure rate seen as `k` failures in `n` trials
/// (Clopper-Pearson: the rate at which `k` or fewer failures happen 5% of the time);
/// 1.0 with no trials or when every trial failed.
pub fn failure_rate_upper_95(k: u64, n: u64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    let lf = ln_factorials(n);
    // The CDF falls as p rises: bisect for CDF = 0.05.
    let (mut lo, mut hi) = (k as f64 / n as f64, 1.0f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if binomial_cdf(k, n, mid, &lf) > 0.05 {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            let got = failure_rate_upper_95(k, n);
            assert!(close(got, want), "{k} of {n}: {got} != {want}");
        }
        assert_eq!(failure_rate_upper_95(0, 0), 1.0);
        assert_eq!(failure_rate_upper_95(5, 5), 1.0);
        assert!(close(
            failure_rate_upper_95(0, 20),
            1.0 - 0.05f64.powf(1.0 / 20.0)
        ));
    }
}
