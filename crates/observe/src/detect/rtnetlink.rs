//! The one way nccl-wrap talks netlink (routing for `links` and `netif`, RDMA for `verbs::nldev`): a socket with a
//! receive deadline, one request, a receive loop bounded in bytes, and a walk that checks every length. Knows
//! nothing of links or addresses; never writes to the kernel beyond the one request.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::sys::socket::{self, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};
use nix::sys::time::TimeVal;

/// The reply is read in buffers of this size: the kernel sizes each dump datagram after the
/// receive buffer (at most 32 KiB), the first under 8 KiB, so no datagram outgrows it.
const BUF: usize = 8 * 1024;
/// At most this much of a dump is read: about 1,000 links with their attributes.
pub(crate) const MAX_BYTES: usize = 4 * 1024 * 1024;
/// How long one receive may wait for the kernel, in microseconds (under a second).
const DEADLINE_US: i64 = 500_000;

/// `struct nlmsghdr`: length, type, flags, sequence, port.
pub(crate) const NLMSG_HDR: usize = 16;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{step}: {source}")]
    Io { step: &'static str, source: nix::Error },
    #[error("{0}")]
    Reply(String),
}

/// A bound netlink socket whose receives give up after [`DEADLINE_US`].
pub(crate) struct Socket(OwnedFd);

impl Socket {
    /// Routing netlink (`NETLINK_ROUTE`).
    pub fn open() -> Result<Self, Error> {
        Self::open_protocol(SockProtocol::NetlinkRoute)
    }

    /// RDMA netlink (`NETLINK_RDMA`).
    pub(crate) fn open_rdma() -> Result<Self, Error> {
        Self::open_protocol(SockProtocol::NetlinkRDMA)
    }

    fn open_protocol(protocol: SockProtocol) -> Result<Self, Error> {
        let fd = socket::socket(AddressFamily::Netlink, SockType::Raw, SockFlag::SOCK_CLOEXEC, protocol)
            .map_err(io("socket"))?;
        socket::setsockopt(&fd, sockopt::ReceiveTimeout, &TimeVal::new(0, DEADLINE_US)).map_err(io("setsockopt"))?;
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(io("bind"))?;
        Ok(Socket(fd))
    }

