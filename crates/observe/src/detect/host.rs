//! The node's view of its RDMA devices (`View::Node`) for the node agent: every device the host's
//! namespace shows, VFs and scalable functions left out and counted (they are pods' slices, checked
//! there). Reads only; at most [`MAX_DEVICES`] devices a round.

use std::collections::BTreeMap;

use crate::detect::devices::SourceReport;
use crate::detect::gids::GidRule;
use crate::detect::sysfs::{Attachment, Sysfs};
use crate::detect::{Detection, Device, Source};

/// More RDMA devices than a node has PFs: the bound on one round's work.
pub const MAX_DEVICES: usize = 64;

/// The node's devices, and how many of each kind were left out.
pub fn detect(sysfs: &Sysfs, rule: &dyn GidRule) -> (Detection, BTreeMap<&'static str, usize>) {
    let mut problems = Vec::new();
    let visible = sysfs.rdma_devices(&mut problems);
    let mut warnings: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let mut skipped: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut devices = Vec::new();
    for name in visible {
        let opened =
            sysfs.open_device(&name).map_err(|e| warnings.push(format!("{name} cannot be used ({e}); skipped")));
        let Ok(dir) = opened else { continue };
        let (attachment, _) = sysfs.attachment_of(&dir);
        if matches!(attachment, Attachment::Vf { .. } | Attachment::Sf { .. }) {
            *skipped.entry(attachment.kind()).or_default() += 1;
            continue;
        }
        if devices.len() == MAX_DEVICES {
            warnings.push(format!("more than {MAX_DEVICES} RDMA devices: {name} and later ones are not checked"));
            break;
        }
        let mut errs = Vec::new();
        // The node's view has no pod: no addresses to tell entries by, NCCL's own pick per port.
        let ports = sysfs.ports(&name, rule, &mut errs);
        let mut problems: Vec<String> = errs.iter().map(ToString::to_string).collect();
        problems.extend(ports.iter().flat_map(|p| p.problems.iter().cloned()));
        // Never the counters: reading a management function's floods the kernel log.
        let function = crate::detect::devices::infiniband_pf(&attachment, &ports)
            .then(|| crate::detect::function::read(sysfs, &name));
        let origin = "the node's view (every device but VFs and SFs)".into();
        devices.push(Device { name, origin, attachment, ports, problems, function, ..Device::default() });
    }
    let class = sysfs.path("class/infiniband").display().to_string();
    let found = !devices.is_empty();
    let status = if found { "used" } else { "no devices" };
    let report = SourceReport { source: Source::Sysfs, status, inputs: vec![class], problems: Vec::new() };
    // Not `every_visible`: the node agent checks every port, and hands NCCL nothing.
    let source = if found { Source::Sysfs } else { Source::None };
    let detection = Detection { source, sources: vec![report], devices, warnings, ..Detection::default() };
    (detection, skipped)
}
