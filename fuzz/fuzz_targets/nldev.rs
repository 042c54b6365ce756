//! RDMA netlink answers to the device discovery (`verbs::nldev`): one datagram of the
//! `RDMA_NLDEV_CMD_GET` dump or a `RDMA_NLDEV_CMD_GET_CHARDEV` answer. Any bytes walk or are
//! refused without a panic; a device or uverbs node that leaves the parser has a name that fits
//! libibverbs' buffers and may reach a path (no `/`, no NUL, nothing but a device name's
//! characters), and a node's number decodes into the kernel's ranges.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::rtnetlink;
use nccl_wrap::verbs::nldev::{parse_device, parse_uverbs, NAME_MAX};

fuzz_target!(|data: &[u8]| {
    let _ = rtnetlink::walk(data, |_, payload| {
        check(payload);
        Ok(())
    });
    let _ = rtnetlink::answer(data).map(|p| check(&p));
    check(data);
});

fn check(payload: &[u8]) {
    if let Some(d) = parse_device(payload) {
        assert!(!d.name.is_empty() && d.name.len() < NAME_MAX);
        assert!(d.name.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b':'));
    }
    if let Some(u) = parse_uverbs(payload) {
        let digits = u.name.strip_prefix("uverbs").expect("uverbs name");
        assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && u.name.len() < NAME_MAX);
        assert!(u.major < (1 << 12) && u.minor < (1 << 20));
    }
}
