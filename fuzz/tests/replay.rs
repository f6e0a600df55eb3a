//! The smoke run of every fuzz target that `scripts/test.sh` (and CI) runs: each seed of
//! `fuzz/corpus/<target>/` (real files, and the inputs fuzzing found) goes through its target
//! as libFuzzer would hand it over, heap meter on, without libFuzzer or its instrumentation.
//! Real fuzzing is `scripts/fuzz/run.sh`.

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

/// `scripts/fuzz/corpus.sh` makes the seeds again from real runs; the inputs fuzzing found
/// (`found-*`) cannot be made again and must survive it.
#[test]
fn regenerating_the_corpus_keeps_what_fuzzing_found() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("kp-corpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (sub, name) in [("raw", "found-x"), ("raw", "i386.raw"), ("elf", "tiny.elf")] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(dir.join(sub).join(name), b"seed").unwrap();
    }
    let ok = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#". "$0"; clear_generated_seeds "$1""#)
        .arg(root.join("scripts/lib.sh"))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(
        dir.join("raw/found-x").exists(),
        "a found input was deleted"
    );
    assert!(!dir.join("raw/i386.raw").exists() && !dir.join("elf/tiny.elf").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    let script = std::fs::read_to_string(root.join("scripts/fuzz/corpus.sh")).unwrap();
    assert!(
        script.contains("clear_generated_seeds \"$corpus\"")
            && !script.contains("rm -rf \"$corpus\""),
        "scripts/fuzz/corpus.sh must clear the corpus through clear_generated_seeds"
    );
}
