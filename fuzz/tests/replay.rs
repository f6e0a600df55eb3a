//! The smoke run of every fuzz target that `scripts/test.sh` (and CI) runs: each seed of
//! `fuzz/corpus/<target>/` (real files, and the inputs fuzzing found) goes through its target
//! as libFuzzer would hand it over, heap meter on, without libFuzzer or its instrumentation.
//! Real fuzzing is `scripts/fuzz.sh`.

use std::path::Path;

use kern_profile_fuzz::targets;

#[test]
fn every_seed_goes_through_its_target() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for &(name, run) in targets::ALL {
        let dir = corpus.join(name);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "{name} has no seed in {}", dir.display());
        for seed in &seeds {
            let data = std::fs::read(seed).unwrap();
            // A panic names the seed: the test harness prints this line with it.
            eprintln!("{name}: {}", seed.display());
            run(&data);
        }
        total += seeds.len();
    }
    eprintln!(
        "{total} seeds replayed through {} targets",
        targets::ALL.len()
    );
}
