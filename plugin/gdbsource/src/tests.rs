//! The client against the fake stub (`fake.rs`): framing, acknowledgements or none, run
//! lengths, bad peers and timeouts.

use std::time::{Duration, Instant};

use kern_profile_format::{Arch, Privilege, StopReason};

use crate::fake::{self, Stub};
use crate::{stacks, GdbError, Limits, StackOptions};

const BASE: u64 = 0x10000;

/// An i386 vCPU at `pc` with its stack at `sp`, frame pointer `fp`.
fn i386_regs(pc: u32, sp: u32, fp: u32) -> Vec<u8> {
    let mut g = vec![0u8; 344];
    let mut put = |i: usize, v: u32| g[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    put(4, sp);
    put(5, fp);
    put(8, pc);
    put(10, 8);
    g
}

/// A page of stack with the chain fp 0x10f10 -> 0x10f40 -> 0, returning to 0x100123 and
/// 0x100456.
fn stack_page() -> Vec<u8> {
    let mut m = vec![0u8; 0x1000];
    let mut put = |a: u64, v: u32| {
        let o = (a - BASE) as usize;
        m[o..o + 4].copy_from_slice(&v.to_le_bytes());
    };
    put(0x10f00, 0x100999);
    put(0x10f10, 0x10f40);
    put(0x10f14, 0x100123);
    put(0x10f44, 0x100456);
    m
}

fn i386_stub() -> Stub {
    Stub {
        architecture: "i386",
        regs: vec![
            i386_regs(0x100010, 0x10f00, 0x10f10),
            i386_regs(0x100020, 0x10f00, 0x10f10),
        ],
        memory: vec![(BASE, stack_page())],
        no_ack: true,
        ..Stub::default()
    }
}

fn quick() -> Limits {
    Limits {
        reply_timeout: Duration::from_millis(500),
        hello_timeout: Duration::from_millis(300),
        max_packet: 64 << 10,
    }
}

#[test]
fn every_vcpu_walked_without_acks() {
    let (addr, h) = fake::serve(i386_stub());
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    let seen = h.join().unwrap();
    assert_eq!(snap.arch, Arch::I386);
    assert!(snap.no_ack);
    assert_eq!(snap.vcpus.len(), 2);
    for (v, pc) in snap.vcpus.iter().zip([0x100010, 0x100020]) {
        assert_eq!(v.regs.pc, pc);
        assert_eq!(v.privilege, Privilege::Kernel);
        assert_eq!(&v.frames[..2], &[0x100123, 0x100456]);
        assert_eq!(v.stop.reason(), Some(StopReason::NullFramePointer));
        assert_eq!(v.sp_word, Some(0x100999));
        // One window from SP held the whole chain.
        assert_eq!(v.reads, 1, "{v:?}");
    }
    // Acknowledgements only up to QStartNoAckMode's reply.
    assert_eq!(seen.acks, 2, "{seen:?}");
    assert_eq!(seen.requests.last().unwrap(), "D;1");
    assert!(seen.requests.contains(&"Hgp1.2".to_string()));
}

#[test]
fn acknowledgements_when_the_stub_keeps_them() {
    let (addr, h) = fake::serve(Stub {
        no_ack: false,
        rle: true,
        ..i386_stub()
    });
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    let seen = h.join().unwrap();
    assert!(!snap.no_ack);
    // Every reply acknowledged (the fake leaves before the detach's).
    assert_eq!(seen.acks, seen.requests.len() - 1, "{seen:?}");
    // Run-length encoded `g` replies decode to the same registers.
    assert_eq!(snap.vcpus[1].regs.pc, 0x100020);
    assert_eq!(&snap.vcpus[1].frames[..2], &[0x100123, 0x100456]);
}

#[test]
fn small_packets_split_reads() {
    let (addr, h) = fake::serve(Stub {
        packet_size: 256,
        ..i386_stub()
    });
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    h.join().unwrap();
    assert_eq!(&snap.vcpus[0].frames[..2], &[0x100123, 0x100456]);
}

#[test]
fn refused_memory_is_reported() {
    let (addr, h) = fake::serve(Stub {
        regs: vec![i386_regs(0x100010, 0x10f00, 0x20000)],
        ..i386_stub()
    });
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    h.join().unwrap();
    let v = &snap.vcpus[0];
    assert!(v.frames.is_empty());
    assert_eq!(v.stop.reason(), Some(StopReason::Unreadable));
    assert_eq!(v.refused, Some((0x20000, "E14".to_string())));
}

#[test]
fn junk_is_not_a_gdbstub() {
    let (addr, _h) = fake::raw(b"SSH-2.0-OpenSSH_9.2\r\n", false);
    let e = stacks(&addr, quick(), StackOptions::default()).unwrap_err();
    assert!(matches!(e, GdbError::NotGdbstub { .. }), "{e}");
    assert!(e.to_string().contains("not a gdbstub"), "{e}");
    assert!(e.to_string().contains("SSH-2.0"), "{e}");
}

#[test]
fn silence_is_not_a_gdbstub_within_the_timeout() {
    let (addr, _h) = fake::raw(b"", false);
    let t = Instant::now();
    let e = stacks(&addr, quick(), StackOptions::default()).unwrap_err();
    assert!(matches!(e, GdbError::NotGdbstub { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn endless_packet_is_bounded() {
    static BIG: [u8; 200 << 10] = [b'0'; 200 << 10];
    let (addr, _h) = fake::raw(&BIG, false);
    let mut big = vec![b'$'];
    big.extend_from_slice(&BIG[1..]);
    // Starts like a packet (`$`), never ends: too large, not a hang.
    let (addr2, _h2) = fake::raw(Box::leak(big.into_boxed_slice()), false);
    let e = stacks(&addr2, quick(), StackOptions::default()).unwrap_err();
    assert!(matches!(e, GdbError::TooLarge { .. }), "{e}");
    let e = stacks(&addr, quick(), StackOptions::default()).unwrap_err();
    assert!(matches!(e, GdbError::NotGdbstub { .. }), "{e}");
}

#[test]
fn a_stub_that_goes_away_mid_look() {
    let (addr, h) = fake::serve(Stub {
        close_at: Some("Hgp1.2"),
        ..i386_stub()
    });
    let e = stacks(&addr, quick(), StackOptions::default()).unwrap_err();
    h.join().unwrap();
    assert!(matches!(e, GdbError::Closed { .. }), "{e}");
    assert!(e.to_string().contains("did QEMU exit?"), "{e}");
}

#[test]
fn no_socket_and_bad_addresses() {
    let path = fake::socket_path();
    let e = stacks(
        &format!("unix:{}", path.display()),
        quick(),
        StackOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, GdbError::Connect { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let e = stacks("nowhere", quick(), StackOptions::default()).unwrap_err();
    assert!(matches!(e, GdbError::BadAddress { .. }), "{e}");
}

#[test]
fn unknown_architecture_detaches() {
    let (addr, h) = fake::serve(Stub {
        architecture: "sparc",
        ..i386_stub()
    });
    let e = stacks(&addr, quick(), StackOptions::default()).unwrap_err();
    let seen = h.join().unwrap();
    assert!(matches!(e, GdbError::UnsupportedArch { .. }), "{e}");
    assert_eq!(seen.requests.last().unwrap(), "D;1");
}

#[test]
fn a_stop_reply_ahead_of_the_first_answer() {
    let (addr, h) = fake::serve(Stub {
        hello_stop: true,
        ..i386_stub()
    });
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    h.join().unwrap();
    assert_eq!(&snap.vcpus[0].frames[..2], &[0x100123, 0x100456]);
}

#[test]
fn sampling_looks_at_a_steady_rate_then_detaches() {
    use std::sync::atomic::AtomicBool;

    use crate::sampling::{sample, End, SampleOptions};
    let (addr, h) = fake::serve(i386_stub());
    let opts = SampleOptions {
        rate_hz: 200,
        duration: Some(Duration::from_millis(150)),
        // The rate alone: a loaded host must not make the fake's stops look costly.
        stopped_budget: 1.0,
        ..SampleOptions::default()
    };
    let mut header = None;
    let mut looks = Vec::new();
    let run = sample(
        &addr,
        quick(),
        &opts,
        &AtomicBool::new(false),
        |arch, vcpus| {
            header = Some((arch, vcpus));
            Ok(())
        },
        |ns, stacks| {
            looks.push((
                ns,
                stacks.iter().map(|v| v.frames.clone()).collect::<Vec<_>>(),
            ));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(header, Some((Arch::I386, 2)));
    assert_eq!(run.end, End::Duration);
    assert_eq!(run.looks as usize, looks.len());
    assert!(looks.len() >= 3, "{} looks", looks.len());
    // Every look: both vCPUs, the whole chain; times increasing.
    for (_, stacks) in &looks {
        assert_eq!(stacks.len(), 2);
        assert_eq!(stacks[0], [0x100123, 0x100456]);
    }
    assert!(looks.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(run.stopped_share() < 1.0);
    let seen = h.join().unwrap();
    // Each look after the first began with an interrupt and ended with a `c`; the end
    // stopped the guest and detached.
    let count = |r: &str| seen.requests.iter().filter(|x| *x == r).count();
    assert_eq!(count("c"), looks.len());
    assert_eq!(count("interrupt"), looks.len());
    assert!(
        seen.requests.last().unwrap().starts_with('D'),
        "{:?}",
        seen.requests
    );
    // A look after the first asks, in the write that stops the guest, for the vCPU the stop
    // selects (no `Hg`) and then the other, each one's registers and the stack its last walk
    // read: nothing more, as the stacks stayed put.
    let looks_after = interrupted_looks(&seen.requests);
    assert!(!looks_after.is_empty());
    for l in looks_after {
        let shape: Vec<&str> = l.iter().map(|r| &r[..1]).collect();
        assert_eq!(shape, ["g", "m", "H", "g", "m"], "{l:?}");
        assert_eq!(l[2], "Hgp1.2");
        // From a little below the lowest word read to the end of the highest.
        assert_eq!(l[1], "m10e00,158", "{l:?}");
    }
}

/// The requests of each look that began with an interrupt, up to its `c` (the last one, which
/// only detaches, left out).
fn interrupted_looks(requests: &[String]) -> Vec<&[String]> {
    requests
        .split(|r| r == "interrupt")
        .skip(1)
        .map(|l| l.split(|r| r == "c").next().unwrap())
        .filter(|l| !l.is_empty() && !l[0].starts_with('D'))
        .collect()
}

/// A stop that names another vCPU than the last one: the look asks again, selecting each, and
/// every vCPU's registers stay its own; the next looks start from the vCPU named.
#[test]
fn a_stop_naming_another_vcpu_reads_each_vcpu_its_own_registers() {
    use std::sync::atomic::AtomicBool;

    use crate::sampling::{sample, SampleOptions};
    let (addr, h) = fake::serve(Stub {
        interrupt_vcpu: 1,
        ..i386_stub()
    });
    let opts = SampleOptions {
        rate_hz: 200,
        duration: Some(Duration::from_millis(100)),
        stopped_budget: 1.0,
        ..SampleOptions::default()
    };
    let mut pcs = Vec::new();
    sample(
        &addr,
        quick(),
        &opts,
        &AtomicBool::new(false),
        |_, _| Ok(()),
        |_, stacks| {
            pcs.push(stacks.iter().map(|v| v.regs.pc).collect::<Vec<_>>());
            Ok(())
        },
    )
    .unwrap();
    assert!(pcs.len() >= 3, "{pcs:?}");
    assert!(pcs.iter().all(|p| p[..] == [0x100010, 0x100020]), "{pcs:?}");
    let seen = h.join().unwrap();
    let looks = interrupted_looks(&seen.requests);
    // The first interrupted look read vCPU 0 without `Hg`, and asked again.
    assert_eq!(
        looks[0].iter().filter(|r| *r == "g").count(),
        4,
        "{:?}",
        looks[0]
    );
    // Later ones start from vCPU 1, which the stop selects.
    for l in &looks[1..] {
        let shape: Vec<&str> = l.iter().map(|r| &r[..1]).collect();
        assert_eq!(shape, ["g", "m", "H", "g", "m"], "{l:?}");
        assert_eq!(l[2], "Hgp1.1");
    }
}

#[test]
fn a_stub_that_goes_away_ends_the_sampling_and_keeps_what_was_seen() {
    use std::sync::atomic::AtomicBool;

    use crate::sampling::{sample, End, SampleOptions};
    let stub = Stub {
        // The second look's first request.
        close_at: Some("Hgp1.2"),
        ..i386_stub()
    };
    let (addr, h) = fake::serve(stub);
    let mut looks = 0;
    let run = sample(
        &addr,
        quick(),
        &SampleOptions::default(),
        &AtomicBool::new(false),
        |_, _| Ok(()),
        |_, _| {
            looks += 1;
            Ok(())
        },
    )
    .unwrap();
    h.join().unwrap();
    assert_eq!(looks, 0, "the first look failed midway: nothing written");
    assert!(
        matches!(run.end, End::Gone(ref e) if e.contains("closed")),
        "{:?}",
        run.end
    );
}
