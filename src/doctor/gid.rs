//! gid: does each RoCE port have the GID NCCL wants, and do the ports agree on one index.

use super::*;
use nw_nccl::env::IB_ADDR_RANGE;
use nw_nccl::gid as nccl_gid;
use nw_observe::detect::netif::Owner;

pub(super) fn roce_ports(plan: &Plan) -> Vec<(&Device, &PortFacts)> {
    let ports = plan.detection.devices.iter().flat_map(|d| d.ports.iter().map(move |p| (d, p)));
    ports.filter(|(_, p)| p.link_layer.as_deref() == Some("Ethernet")).collect()
}

/// `gids/<i>` and `gid_attrs/types/<i>` of one port: each file and what it holds.
fn gid_entry(sysfs: &Sysfs, dev: &str, port: u32, i: u32) -> (PathBuf, Option<String>, PathBuf, Option<String>) {
    let g = format!("class/infiniband/{dev}/ports/{port}/gids/{i}");
    let t = format!("class/infiniband/{dev}/ports/{port}/gid_attrs/types/{i}");
    (sysfs.path(&g), sysfs.attr(&g).ok(), sysfs.path(&t), sysfs.attr(&t).ok())
}

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    let roce = roce_ports(inp.plan);
    let mut out = Vec::new();
    let user_index = user_var(inp.vars, IB_GID_INDEX);
    let user_kept = inp.plan.vars.iter().all(|v| v.name != IB_GID_INDEX || v.action == Action::Kept);
    let mut agree: Vec<(String, u32)> = Vec::new();
    for (dev, p) in &roce {
        let label = format!("{}:{}", dev.name, p.port);
        let mut c = match &p.gid {
            None => Check::new("gid", Status::Fail, format!("{label}: GID table unreadable or empty")).hint(
                "check that the port's net device exists and is up; the kernel fills the GID table from its addresses",
            ),
            Some(g) => {
                let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &dev.name, p.port, g.index);
                let (ndev, at) = (g.ndev.as_deref().unwrap_or("?"), format!("{} at GID index {}", g.address, g.index));
                let link_local = g.address.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_link_local());
                if g.full_match {
                    agree.push((label.clone(), g.index));
                }
                let (status, summary, hint) = match (g.full_match, link_local) {
                    (true, true) => (
                        Status::Warn,
                        format!("{label}: RoCE v2 {at} ({ndev}), an IPv4 link-local address: NCCL uses it, but this port reaches only its own link"),
                        Some("give the rail a routable address where peers sit on other links or subnets".to_string()),
                    ),
                    (true, false) => (Status::Pass, format!("{label}: RoCE v2 {at} ({ndev})"), None),
                    (false, _) => (
                        Status::Fail,
                        format!(
                            "{label}: no RoCE v2 IPv4 GID; NCCL would settle on index {} ({}, {}), which cannot reach IPv4 RoCE v2 peers",
                            g.index,
                            g.address,
                            g.roce.map_or("type unknown", |r| if r.number() == 1 { "RoCE v1" } else { "RoCE v2" })
                        ),
                        Some(format!(
                            "give net device {ndev} an IPv4 address (the kernel adds RoCE v1 and v2 GIDs for each address), or set NCCL_IB_ADDR_FAMILY=AF_INET6 if the fabric is IPv6"
                        )),
                    ),
                };
                let c = Check::new("gid", status, summary).hint_opt(hint).ev("index", g.index);
                c.ev("ndev", json!(g.ndev)).ev("gid", file(&gp, gv.as_deref())).ev("type", file(&tp, tv.as_deref()))
            }
        };
        if let (Some(ui), true) = (&user_index, user_kept) {
            c = user_gid_index(inp, c, dev, p, ui);
        }
        out.push(c.ev("device", dev.name.as_str()).ev("port", p.port));
    }
    if !agree.is_empty() {
        out.push(gid_agreement(inp, &roce, &agree));
    }
    if out.is_empty() {
        let ib = inp.plan.detection.devices.iter().any(|d| !d.ports.is_empty());
        let (status, summary) = if ib {
            (Status::Pass, "no RoCE port: InfiniBand ports need no GID index")
        } else {
            (Status::Warn, "no RDMA port of this pod: no GID table to check")
        };
        out.push(Check::new("gid", status, summary));
    }
    out
}

