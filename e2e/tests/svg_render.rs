//! The flamegraph a user opens: `cpu.svg` renders in a real browser (Debian's Chromium,
//! headless) and its built-in search finds the hot leaf with its documented share.

use std::process::Command;

use kern_profile_e2e::*;

/// Loads `url` in headless Chromium, lets its scripts run, and returns the DOM.
fn chromium_dom(url: &str, profile_dir: &std::path::Path) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg(url)
        .output()
        .expect("chromium not found: scripts/setup.sh --with-chromium installs it");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn flamegraph_renders_and_its_search_finds_the_hot_leaf() {
    if skip_i386() || skip_unless(&[Need::Program("chromium")]) {
        return;
    }
    let run = boot("svg", "period=10000", "");
    let svg = run.dir.join("cpu.svg");
    let k = kernel();
    kern_profile(&[
        run.raw.to_str().unwrap(),
        k.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    let hot = hottest();
    let short = hot.rsplit("::").next().unwrap();
    // inferno's flamegraph searches for the `s` URL parameter once loaded, as a user's
    // Ctrl-F would, and prints the matched share.
    let dom = chromium_dom(
        &format!("file://{}?s={short}", svg.display()),
        &run.dir.join("chromium"),
    );
    assert!(dom.contains("<svg"), "no SVG document rendered");
    assert!(dom.contains("kernel.elf"), "the title names the kernel");
    assert!(dom.contains(&hot), "no frame for {hot}");
    // The script holds the words too: read the element it fills in.
    let matched = dom
        .split("id=\"matched\"")
        .nth(1)
        .and_then(|t| t.split("Matched: ").nth(1))
        .and_then(|t| t.split('%').next())
        .and_then(|p| p.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("the search matched nothing"));
    let doc = expected_functions()
        .into_iter()
        .find(|f| f.symbol == hot)
        .unwrap();
    assert!(
        (matched / 100.0 - doc.self_share_inline).abs() < 0.02,
        "search for {short}: {matched}% matched, {:.1}% documented",
        doc.self_share_inline * 100.0
    );
}
