#!/usr/bin/env bash
# Installs what the riscv64 and aarch64 example kernels need on Debian 12 (bookworm), and
# nothing that is already there (called by scripts/setup.sh, after Debian's rustc-web):
#   - qemu-system-riscv64 and qemu-system-aarch64 >= min_version of qemu-version.txt, from
#     bookworm-backports (packages qemu-system-riscv and qemu-system-arm);
#   - rust-web-src at the version of Debian's rustc (/usr/bin/rustc): the library sources
#     scripts/guests/build-kernel-virt.sh compiles `core` from (Debian ships no `core` for the
#     riscv64gc-unknown-none-elf and aarch64-unknown-none targets; rustup's toolchains here
#     cannot add targets);
#   - binutils-riscv64-linux-gnu and binutils-aarch64-linux-gnu (ld, objcopy, objdump, nm).
# Idempotent: a second run checks and installs nothing.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/setup/lib.sh"

no_arguments "$@"

by_hand="Install qemu-system-riscv64 and qemu-system-aarch64 >= $(qv min_version), the Rust library sources of your rustc, and riscv64/aarch64 binutils by hand."

install_qemu_virt() {
    local min have_rv have_arm
    min="$(qv min_version)"
    have_rv="$(qemu_version qemu-system-riscv64)"
    have_arm="$(qemu_version qemu-system-aarch64)"
    if [ -n "$have_rv" ] && version_ge "$have_rv" "$min" && [ -n "$have_arm" ] && version_ge "$have_arm" "$min"; then
        say "qemu-system-riscv64 $have_rv and qemu-system-aarch64 $have_arm already installed (>= $min)"
        return
    fi
    need_debian12 "$by_hand"
    add_backports
    apt_update
    say "installing qemu-system-riscv and qemu-system-arm >= $min from bookworm-backports"
    apt_install -t bookworm-backports qemu-system-riscv qemu-system-arm
    for q in qemu-system-riscv64 qemu-system-aarch64; do
        have_rv="$(qemu_version "$q")"
        [ -n "$have_rv" ] && version_ge "$have_rv" "$min" || die "$q install gave '${have_rv:-nothing}', need >= $min"
    done
    say "qemu-system-riscv64 and qemu-system-aarch64 $(qemu_version qemu-system-aarch64) installed"
}

install_rust_src() {
    [ -x "$GUEST_RUSTC" ] || die "$GUEST_RUSTC not found: scripts/setup.sh installs it first"
    local v src ver
    v="$("$GUEST_RUSTC" --version | awk '{print $2}')"
    src="/usr/src/rustc-$v/library/core/src/lib.rs"
    if [ -f "$src" ]; then
        say "Rust $v library sources already installed"
        return
    fi
    need_debian12 "$by_hand"
    apt_update
    # The package version of the installed compiler (rust-web-src must be the same build).
    ver="$(dpkg-query -W -f='${Version}' rustc-web 2>/dev/null)"
    [ -n "$ver" ] || die "rustc-web is not installed: run scripts/setup.sh"
    say "installing rust-web-src=$ver (the library sources of $GUEST_RUSTC)"
    apt_install --allow-downgrades "rust-web-src=$ver"
    [ -f "$src" ] || die "rust-web-src=$ver did not provide $src"
}

install_binutils() {
    if command -v riscv64-linux-gnu-ld >/dev/null && command -v aarch64-linux-gnu-ld >/dev/null; then
        say "riscv64 and aarch64 binutils already installed"
        return
    fi
    need_debian12 "$by_hand"
    apt_update
    say "installing binutils-riscv64-linux-gnu and binutils-aarch64-linux-gnu"
    apt_install binutils-riscv64-linux-gnu binutils-aarch64-linux-gnu
}

install_qemu_virt
install_rust_src
install_binutils
say "setup for the riscv64 and aarch64 kernels complete"
