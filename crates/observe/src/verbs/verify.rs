//! Checks what sysfs says of the pod's ports through ibverbs (and, asked, moves bytes): sysfs can
//! call a port ACTIVE that this container cannot open or register memory on. Works through the
//! `Verbs` trait only; records facts on the ports, and the plan decides.

use crate::detect::port::{PortFacts, SelftestResult, VerbsCheck};
use crate::detect::sysfs::Sysfs;
use crate::detect::Detection;
use crate::verbs::driver;
use crate::verbs::probe::{NoVerbs, SelftestOptions, Verbs, VerbsError};

/// Queries every port sysfs reads as ACTIVE, each device once (`is_listed`) and only with a port to
/// check. `sysfs` tells, for a device libibverbs does not list, a missing provider (not checked)
/// from an unreachable device (unusable).
pub fn probe(detection: &mut Detection, verbs: &dyn Verbs, sysfs: &Sysfs) {
    for dev in &mut detection.devices {
        let mut listed = None;
        for port in dev.ports.iter_mut().filter(|p| p.state_name() == Some("ACTIVE")) {
            let listed = listed.get_or_insert_with(|| verbs.is_listed(&dev.name));
            port.verbs = Some(check(verbs, listed, sysfs, &dev.name, port));
        }
    }
}

fn check(
    verbs: &dyn Verbs,
    listed: &Result<bool, VerbsError>,
    sysfs: &Sysfs,
    dev: &str,
    port: &PortFacts,
) -> VerbsCheck {
    match listed {
        Err(VerbsError::Unavailable(reason)) => return VerbsCheck::NotChecked { reason: reason.clone() },
        Err(e) => return VerbsCheck::Unusable { error: e.to_string() },
        Ok(false) => {
            let linked = verbs.providers();
            return match linked.and_then(|l| driver::missing_provider(driver::driver(sysfs, dev).as_deref(), l)) {
                Some(reason) => VerbsCheck::NotChecked { reason },
                None => VerbsCheck::Unusable { error: VerbsError::NotListed(dev.to_string()).to_string() },
            };
        }
        Ok(_) => {}
    }
    let Ok(num) = u8::try_from(port.port) else {
        return VerbsCheck::Unusable { error: format!("port number {} is out of range", port.port) };
    };
    match verbs.query_port(dev, num, port.gid.as_ref().map(|g| g.index)) {
        Ok(v) => VerbsCheck::Port(v),
        Err(VerbsError::Unavailable(reason)) => VerbsCheck::NotChecked { reason },
        Err(e) => VerbsCheck::Unusable { error: e.to_string() },
    }
}

/// Runs the loopback self-test on every port that is usable so far (`usable` decides).
pub fn selftest(
    detection: &mut Detection,
    verbs: &dyn Verbs,
    opts: &SelftestOptions,
    usable: impl Fn(&PortFacts) -> bool,
) {
    for dev in &mut detection.devices {
        for port in dev.ports.iter_mut().filter(|p| usable(p)) {
            let Ok(num) = u8::try_from(port.port) else { continue };
            // A port ibverbs could not be asked about cannot be tested either: say why.
            if let Some(VerbsCheck::NotChecked { reason }) = &port.verbs {
                port.selftest = Some(NoVerbs { reason: reason.clone() }.selftest(&dev.name, num, None, opts));
                continue;
            }
            let gid = port.gid.as_ref().map(|g| g.index);
            port.selftest = Some(verbs.selftest(&dev.name, num, gid, opts));
        }
    }
}

