//! The SR-IOV device plugin's variables through `detect::sriov::scan`.
//!
//! Input: an environment in the fixtures' `env` form, one `NAME=VALUE` per line, the value raw to
//! the end of the line and not necessarily UTF-8 (the environment is bytes). A later line with the
//! same name wins, as in an environment.

#![no_main]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::{names, sriov};

/// Devices (variable, ID, RDMA device), variables and the number of problems, in a fixed order.
type Summary = (Vec<(String, String, Option<String>)>, Vec<String>, usize);

fn summary(s: &sriov::Scan) -> Summary {
    let mut devices: Vec<_> =
        s.devices.iter().map(|d| (d.variable.clone(), d.device_id.clone(), d.rdma_dev.clone())).collect();
    devices.sort();
    let mut variables = s.variables.clone();
    variables.sort();
    (devices, variables, s.problems.len())
}

fuzz_target!(|data: &[u8]| {
    let vars: BTreeMap<OsString, OsString> = data
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let eq = line.iter().position(|&b| b == b'=')?;
            Some((OsString::from_vec(line[..eq].to_vec()), OsString::from_vec(line[eq + 1..].to_vec())))
        })
        .collect();

    let scan = sriov::scan(&vars);
    for d in &scan.devices {
        // No name leaves the parser unvalidated.
        assert_eq!(names::device_id(&d.device_id), Ok(d.device_id.as_str()), "{d:?}");
        if let Some(dev) = &d.rdma_dev {
            assert_eq!(names::device_name(dev), Ok(dev.as_str()), "{d:?}");
        }
        assert!(d.variable.starts_with("PCIDEVICE_") && scan.variables.contains(&d.variable), "{d:?}");
        // A plain list is read only where its _INFO twin was unusable.
        if !d.variable.ends_with("_INFO") {
            assert!(!scan.variables.contains(&format!("{}_INFO", d.variable)), "{d:?} though its _INFO was read");
        }
    }
    for v in &scan.variables {
        assert!(vars.contains_key(&OsString::from(v)), "{v} is not an input variable");
    }
    // Every device comes from some input byte: the result is bounded by the input.
    assert!(scan.devices.len() <= data.len());
    for p in &scan.problems {
        let _ = p.to_string();
    }

    // The environment has no order: reading it backwards finds the same.
    let reversed = sriov::scan(vars.iter().rev());
    assert_eq!(summary(&scan), summary(&reversed));
});
