//! Cancelling a receive only while no message has matched it
//! (`RecvHandle::cancel_unmatched`, MPI's `MPI_Cancel`): an unmatched
//! receive is withdrawn, nothing lands in its buffer and the next message
//! goes to the next receive whole; a receive that a message already matched
//! (a small one that arrived, or a large one whose pull is under way) is
//! not cancelled, and completes with the message while its sender's send
//! completes normally. Over shared memory (both copy modes) and UDP.

mod common;

use common::{pattern, run_job};

#[test]
fn only_an_unmatched_receive_is_cancelled() {
    for (name, config) in common::transports() {
        eprintln!("transport {name}");
        run_job(2, config, |ep| {
            let big = pattern(7, 2 << 20);
            if ep.rank() == 0 {
                // Nothing sent yet: the receive is withdrawn.
                let mut buf = [0xEEu8; 64];
                let mut handle = ep.irecv(1, 5, &mut buf).unwrap();
                assert!(handle.cancel_unmatched(), "an unmatched receive is cancelled");
                assert!(!handle.cancel_unmatched(), "a second cancel does nothing");
                drop(handle);
                assert_eq!(buf, [0xEE; 64], "nothing landed");
                ep.barrier().unwrap(); // 1: rank 1 sends tag 5, small, and tag 6, large
                ep.barrier().unwrap(); // 2: both are sent
                let mut small = [0u8; 64];
                let got = ep.recv(1, 5, &mut small).unwrap();
                assert_eq!(&small[..got.len], b"after the cancel", "the next receive gets it whole");
                // Matched at posting: the large message's announcement is here.
                assert_eq!(ep.probe(1, 6).unwrap().len, big.len());
                let mut large = vec![0u8; big.len()];
                let mut handle = ep.irecv(1, 6, &mut large).unwrap();
                assert!(!handle.cancel_unmatched(), "a matched receive is not cancelled");
                let got = handle.wait().unwrap();
                assert_eq!(got.len, big.len());
                assert!(large == big, "the matched message arrives intact");
                // A small message that matched: not cancelled either.
                ep.barrier().unwrap(); // 3: rank 1 sends tag 7
                let probed = ep.probe(1, 7).unwrap();
                let mut buf = [0u8; 16];
                let mut handle = ep.irecv(1, 7, &mut buf).unwrap();
                assert!(!handle.cancel_unmatched());
                assert_eq!(handle.wait().unwrap().len, probed.len);
                assert_eq!(&buf[..probed.len], b"small");
            } else {
                ep.barrier().unwrap(); // 1
                ep.send(0, 5, b"after the cancel").unwrap();
                let send = ep.isend(0, 6, &big).unwrap();
                ep.barrier().unwrap(); // 2
                send.wait().expect("the sender of a message whose receive was not cancelled completes");
                ep.barrier().unwrap(); // 3
                ep.send(0, 7, b"small").unwrap();
            }
            ep.barrier().unwrap();
        });
    }
}
