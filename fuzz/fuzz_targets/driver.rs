//! A device's kernel driver and whether this build has its provider, through `verbs::driver`.
//!
//! Input lines: the name of a `device/driver` link as sysfs would give it; a `node_type` text (a
//! software device's); then the providers a build links, one per line. The name goes through the
//! same validation as in `driver::driver`, so what reaches a message is what sysfs could show.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::names;
use nccl_wrap::verbs::driver;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let (link, node_type) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    let linked: Vec<&str> = lines.take(32).collect();

    if let Some(sw) = driver::software_driver(node_type) {
        assert!(sw == "rdma_rxe" || sw == "siw", "{sw}");
        assert!(driver::provider_for(sw).is_some(), "{sw}");
    }
    let d = names::device_id(link).ok();
    match (driver::missing_provider(d, &linked), d) {
        // Unreachable (the container's fault) only when a linked provider serves the driver.
        (None, Some(n)) => {
            assert!(driver::provider_for(n).is_some_and(|p| linked.contains(&p)), "{n} {linked:?}")
        }
        (None, None) => panic!("an unreadable driver is never unreachable"),
        (Some(reason), _) => {
            if let Some(n) = d {
                assert!(!driver::provider_for(n).is_some_and(|p| linked.contains(&p)), "{n} {linked:?}");
                assert!(reason.contains(n), "{reason}");
            }
            // The driver part of the message is validated; only the providers list is the build's.
            let without_list = reason.split("the providers it has:").next().unwrap_or("");
            assert!(!without_list.chars().any(char::is_control), "{reason:?}");
        }
    }
});