/// A user-set `NCCL_IB_GID_INDEX` that nccl-wrap keeps: does it point at a usable entry here?
pub(super) fn user_gid_index(inp: &Inputs, mut c: Check, dev: &Device, p: &PortFacts, value: &str) -> Check {
    let Ok(i) = value.trim().parse::<u32>() else {
        c.status = c.status.max(Status::Warn);
        c.summary += &format!("; NCCL_IB_GID_INDEX={value:?} is not an index");
        return c;
    };
    let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &dev.name, p.port, i);
    let ok = gv.as_deref().and_then(nccl_gid::parse_gid).is_some_and(|g| {
        let entry = nccl_gid::GidEntry { index: i, gid: g, roce: tv.as_deref().and_then(nccl_gid::RoceType::parse) };
        nccl_gid::is_full_match(&entry, &nw_decide::gid_prefs(inp.vars).0)
    });
    if !ok {
        c.status = Status::Fail;
        c.summary += &format!(
            "; NCCL_IB_GID_INDEX={i} (set in the environment, kept) points at {} ({}) on this port: NCCL will fail on it",
            gv.as_deref().unwrap_or("no entry"),
            tv.as_deref().unwrap_or("no type")
        );
        c.hint = Some(format!(
            "unset NCCL_IB_GID_INDEX (NCCL 2.21.5+ and nccl-wrap pick the right entry per port) or pass --override{}",
            p.gid.as_ref().map(|g| format!("; this port wants {}", g.index)).unwrap_or_default()
        ));
    }
    c.ev("user_gid_index", json!({"value": value, "gid": file(&gp, gv.as_deref()), "type": file(&tp, tv.as_deref())}))
}

pub(super) fn gid_agreement(inp: &Inputs, roce: &[(&Device, &PortFacts)], agree: &[(String, u32)]) -> Check {
    let index0: Map<String, Value> = roce
        .iter()
        .map(|(d, p)| {
            let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &d.name, p.port, 0);
            let files = json!({"gid": file(&gp, gv.as_deref()), "type": file(&tp, tv.as_deref())});
            (format!("{}:{}", d.name, p.port), files)
        })
        .collect();
    let indices: Map<String, Value> = agree.iter().map(|(l, i)| (l.clone(), json!(i))).collect();
    let old_nccl = "NCCL older than 2.21.5 defaults to NCCL_IB_GID_INDEX=0, the fe80 link-local entry (RoCE v1 on mlx5), on every port, and its RDMA connections fail across subnets";
    let first = agree[0].1;
    let list = agree.iter().map(|(l, i)| format!("{l}={i}")).collect::<Vec<_>>().join(", ");
    let (status, summary, hint) = if agree.iter().all(|(_, i)| *i == first) {
        let set = inp.plan.gid_index.map_or(String::new(), |i| format!("; nccl-wrap exports NCCL_IB_GID_INDEX={i}"));
        let note = if first == 0 { String::new() } else { format!(" ({old_nccl}; the export prevents that)") };
        let n = agree.len();
        (Status::Pass, format!("all {n} usable RoCE port(s) agree on GID index {first}{set}{note}"), None)
    } else if let Some(range) = &inp.plan.addr_range {
        (
            Status::Pass,
            format!(
                "this pod's own GID entries sit at different indices ({list}), so no NCCL_IB_GID_INDEX; nccl-wrap exports NCCL_IB_ADDR_RANGE={range}, within which NCCL's own rule lands on each of them"
            ),
            None,
        )
    } else if roce.iter().any(|(_, p)| p.nccl_pick.is_some()) {
        (
            Status::Warn,
            format!(
                "this pod's own GID entries sit at different indices ({list}) on a shared device: NCCL_IB_GID_INDEX is one value for all ports, and NCCL's own per-port pick is another namespace's or the host's entry on some of them (see gid-owner)"
            ),
            Some("create the pod's rails in the same order on every device, or give pods' rail addresses a subnet of their own so NCCL_IB_ADDR_RANGE can select them"),
        )
    } else {
        (
            Status::Warn,
            format!(
                "RoCE ports disagree on the GID index ({list}): NCCL_IB_GID_INDEX is one value for all ports, so none is exported; NCCL 2.21.5+ picks per port, but {old_nccl}"
            ),
            Some("use NCCL 2.21.5 or later, or give every port's net device the same address layout so the tables agree"),
        )
    };
    Check::new("gid", status, summary)
        .hint_opt(hint)
        .ev("indices", indices)
        .ev("exported", json!(inp.plan.gid_index))
        .ev("addr_range", json!(inp.plan.addr_range))
        .ev("index_0", index0)
}

