//! port-rate: a chosen port whose rate is below its siblings' of the same link layer (the job runs
//! at its speed). Warns, never fails; pure over the detection; an unparsed rate is left out.

use super::*;

/// `400 Gb/sec (4X NDR)` -> 400.0; `25 Gb/sec (1X EDR)` -> 25.0; garbage -> None.
pub(super) fn gbps(rate: &str) -> Option<f64> {
    nw_observe::detect::port::rate_mbps(rate).map(|m| f64::from(m) / 1000.0)
}

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let plan = inp.plan;
    let chosen: Vec<(String, u32, String, f64, String)> = plan
        .used_ports()
        .filter_map(|(d, p)| {
            let rate = p.rate.as_deref()?;
            Some((d.to_string(), p.port, p.link_layer.clone().unwrap_or_default(), gbps(rate)?, rate.to_string()))
        })
        .collect();
    let mut out = Vec::new();
    for (dev, port, layer, g, text) in &chosen {
        let siblings: Vec<&(String, u32, String, f64, String)> = chosen.iter().filter(|c| &c.2 == layer).collect();
        if siblings.len() < 2 {
            continue;
        }
        let best = siblings.iter().map(|c| c.3).fold(0.0, f64::max);
        let mut c = if *g < best {
            let summary = format!("{dev}:{port} runs at {g} Gb/s ({text}) while its sibling ports run at {best} Gb/s: the job's collectives go at the slowest rail's pace");
            Check::new("port-rate", Status::Warn, summary)
            .hint("check the cable and transceiver kind, the switch port's configured speed, and `ibstat`/`ethtool` on the host")
        } else {
            Check::new("port-rate", Status::Pass, format!("{dev}:{port} at {g} Gb/s, as fast as its sibling ports"))
        };
        c = c.ev("device", dev.as_str()).ev("port", *port).ev("rate", text.as_str());
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
