//! Writes a large synthetic raw file against a real ELF, for throughput and memory
//! measurements: `cargo run --release -p kern-profile --example synth_raw -- ELF OUT N`.
//!
//! Stacks are 4000 random call chains (depth 4 to 24) over the ELF's function symbols, each
//! sample picking one with a skewed distribution and a PC among 16 places of its leaf
//! function, on 4 vCPUs: about 48k distinct address stacks, as a busy kernel gives.

use std::io::{BufWriter, Write};

use kern_profile_format::{
    encode_sample, encode_stats, Arch, Header, SampleRecord, SamplingMode, StopReason,
};
use kern_profile_test_support::damage::xorshift;
use kern_profile_test_support::raw_file::raw_header;
use object::{Object, ObjectSymbol, SymbolKind};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 4, "usage: synth_raw ELF OUT N");
    let data = std::fs::read(&args[1])?;
    let file = object::File::parse(&*data)?;
    let arch = if file.is_64() {
        Arch::X86_64
    } else {
        Arch::I386
    };
    let mut funcs: Vec<(u64, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() >= 16)
        .map(|s| (s.address(), s.size()))
        .collect();
    funcs.sort_unstable();
    anyhow::ensure!(!funcs.is_empty(), "no function symbols in {}", args[1]);
    let n: u64 = args[3].parse()?;

    let mut rnd = xorshift(0x853c_49e6_748f_ea9b);
    let stacks: Vec<Vec<u64>> = (0..4000)
        .map(|_| {
            let depth = 4 + rnd() % 21;
            (0..depth)
                .map(|_| {
                    let (a, size) = funcs[(rnd() % funcs.len() as u64) as usize];
                    a + 1 + rnd() % (size - 1)
                })
                .collect()
        })
        .collect();

    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&args[2])?);
    let mut buf = Vec::with_capacity(1 << 20);
    Header {
        qemu_version: "synthetic".into(),
        ..raw_header(arch, SamplingMode::PeriodInstructions(100_000), 4)
    }
    .encode(&mut buf);
    let width = arch.ptr_width() as usize;
    for i in 0..n {
        // Skewed: a few stacks take most samples.
        let r = rnd();
        let idx = ((r % 4000) * (r % 4000) / 4000) as usize;
        let stack = &stacks[idx];
        let (leaf, _) = funcs[(stack[0] as usize) % funcs.len()];
        let pc = leaf + (rnd() % 16);
        encode_sample(
            &mut buf,
            width,
            &SampleRecord {
                vcpu: (i % 4) as u32,
                user: false,
                stop: StopReason::NullFramePointer.into(),
                time_ns: i * 1000,
                icount: i * 100_000,
                pc,
                sp: 0,
                sp_word: None,
                frames: &stack[1..],
                entry_resolved: true,
            },
        );
        if buf.len() > (1 << 20) - 512 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    encode_stats(&mut buf, n, 0, &[n], &[n * 25_000; 4]);
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}