/// One line for people about a failed self-test.
pub fn describe_failure(dev: &str, port: u32, r: &SelftestResult) -> String {
    let (step, status) = (r.step.as_deref().unwrap_or("?"), r.status.as_deref().unwrap_or("no status"));
    let hint = r.hint.as_ref().map(|h| format!(": {h}")).unwrap_or_default();
    format!("{dev}:{port}: loopback self-test failed at {step} ({status}){hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::port::{GidPick, VerbsPort};
    use crate::verbs::driver::tree::Tree;

    /// A fake verbs layer: lists `listed`, reports `state` for every port, fails self-tests when
    /// `selftest_fails`.
    struct Fake {
        listed: Result<Vec<String>, VerbsError>,
        state: &'static str,
        selftest_fails: bool,
        /// What `providers` answers (`None`: not known, as for fakes elsewhere).
        providers: Option<&'static [&'static str]>,
    }

    impl Fake {
        fn new(listed: Result<Vec<String>, VerbsError>, state: &'static str, selftest_fails: bool) -> Fake {
            Fake { listed, state, selftest_fails, providers: None }
        }
    }

    impl Verbs for Fake {
        fn device_names(&self) -> Result<Vec<String>, VerbsError> {
            self.listed.clone()
        }
        fn query_port(&self, _: &str, _: u8, gid: Option<u32>) -> Result<VerbsPort, VerbsError> {
            Ok(VerbsPort {
                state: self.state.into(),
                link_layer: "Ethernet".into(),
                gid_tbl_len: 16,
                gid: gid.map(|_| "0000:0000:0000:0000:0000:ffff:0a00:0001".into()),
            })
        }
        fn providers(&self) -> Option<&[&'static str]> {
            self.providers
        }
        fn selftest(&self, _: &str, _: u8, _: Option<u32>, _: &SelftestOptions) -> SelftestResult {
            SelftestResult {
                passed: !self.selftest_fails,
                step: self.selftest_fails.then(|| "reg_mr".into()),
                status: self.selftest_fails.then(|| "ENOMEM".into()),
                hint: None,
                micros: 5,
            }
        }
    }

    fn port(state: &str) -> PortFacts {
        PortFacts {
            port: 1,
            state: Some(format!("4: {state}")),
            phys_state: Some("5: LinkUp".into()),
            link_layer: Some("Ethernet".into()),
            rate: None,
            gid: Some(GidPick {
                index: 1,
                gid: "0000:0000:0000:0000:0000:ffff:0a00:0001".into(),
                address: "10.0.0.1".into(),
                roce: None,
                ndev: None,
                full_match: true,
                owner: None,
            }),
            nccl_pick: None,
            table: Vec::new(),
            table_len: 0,
            pkey: None,
            verbs: None,
            selftest: None,
            problems: Vec::new(),
        }
    }

    /// A sysfs root with nothing in it: no driver can be read there.
    fn nowhere() -> Sysfs {
        Sysfs::new("/nonexistent/nccl-wrap-sysfs")
    }

    #[test]
    fn unlisted_device_is_unusable_and_names_uverbs() {
        let f = Fake::new(Ok(vec!["rxe1".into()]), "ACTIVE", false);
        let c = check(&f, &f.is_listed("rxe0"), &nowhere(), "rxe0", &port("ACTIVE"));
        assert!(matches!(&c, VerbsCheck::Unusable { error } if error.contains("uverbsN")), "{c:?}");
    }

    #[test]
    fn skipped_verbs_are_not_checked_rather_than_unusable() {
        let f = crate::verbs::probe::NoVerbs { reason: "--skip-verbs".into() };
        let c = check(&f, &f.is_listed("rxe0"), &nowhere(), "rxe0", &port("ACTIVE"));
        assert_eq!(c, VerbsCheck::NotChecked { reason: "--skip-verbs".into() });
    }

    #[test]
    fn failed_device_list_makes_ports_unusable_with_the_errno() {
        let f = Fake::new(Err(VerbsError::DeviceList { errno: "ENOSYS".into() }), "ACTIVE", false);
        let c = check(&f, &f.is_listed("rxe0"), &nowhere(), "rxe0", &port("ACTIVE"));
        assert!(matches!(&c, VerbsCheck::Unusable { error } if error.contains("ENOSYS")), "{c:?}");
    }

    #[test]
    fn listed_device_reports_what_verbs_says() {
        let f = Fake::new(Ok(vec!["rxe0".into()]), "DOWN", false);
        match check(&f, &f.is_listed("rxe0"), &nowhere(), "rxe0", &port("ACTIVE")) {
            VerbsCheck::Port(v) => assert_eq!(v.state, "DOWN"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unlisted_device_without_a_linked_provider_is_not_checked_rather_than_unusable() {
        let t = Tree::new("verify-noprov");
        t.hw("mlx4_0", "0000:02:00.0", "pci", "mlx4_core").hw("mlx5_0", "0000:19:00.0", "pci", "mlx5_core");
        let mut f = Fake::new(Ok(vec!["rxe0".into()]), "ACTIVE", false);
        f.providers = Some(&["mlx5", "rxe"]);
        let c = check(&f, &f.is_listed("mlx4_0"), &t.sysfs(), "mlx4_0", &port("ACTIVE"));
        assert_eq!(
            c,
            VerbsCheck::NotChecked {
                reason: "this build links no verbs provider for driver mlx4_core (rdma-core's mlx4; the providers it has: mlx5, rxe)".into()
            }
        );
        // A device whose provider is linked but that is not listed cannot be reached: unusable.
        let c = check(&f, &f.is_listed("mlx5_0"), &t.sysfs(), "mlx5_0", &port("ACTIVE"));
        assert!(matches!(&c, VerbsCheck::Unusable { error } if error.contains("uverbsN")), "{c:?}");
        // Whose driver cannot be read: not known, so not called unusable either.
        let c = check(&f, &f.is_listed("mlx5_9"), &t.sysfs(), "mlx5_9", &port("ACTIVE"));
        assert!(matches!(&c, VerbsCheck::NotChecked { reason } if reason.contains("cannot be read")), "{c:?}");
    }

    #[test]
    fn a_port_that_could_not_be_checked_is_not_self_tested() {
        let t = Tree::new("verify-selftest");
        t.hw("mlx4_0", "0000:02:00.0", "pci", "mlx4_core");
        let mut f = Fake::new(Ok(vec![]), "ACTIVE", false);
        f.providers = Some(&["mlx5"]);
        let mut d = Detection {
            source: crate::detect::Source::Sysfs,
            sources: Vec::new(),
            devices: vec![crate::detect::Device {
                name: "mlx4_0".into(),
                origin: "test".into(),
                attachment: crate::detect::sysfs::Attachment::Unknown,
                ports: vec![port("ACTIVE")],
                problems: Vec::new(),
                named_as: None,
                driver: None,
                function: None,
            }],
            not_ours: Vec::new(),
            not_openable: Vec::new(),
            warnings: Vec::new(),
            addresses: Vec::new(),
            every_visible: false,
        };
        probe(&mut d, &f, &t.sysfs());
        selftest(&mut d, &f, &SelftestOptions { buffer_bytes: 1, timeout_ms: 1 }, |_| true);
        let r = d.devices[0].ports[0].selftest.clone().expect("a result");
        assert!(!r.passed, "{r:?}");
        assert!(r.status.as_deref().is_some_and(|s| s.contains("no verbs provider for driver mlx4_core")), "{r:?}");
    }

    #[test]
    fn failure_line_names_step_and_status() {
        let f = Fake::new(Ok(vec![]), "ACTIVE", true);
        let r = f.selftest("rxe0", 1, Some(1), &SelftestOptions { buffer_bytes: 1, timeout_ms: 1 });
        assert_eq!(describe_failure("rxe0", 1, &r), "rxe0:1: loopback self-test failed at reg_mr (ENOMEM)");
    }
}
