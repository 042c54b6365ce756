//! The SR-IOV DRA driver's variables through `sriov_dra::scan`.
//!
//! Input: an environment in the fixtures' `env` form, one `NAME=VALUE` per line, the value raw to
//! the end of the line and not necessarily UTF-8 (the environment is bytes). A later line with the
//! same name wins, as in an environment.

#![no_main]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::dra_drivers;
use nccl_wrap::detect::sriov_dra::{self, MAX_DEVICES, PREFIX};

fn path_ok(p: &Option<String>, prefix: &str) -> bool {
    p.as_deref()
        .is_none_or(|p| p.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

fuzz_target!(|data: &[u8]| {
    let vars: BTreeMap<OsString, OsString> = data
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let eq = line.iter().position(|&b| b == b'=')?;
            Some((OsString::from_vec(line[..eq].to_vec()), OsString::from_vec(line[eq + 1..].to_vec())))
        })
        .collect();

    let s = sriov_dra::scan(&vars);
    assert!(s.devices.len() <= MAX_DEVICES);
    for d in &s.devices {
        // No address, name or path leaves the parser unchecked.
        if let Some(a) = &d.pci_address {
            assert_eq!(dra_drivers::pci_address(a).as_deref(), Some(a.as_str()), "{d:?}");
        }
        if let Some(r) = &d.rdma {
            if let Some(n) = &r.device {
                assert!(dra_drivers::name_ok(n, dra_drivers::MAX_RDMA_NAME), "{d:?}");
            }
            assert!(path_ok(&r.uverbs, "/dev/infiniband/uverbs"), "{d:?}");
            assert!(path_ok(&r.umad, "/dev/infiniband/umad"), "{d:?}");
            assert!(path_ok(&r.issm, "/dev/infiniband/issm"), "{d:?}");
            assert!(r.rdma_cm.as_deref().is_none_or(|c| c == "/dev/infiniband/rdma_cm"), "{d:?}");
        }
        assert!(path_ok(&d.vfio_device, "/dev/vfio/"), "{d:?}");
    }
    for a in &s.pci_addresses {
        assert_eq!(dra_drivers::pci_address(a).as_deref(), Some(a.as_str()));
    }
    for v in s.variables.iter().chain(&s.unknown) {
        assert!(v.starts_with(PREFIX) && vars.contains_key(&OsString::from(v)), "{v}");
    }
    for p in &s.problems {
        assert!(!p.to_string().contains(char::is_control), "{p:?}");
    }

    // The environment has no order: reading it backwards finds the same.
    let r = sriov_dra::scan(vars.iter().rev());
    assert_eq!(
        (&s.devices, &s.variables, &s.unknown, &s.pci_addresses),
        (&r.devices, &r.variables, &r.unknown, &r.pci_addresses)
    );
    assert_eq!(s.problems.len(), r.problems.len());
});
