//! port-rate: a chosen port whose rate is below its siblings' of the same link layer (the job runs
//! at its speed). Warns, never fails; pure over the detection; an unparsed rate is left out.

use super::*;

/// `400 Gb/sec (4X NDR)` -> 400.0; `25 Gb/sec (1X EDR)` -> 25.0; garbage -> None.
pub(super) fn gbps(rate: &str) -> Option<f64> {
    nw_observe::detect::port::rate_mbps(rate).map(|m| f64::from(m) / 1000.0)
}

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    // (device, port, rate as sysfs says it, Gb/s, link layer)
    let chosen = inp.plan.used_ports().filter_map(|(d, p)| {
        let rate = p.rate.as_deref()?;
        Some((d, p.port, rate, gbps(rate)?, p.link_layer.as_deref().unwrap_or_default()))
    });
    let chosen: Vec<_> = chosen.collect();
    let mut out = Vec::new();
    for &(dev, port, text, g, layer) in &chosen {
        let siblings: Vec<f64> = chosen.iter().filter(|c| c.4 == layer).map(|c| c.3).collect();
        if siblings.len() < 2 {
            continue;
        }
        let best = siblings.into_iter().fold(0.0, f64::max);
        let mut c = if g < best {
            let summary = format!("{dev}:{port} runs at {g} Gb/s ({text}) while its sibling ports run at {best} Gb/s: the job's collectives go at the slowest rail's pace");
            Check::new("port-rate", Status::Warn, summary)
            .hint("check the cable and transceiver kind, the switch port's configured speed, and `ibstat`/`ethtool` on the host")
        } else {
            Check::new("port-rate", Status::Pass, format!("{dev}:{port} at {g} Gb/s, as fast as its sibling ports"))
        };
        c = c.ev("device", dev).ev("port", port).ev("rate", text);
        out.push(c.ev("siblings_best_gbps", best));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_sysfs_prints_them() {
        assert_eq!(gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(gbps("Unknown"), None);
        assert_eq!(gbps("inf Gb/sec"), None);
        assert_eq!(gbps(""), None);
    }
}
