#!/usr/bin/env bash
# Installs what kern-profile needs on a fresh Debian 12 (bookworm) machine, and
# nothing that is already there:
#   - QEMU >= min_version of qemu-version.txt, from bookworm-backports;
#   - the guest-kernel toolchain: Debian's rustc-web plus its i686 `core`;
#   - chromium, only with --with-chromium (the SVG rendering test);
#   - the riscv64 and aarch64 guests' QEMU, library sources and binutils (scripts/setup/virt.sh);
#   - the Linux guest (Debian's kernels and busybox, scripts/setup/linux.sh), only with
#     --with-linux;
#   - Debian sid's QEMU 11.1 (plugin API 7) in a debootstrap root beside the system's, for a
#     second pass of the tests (scripts/setup/qemu-sid.sh), only with --with-qemu-sid;
#   - Debian 12's own QEMU 7.2 unpacked beside the system's, for a pass of the gdbstub tests
#     on a QEMU too old for the plugin (scripts/setup/qemu-7.2.sh), only with --with-qemu-7.2.
# Idempotent: a second run checks and installs nothing.
. "$(dirname "$0")/lib.sh"
. "$KP_ROOT/scripts/setup/lib.sh"

with_chromium=0
with_linux=0
with_qemu_sid=0
with_qemu_72=0
for a in "$@"; do
    case "$a" in
        --with-chromium) with_chromium=1 ;;
        --with-linux) with_linux=1 ;;
        --with-qemu-sid) with_qemu_sid=1 ;;
        --with-qemu-7.2) with_qemu_72=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$a' (see --help)" ;;
    esac
done

install_qemu() {
    local min have
    min="$(qv min_version)"
    have="$(qemu_version qemu-system-i386)"
    if [ -n "$have" ] && version_ge "$have" "$min" && command -v qemu-system-x86_64 >/dev/null; then
        say "QEMU $have already installed (>= $min)"
        return
    fi
    need_debian12 "$by_hand"
    say "installing QEMU >= $min from bookworm-backports (found: ${have:-none})"
    add_backports
    apt_update
    apt_install -t bookworm-backports qemu-system-x86
    have="$(qemu_version qemu-system-i386)"
    [ -n "$have" ] && version_ge "$have" "$min" || die "QEMU install gave '${have:-nothing}', need >= $min"
    say "QEMU $have installed"
}

install_guest_toolchain() {
    if [ -x "$GUEST_RUSTC" ] && ls "$GUEST_RUSTLIB_I686"/libcore-*.rlib >/dev/null 2>&1 \
        && command -v ld >/dev/null; then
        say "guest toolchain already installed ($("$GUEST_RUSTC" --version))"
        return
    fi
    need_debian12 "$by_hand"
    enable_arch i386  # for its Rust core
    apt_update
    # rustc-web and its i686 std must be the very same version. Take the newest
    # version offered for both amd64 and i386, install the amd64 compiler, then
    # fetch the i386 std by hand (installing it through apt fails on multiarch
    # Breaks).
    local ver tmp
    local both want
    both="$( (apt-cache madison libstd-rust-web-dev; apt-cache madison libstd-rust-web-dev:i386) |
        awk -F' [|] ' '$3 ~ / amd64 / { a[$2] = 1 } $3 ~ / i386 / { i[$2] = 1 }
                      END { for (v in a) if (v in i) print v }' | sort -V)"
    want="$(sed -n 's/^rustc_web=//p' "$KP_ROOT/examples/kernel/rustc-version.txt")"
    if grep -qxF "$want" <<<"$both"; then
        ver="$want"
    else
        ver="$(tail -n1 <<<"$both")"
        [ -n "$ver" ] || die "apt offers no libstd-rust-web-dev version for both amd64 and i386"
        say "warning: rustc-web $want (examples/kernel/rustc-version.txt) is not offered; using $ver: the example kernel's exact instruction counts may differ"
    fi
    say "installing Debian's rustc-web $ver and binutils"
    apt_install --allow-downgrades "rustc-web=$ver" "libstd-rust-web-dev=$ver" binutils
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    say "fetching libstd-rust-web-dev:i386=$ver for the i686 core"
    (cd "$tmp" && apt-get download -qq "libstd-rust-web-dev:i386=$ver")
    dpkg-deb -x "$tmp"/libstd-rust-web-dev_*_i386.deb "$tmp/x"
    $SUDO mkdir -p /usr/lib/rustlib
    $SUDO cp -r "$tmp/x/usr/lib/rustlib/i686-unknown-linux-gnu" /usr/lib/rustlib/
    ls "$GUEST_RUSTLIB_I686"/libcore-*.rlib >/dev/null 2>&1 || die "no i686 core after install"
    say "guest toolchain installed ($("$GUEST_RUSTC" --version))"
}

install_chromium() {
    if command -v chromium >/dev/null; then
        say "chromium already installed"
        return
    fi
    need_debian12 "$by_hand"
    apt_update
    say "installing chromium (SVG rendering test)"
    apt_install chromium
}

# scripts/guests/freepascal_cfi.py rewrites a test kernel's call-frame tables (e2e malformed_cfi).
install_python3() {
    command -v python3 >/dev/null && return
    need_debian12 "$by_hand"
    apt_update
    say "installing python3 (test-kernel build scripts)"
    apt_install python3
}

by_hand="Install QEMU >= $(qv min_version) with plugin support and a rustc with an i686 core by hand."
command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
install_qemu
install_guest_toolchain
install_python3
bash "$KP_ROOT/scripts/setup/virt.sh"  # riscv64 and aarch64 guests: QEMU, rust-web-src, binutils
[ "$with_chromium" = 0 ] || install_chromium
[ "$with_linux" = 0 ] || bash "$KP_ROOT/scripts/setup/linux.sh"  # Linux guest: kernels, busybox, initramfs
[ "$with_qemu_sid" = 0 ] || bash "$KP_ROOT/scripts/setup/qemu-sid.sh"  # QEMU 11.1 in a sid root
[ "$with_qemu_72" = 0 ] || bash "$KP_ROOT/scripts/setup/qemu-7.2.sh"  # QEMU 7.2 unpacked
say "setup complete"
