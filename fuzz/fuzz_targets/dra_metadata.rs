//! One KEP-5304 device metadata file through `dra_metadata::parse`.
//!
//! Input: the file's bytes, as read from the mount (any bytes: the parser checks UTF-8 itself).
//! Besides not panicking: everything that leaves the parser passed its check, the size bound is
//! the caller's, and an unknown newer version put in front changes nothing but `skipped`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::dra_drivers;
use nccl_wrap::detect::dra_metadata::{self, MetadataError, DEFAULT_MAX_BYTES, KNOWN_VERSIONS, MAX_ADDRESSES};

const NEWER: &str = "{\"kind\":\"DeviceMetadata\",\"apiVersion\":\"metadata.resource.k8s.io/v999\"}\n";

fuzz_target!(|data: &[u8]| {
    let first = dra_metadata::parse(data, DEFAULT_MAX_BYTES);
    assert_eq!(
        format!("{first:?}"),
        format!("{:?}", dra_metadata::parse(data, DEFAULT_MAX_BYTES)),
        "not deterministic"
    );
    match &first {
        Ok(m) => {
            assert!(KNOWN_VERSIONS.contains(&m.api_version));
            assert!(m.devices.len() <= data.len());
            for d in &m.devices {
                if let Some(a) = &d.pci_address {
                    assert_eq!(dra_drivers::pci_address(a).as_deref(), Some(a.as_str()), "{d:?}");
                    assert!(d.pci_address_from.is_some(), "{d:?}");
                }
                if let Some(h) = &d.rdma_device_hint {
                    assert!(dra_drivers::name_ok(h, dra_drivers::MAX_RDMA_NAME), "{d:?}");
                }
                if let Some(n) = &d.network {
                    assert!(n.addresses.len() <= MAX_ADDRESSES);
                    if let Some(i) = &n.interface_name {
                        assert!(dra_drivers::name_ok(i, dra_drivers::MAX_IFNAME), "{d:?}");
                    }
                }
                assert_eq!(d.nic_driver, dra_drivers::driver(&d.driver).is_some());
            }
            for p in &m.problems {
                assert!(!p.to_string().contains(char::is_control), "{p:?}");
            }
            for s in &m.skipped {
                assert!(!s.contains(char::is_control) && s.chars().count() <= 100, "{s:?}");
            }
        }
        Err(e) => assert!(!e.to_string().contains(char::is_control), "{e:?}"),
    }

    // The bound is the caller's: one byte less than the input refuses it, before anything else.
    if !data.is_empty() {
        assert!(matches!(dra_metadata::parse(data, data.len() - 1), Err(MetadataError::TooLarge { .. })));
    }

    // An unknown newer version in front is skipped: the same devices, one more skipped version.
    if data.len() + NEWER.len() <= DEFAULT_MAX_BYTES {
        let mut led = NEWER.as_bytes().to_vec();
        led.extend_from_slice(data);
        match (&first, dra_metadata::parse(&led, DEFAULT_MAX_BYTES)) {
            (Ok(m), Ok(mut n)) => {
                assert_eq!(n.skipped.remove(0), "metadata.resource.k8s.io/v999");
                assert_eq!(m, &n);
            }
            (Err(MetadataError::Empty), Err(MetadataError::NoKnownVersion { unknown })) => assert_eq!(unknown.len(), 1),
            // The input's own errors stay errors (their object numbers move by one).
            (Err(_), Err(_)) => {}
            (a, b) => panic!("{a:?} became {b:?} with an unknown version in front"),
        }
    }
});
