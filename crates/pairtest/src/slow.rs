//! A pair that works, but slowly: each bandwidth figure against the median of its peers and its
//! rated speed (hardware ports only). Pure: it judges, never decides what a slow pair costs.

/// The default threshold: a pair below 70 % of the median, or of its rated speed, is slow.
pub const DEFAULT_PCT: u8 = 70;

/// One pair's figures: measured and rated, in kb/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure {
    pub kbps: Option<u64>,
    pub rated_kbps: Option<u64>,
}

/// Why a pair is slow, with the figures it was judged by (kb/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slow {
    pub kbps: u64,
    /// The median it was judged against, when it is below `pct` of it.
    pub(crate) median: Option<u64>,
    /// Its rated speed, when it is below `pct` of it.
    pub(crate) rated: Option<u64>,
}

/// The median of the figures (the mean of the middle two for an even count).
pub(crate) fn median(figures: &[u64]) -> Option<u64> {
    let mut v = figures.to_vec();
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2),
    }
}

/// Each pair's verdict: `Some` below `pct` % of the median or of its rated speed. `pct` 0 judges
/// nothing; a pair without a figure is never slow nor in the median.
pub fn judge(figures: &[Figure], pct: u8) -> Vec<Option<Slow>> {
    let measured: Vec<u64> = figures.iter().filter_map(|f| f.kbps).collect();
    let median = median(&measured);
    let below = |x: u64, of: u64| u128::from(x) * 100 < u128::from(of) * u128::from(pct);
    figures
        .iter()
        .map(|f| {
            let kbps = f.kbps.filter(|_| pct > 0)?;
            let by_median = median.filter(|&m| below(kbps, m));
            let by_rate = f.rated_kbps.filter(|&r| below(kbps, r));
            (by_median.is_some() || by_rate.is_some()).then_some(Slow { kbps, median: by_median, rated: by_rate })
        })
        .collect()
}

/// A figure for people: `400 Gb/s`, `31.2 Gb/s`, `22.5 Mb/s`, `750 kb/s`.
pub(crate) fn rate(kbps: u64) -> String {
    let (v, unit) = match kbps {
        k if k >= 1_000_000 => (k as f64 / 1e6, "Gb/s"),
        k if k >= 1_000 => (k as f64 / 1e3, "Mb/s"),
        k => (k as f64, "kb/s"),
    };
    let places = if v >= 100.0 || v.fract() == 0.0 { 0 } else { 1 };
    format!("{v:.places$} {unit}")
}

fn pct_of(x: u64, of: u64) -> u128 {
    (u128::from(x) * 100).checked_div(u128::from(of)).unwrap_or(0)
}

impl Slow {
    /// `12.5 Gb/s: 31 % of the job's median 40 Gb/s, 3 % of its rated 400 Gb/s` (`among`: whose).
    pub fn summary(&self, among: &str) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.median {
            parts.push(format!("{} % of {among} median {}", pct_of(self.kbps, m), rate(m)));
        }
        if let Some(r) = self.rated {
            parts.push(format!("{} % of its rated {}", pct_of(self.kbps, r), rate(r)));
        }
        format!("{}: {}", rate(self.kbps), parts.join(", "))
    }
}

/// What to check for a slow pair, in the words `doctor` uses.
pub const HINT: &str = "run `nccl-wrap doctor` on both nodes (port-rate: a port that negotiated a lower rate; pcie-link: a NIC trained below its PCIe width or speed), check the cable, transceiver and switch port of the rail, and its error counters";

#[cfg(test)]
mod tests {
    use super::*;

    fn f(kbps: Option<u64>, rated: Option<u64>) -> Figure {
        Figure { kbps, rated_kbps: rated }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5]), Some(5));
        assert_eq!(median(&[9, 1, 5]), Some(5));
        assert_eq!(median(&[1, 9, 5, 7]), Some(6));
        assert_eq!(median(&[3, 4]), Some(3), "halves round down");
        assert_eq!(median(&[u64::MAX, u64::MAX]), Some(u64::MAX), "no overflow");
    }

    #[test]
    fn one_pair_far_below_the_median_is_named_with_both_figures() {
        let figs = [
            f(Some(380_000_000), Some(400_000_000)),
            f(Some(390_000_000), Some(400_000_000)),
            f(Some(120_000_000), Some(400_000_000)),
            f(Some(385_000_000), Some(400_000_000)),
            f(None, Some(400_000_000)),
        ];
        let v = judge(&figs, DEFAULT_PCT);
        assert_eq!(v.iter().filter(|s| s.is_some()).count(), 1, "{v:?}");
        let s = v[2].expect("the slow pair");
        assert_eq!(s, Slow { kbps: 120_000_000, median: Some(382_500_000), rated: Some(400_000_000) });
        assert_eq!(s.summary("the job's"), "120 Gb/s: 31 % of the job's median 382 Gb/s, 30 % of its rated 400 Gb/s");
    }

    #[test]
    fn a_uniformly_slow_job_is_named_against_the_rated_speed_only() {
        // Every pair at a quarter of its rate: the median says nothing, the rate does.
        let figs = [f(Some(100_000_000), Some(400_000_000)), f(Some(101_000_000), Some(400_000_000))];
        let v = judge(&figs, DEFAULT_PCT);
        assert!(v.iter().all(|s| s.is_some_and(|s| s.median.is_none() && s.rated == Some(400_000_000))), "{v:?}");
        // A software port carries no rate: nothing to judge it by but the median.
        let soft = [f(Some(900), None), f(Some(1000), None), f(Some(950), None)];
        assert!(judge(&soft, DEFAULT_PCT).iter().all(Option::is_none));
    }

    #[test]
    fn the_threshold_is_a_strict_bound_and_zero_judges_nothing() {
        let figs = [f(Some(70), None), f(Some(100), None), f(Some(100), None)];
        assert!(judge(&figs, 70)[0].is_none(), "exactly 70 % is not below 70 %");
        assert!(judge(&figs, 71)[0].is_some());
        let slow = [f(Some(1), Some(400_000_000)), f(Some(100_000_000), None)];
        assert!(judge(&slow, 0).iter().all(Option::is_none));
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(rate(400_000_000), "400 Gb/s");
        assert_eq!(rate(31_250_000), "31.2 Gb/s");
        assert_eq!(rate(25_000_000), "25 Gb/s");
        assert_eq!(rate(22_480), "22.5 Mb/s");
        assert_eq!(rate(4_100), "4.1 Mb/s");
        assert_eq!(rate(750), "750 kb/s");
        assert_eq!(rate(0), "0 kb/s");
        assert_eq!(rate(u64::MAX), "18446744073710 Gb/s");
    }
}