    /// Sends a dump request of type `ty` and hands each message of the reply to `each` (its type and
    /// payload) until the dump's end.
    pub(crate) fn dump(
        &self,
        ty: u16,
        body: &[u8],
        each: impl FnMut(u16, &[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        socket::send(self.0.as_raw_fd(), &request(ty, NLM_F_REQUEST | NLM_F_DUMP, body), MsgFlags::empty())
            .map_err(io("send"))?;
        receive(|buf| socket::recv(self.0.as_raw_fd(), buf, MsgFlags::empty()).map_err(io("recv")), each)
    }

    /// Sends one request of type `ty` that is not a dump and returns its answer's payload.
    pub(crate) fn ask(&self, ty: u16, body: &[u8]) -> Result<Vec<u8>, Error> {
        socket::send(self.0.as_raw_fd(), &request(ty, NLM_F_REQUEST, body), MsgFlags::empty()).map_err(io("send"))?;
        let mut buf = vec![0u8; BUF];
        let n = socket::recv(self.0.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(io("recv"))?.min(BUF);
        answer(&buf[..n])
    }
}

/// The payload of the first message of a datagram that answers one request.
pub fn answer(datagram: &[u8]) -> Result<Vec<u8>, Error> {
    let mut first = None;
    walk(datagram, |_, payload| {
        first.get_or_insert_with(|| payload.to_vec());
        Ok(())
    })?;
    first.ok_or_else(|| Error::Reply(format!("no answer in {} bytes", datagram.len())))
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

fn io(step: &'static str) -> impl Fn(nix::Error) -> Error {
    move |source| Error::Io { step, source }
}

fn request(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(NLMSG_HDR + body.len()).unwrap_or(0).to_ne_bytes();
    // Sequence 1 (the only request on this socket), to port 0 (the kernel).
    [&len[..], &ty.to_ne_bytes(), &flags.to_ne_bytes(), &1u32.to_ne_bytes(), &0u32.to_ne_bytes(), body].concat()
}

/// The receive loop: datagrams from `recv` walked until the dump's end, at most [`MAX_BYTES`].
pub(crate) fn receive(
    mut recv: impl FnMut(&mut [u8]) -> Result<usize, Error>,
    mut each: impl FnMut(u16, &[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut buf = vec![0u8; BUF];
    let mut total = 0;
    loop {
        let n = recv(&mut buf)?.min(buf.len());
        total += n;
        if n == 0 || total > MAX_BYTES {
            return Err(Error::Reply(format!("no end of dump after {total} bytes")));
        }
        if walk(&buf[..n], &mut each)? {
            return Ok(());
        }
    }
}

/// Walks one datagram's messages, handing each to `each`; `Ok(true)` at `NLMSG_DONE`, an error for
/// `NLMSG_ERROR` or a length that does not fit.
pub fn walk(mut buf: &[u8], mut each: impl FnMut(u16, &[u8]) -> Result<(), Error>) -> Result<bool, Error> {
    while buf.len() >= NLMSG_HDR {
        let len = u32_at(buf, 0) as usize;
        if len < NLMSG_HDR || len > buf.len() {
            return Err(Error::Reply(format!("message length {len} with {} bytes left", buf.len())));
        }
        let (msg, rest) = buf.split_at(len);
        match u16_at(msg, 4) {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = i32::from_ne_bytes(u32_at(msg, NLMSG_HDR).to_ne_bytes());
                return Err(Error::Reply(format!("kernel answered error {}", errno.unsigned_abs())));
            }
            ty => each(ty, &msg[NLMSG_HDR..])?,
        }
        // Messages are padded to 4 bytes; the last one may end the datagram unpadded.
        buf = rest.get(align(len) - len..).unwrap_or(&[]);
    }
    Ok(false)
}

/// Route attributes (`struct rtattr`), ending at the first whose length does not fit (left unread).
pub(crate) struct Attrs<'a>(pub(crate) &'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16_at(b, 0));
        if len < 4 || len > b.len() {
            return None;
        }
        // The top bits of the type are flags (NLA_F_NESTED, NLA_F_NET_BYTEORDER).
        let ty = u16_at(b, 2) & 0x3fff;
        let val = &b[4..len];
        self.0 = b.get(align(len)..).unwrap_or(&[]);
        Some((ty, val))
    }
}

/// The attributes of `b`, once each is checked to fit (a truncated one means a malformed message).
pub(crate) fn attrs(b: &[u8]) -> Result<Attrs<'_>, Error> {
    let mut walked = Attrs(b);
    while walked.next().is_some() {}
    match walked.0 {
        [] => Ok(Attrs(b)),
        rest => Err(Error::Reply(format!("attribute length {} with {} bytes left", u16_at(rest, 0), rest.len()))),
    }
}

/// Netlink's 4-byte alignment of messages and attributes.
pub(crate) fn align(n: usize) -> usize {
    (n + 3) & !3
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |x| u16::from_ne_bytes([x[0], x[1]]))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, body: &[u8]) -> Vec<u8> {
        request(ty, 0, body)
    }

    #[test]
    fn a_request_is_a_header_then_its_body() {
        let r = request(22, NLM_F_REQUEST | NLM_F_DUMP, &[2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.len(), 24);
        assert_eq!(u32_at(&r, 0), 24);
        assert_eq!(u16_at(&r, 4), 22);
        assert_eq!(u16_at(&r, 6), NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(r[16], 2);
    }

    #[test]
    fn walk_hands_over_each_message_then_stops_at_the_end() {
        let mut buf = msg(20, &[1, 2, 3]);
        buf.push(0); // padding to 4
        buf.extend(msg(20, &[4; 4]));
        let mut seen = Vec::new();
        assert!(!walk(&buf, |ty, p| {
            seen.push((ty, p.to_vec()));
            Ok(())
        })
        .expect("walk"));
        assert_eq!(seen, vec![(20, vec![1, 2, 3]), (20, vec![4; 4])]);
        buf.extend(msg(NLMSG_DONE, &[0; 4]));
        buf.extend(msg(20, &[9; 4])); // after the end: never seen
        seen.clear();
        assert!(walk(&buf, |ty, p| {
            seen.push((ty, p.to_vec()));
            Ok(())
        })
        .expect("walk"));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn the_receive_loop_ends_at_the_byte_bound_or_an_empty_read_without_an_end() {
        // A kernel that never says NLMSG_DONE: full datagrams of harmless messages, forever.
        let mut calls = 0;
        let endless = |buf: &mut [u8]| {
            calls += 1;
            let one = msg(20, &[0; 4]);
            for chunk in buf.chunks_exact_mut(one.len()) {
                chunk.copy_from_slice(&one);
            }
            Ok(buf.len() - buf.len() % one.len())
        };
        let e = receive(endless, |_, _| Ok(())).expect_err("unbounded");
        assert!(e.to_string().starts_with("no end of dump after"), "{e}");
        assert!(calls <= MAX_BYTES / (BUF - BUF % 20) + 1, "{calls}");
        assert!(receive(|_| Ok(0), |_, _| Ok(())).is_err());
        // A receive that times out is the receive's error.
        let e = receive(|_| Err(io("recv")(nix::Error::EAGAIN)), |_, _| Ok(())).expect_err("deadline");
        assert!(e.to_string().starts_with("recv:"), "{e}");
    }

    #[test]
    fn hostile_messages_and_attributes_end_cleanly() {
        let ok = |_: u16, _: &[u8]| Ok(());
        assert!(walk(&[0xff, 0xff, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], ok).is_err());
        assert!(walk(&[0; 16], ok).is_err());
        let e = walk(&msg(NLMSG_ERROR, &(-1i32).to_ne_bytes()), ok).expect_err("error");
        assert_eq!(e.to_string(), "kernel answered error 1");
        assert!(walk(&msg(NLMSG_ERROR, &i32::MIN.to_ne_bytes()), ok).is_err());
        assert!(walk(&msg(NLMSG_ERROR, &[]), ok).is_err());
        // Attributes: a zero length, one past the buffer, a short header.
        assert_eq!(Attrs(&[0, 0, 1, 0, 5, 5, 5, 5]).count(), 0);
        assert_eq!(Attrs(&[8, 0, 1, 0, 5, 5, 5, 5, 9, 0, 1, 0, 1]).count(), 1);
        assert_eq!(Attrs(&[4, 0]).count(), 0);
        assert_eq!(Attrs(&[5, 0, 0x01, 0x80, 7]).next(), Some((1, &[7u8][..])));
        // Checked: the same cases are errors; a last attribute may end unpadded.
        assert!(attrs(&[0, 0, 1, 0, 5, 5, 5, 5]).is_err());
        assert!(attrs(&[8, 0, 1, 0, 5, 5, 5, 5, 9, 0, 1, 0, 1]).is_err());
        assert!(attrs(&[4, 0]).is_err());
        assert_eq!(attrs(&[5, 0, 1, 0, 7]).expect("unpadded").count(), 1);
        assert_eq!(attrs(&[]).expect("none").count(), 0);
    }

    /// The socket opens and answers a dump here (this namespace's addresses).
    #[test]
    fn this_namespace_answers_a_dump() {
        let s = Socket::open().expect("socket");
        let mut n = 0;
        s.dump(22, &[0; 8], |_, _| {
            n += 1;
            Ok(())
        })
        .expect("dump");
        assert!(n > 0);
    }
}