/// `gid-owner`: for each chosen RoCE port, whose address the GID entry NCCL will use holds, as the
/// run sets it up: the exported or user-kept `NCCL_IB_GID_INDEX`, else NCCL's own rule (narrowed
/// by the exported or user-kept `NCCL_IB_ADDR_RANGE`) over the table as it is now. This pod's:
/// pass; the host's: warn; another namespace's: fail; an empty entry: fail. Where none of the
/// pod's addresses is in the table, whose an entry is cannot be told, and the check says so.
pub(super) fn owner_checks(inp: &Inputs) -> Vec<Check> {
    let effective = |name: &str| {
        inp.plan.vars.iter().find(|v| v.name == name).map_or_else(
            || user_var(inp.vars, name),
            |v| if v.action == Action::Kept { v.previous.clone() } else { Some(v.value.clone()) },
        )
    };
    let forced = effective(IB_GID_INDEX);
    let range = effective(IB_ADDR_RANGE);
    let (mut prefs, _) = nw_decide::gid_prefs(inp.vars);
    prefs.range = range.as_deref().and_then(nccl_gid::AddrRange::parse).or(prefs.range);
    let d = &inp.plan.detection;
    let addrs = if d.source == nw_observe::detect::Source::Sysfs { Ok(d.addresses.clone()) } else { (inp.addrs)() };
    let own: Vec<std::net::Ipv6Addr> = addrs.unwrap_or_default().iter().map(|a| a.gid()).collect();
    let mut out = Vec::new();
    for (dev, p) in roce_ports(inp.plan) {
        let label = format!("{}:{}", dev.name, p.port);
        if !inp.plan.hca.contains(&label) {
            continue;
        }
        let mut problems = Vec::new();
        let Some((rows, len)) =
            inp.sysfs.gid_table(&dev.name, p.port, &nw_decide::gid_rule(prefs), &own, &mut problems)
        else {
            let why = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            out.push(Check::new("gid-owner", Status::Fail, format!("{label}: GID table unreadable: {why}")));
            continue;
        };
        let (index, how) = match forced.as_deref().map(|v| (v, v.trim().parse::<u32>())) {
            Some((_, Ok(i))) => (Some(i), format!("NCCL_IB_GID_INDEX={i}")),
            Some((v, Err(_))) => (None, format!("NCCL_IB_GID_INDEX={v:?}, not an index")),
            None => {
                let entries: Vec<nccl_gid::GidEntry> = rows
                    .iter()
                    .filter_map(|r| {
                        nccl_gid::parse_gid(&r.gid).map(|g| nccl_gid::GidEntry { index: r.index, gid: g, roce: r.roce })
                    })
                    .collect();
                let pick = nccl_gid::choose(&mut nccl_gid::RowTable { entries: &entries, len }, &prefs);
                let how = match &range {
                    Some(r) => format!("NCCL's own rule within NCCL_IB_ADDR_RANGE={r}"),
                    None => "NCCL's own rule (no NCCL_IB_GID_INDEX)".to_string(),
                };
                (pick.map(|e| e.index), how)
            }
        };
        let tells = rows.iter().any(|r| r.owner == Some(Owner::Pod));
        let row = index.and_then(|i| rows.iter().find(|r| r.index == i));
        let (status, whose) = match (row, tells) {
            (None, _) => (Status::Fail, "an empty entry: no address at all"),
            (Some(r), _) if r.owner == Some(Owner::Pod) => (Status::Pass, ", this pod's address"),
            (Some(r), true) if r.owner == Some(Owner::Host) => (Status::Warn, ", the host's address, not this pod's"),
            (Some(_), true) => (Status::Fail, ", another namespace's address (another pod's), not this pod's"),
            (Some(_), false) => (
                Status::Pass,
                "; none of this pod's addresses is in this table (not a shared device), so whose it is is not told",
            ),
        };
        let at = row.map(|r| format!("{} on {}", r.address, r.ndev.as_deref().unwrap_or("?"))).unwrap_or_default();
        let idx = index.map_or("none".to_string(), |i| i.to_string());
        let mut c = Check::new("gid-owner", status, format!("{label}: {how} points at index {idx}: {at}{whose}"));
        if status != Status::Pass {
            let mine = rows.iter().find(|r| r.owner == Some(Owner::Pod) && r.full_match);
            c = c.hint(match mine {
                Some(m) => format!(
                    "this pod's own entry on {label} is index {} ({}): unset NCCL_IB_GID_INDEX and NCCL_IB_ADDR_RANGE and let nccl-wrap set them, or pass --override",
                    m.index, m.address
                ),
                None => format!("no entry of {label} holds an address of this pod: give the pod an address on this device (its macvlan, ipvlan or IPoIB rail)"),
            });
        }
        let table: Vec<Value> = rows.iter().map(|r| json!(r)).collect();
        out.push(c.ev("device", dev.name.as_str()).ev("port", p.port).ev("index", json!(index)).ev("gid_table", table));
    }
    out
}
