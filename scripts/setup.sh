#!/usr/bin/env bash
# Installs what kern-profile needs on a fresh Debian 12 (bookworm) machine, and
# nothing that is already there:
#   - QEMU >= min_version of qemu-version.txt, from bookworm-backports;
#   - the guest-kernel toolchain: Debian's rustc-web plus its i686 `core`;
#   - chromium, only with --with-chromium (the SVG rendering test);
#   - the Linux guest (Debian's kernels and busybox, scripts/setup-linux.sh), only with
#     --with-linux;
#   - Debian sid's QEMU 11.1 (plugin API 7) in a debootstrap root beside the system's, for a
#     second pass of the tests (scripts/setup-qemu-sid.sh), only with --with-qemu-sid.
# Idempotent: a second run checks and installs nothing.
. "$(dirname "$0")/lib.sh"

with_chromium=0
with_linux=0
with_qemu_sid=0
for a in "$@"; do
    case "$a" in
        --with-chromium) with_chromium=1 ;;
        --with-linux) with_linux=1 ;;
        --with-qemu-sid) with_qemu_sid=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) die "unknown argument '$a' (see --help)" ;;
    esac
done

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

need_debian12() {
    . /etc/os-release 2>/dev/null || die "cannot read /etc/os-release: unsupported system"
    if [ "${ID:-}" != debian ] || [ "${VERSION_CODENAME:-}" != bookworm ]; then
        die "this script supports Debian 12 (bookworm); found '${PRETTY_NAME:-unknown}'. Install QEMU >= $(qv min_version) with plugin support and a rustc with an i686 core by hand."
    fi
}

apt_updated=0
apt_update() {
    if [ "$apt_updated" = 0 ]; then
        say "apt-get update"
        # Mirrors are sometimes mid-sync: try again before giving up.
        local try
        for try in 1 2 3; do
            local log
            log="$($SUDO apt-get update -qq 2>&1 || true)"
            [ -z "$log" ] || printf '%s\n' "$log" >&2
            if grep -q '^E:' <<<"$log"; then
                say "apt-get update reported errors (try $try of 3)"
                sleep 5
            else
                apt_updated=1
                return
            fi
        done
        say "warning: apt-get update kept reporting errors; going on with the indexes it has"
        apt_updated=1
    fi
}

install_qemu() {
    local min have
    min="$(qv min_version)"
    have="$(qemu_version qemu-system-i386)"
    if [ -n "$have" ] && version_ge "$have" "$min" && command -v qemu-system-x86_64 >/dev/null; then
        say "QEMU $have already installed (>= $min)"
        return
    fi
    need_debian12
    say "installing QEMU >= $min from bookworm-backports (found: ${have:-none})"
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        say "adding the bookworm-backports apt source"
        $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        apt_updated=0
    fi
    apt_update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports \
        --no-install-recommends qemu-system-x86 >/dev/null
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
    need_debian12
    if ! dpkg --print-foreign-architectures | grep -qx i386; then
        say "enabling the i386 architecture (to download its Rust core)"
        $SUDO dpkg --add-architecture i386
        apt_updated=0
    fi
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
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        --allow-downgrades "rustc-web=$ver" "libstd-rust-web-dev=$ver" binutils >/dev/null
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
    need_debian12
    apt_update
    say "installing chromium (SVG rendering test)"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
}

command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) first"
install_qemu
install_guest_toolchain
bash "$KP_ROOT/scripts/setup-virt.sh"  # riscv64 and aarch64 guests: QEMU, rust-web-src, binutils
[ "$with_chromium" = 0 ] || install_chromium
[ "$with_linux" = 0 ] || bash "$KP_ROOT/scripts/setup-linux.sh"  # Linux guest: kernels, busybox, initramfs
[ "$with_qemu_sid" = 0 ] || bash "$KP_ROOT/scripts/setup-qemu-sid.sh"  # QEMU 11.1 in a sid root
say "setup complete"
