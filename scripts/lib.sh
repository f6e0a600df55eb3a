# Shared helpers for kern-profile's scripts. Source it: `. "$(dirname "$0")/lib.sh"` (from
# scripts/*/: `. "$(dirname "$0")/../lib.sh"`); the folders' own lib.sh come after it.
set -euo pipefail

KP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KP_ROOT

# Value of KEY in qemu-version.txt.
qv() { sed -n "s/^$1=//p" "$KP_ROOT/qemu-version.txt"; }

say() { printf '\033[1m[kern-profile]\033[0m %s\n' "$*" >&2; }
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 1; }

# The calling script's header comment (after the #! line) is its help text.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# need OPTION [VALUE ...]: OPTION was given a value.
need() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# A /dev/null that is no longer a device (a file renamed over it by something running as root)
# hands whatever was last written there to every reader: cargo's rustc probe reads it, fails,
# and caches the failure. Put the device back before anything runs.
if [ ! -c /dev/null ]; then
    kind="$(stat -c %F /dev/null 2>&1 || true)"
    [ "$(id -u)" = 0 ] || die "/dev/null is not a device ($kind): ask an administrator to recreate it"
    printf '[kern-profile] warning: /dev/null is not a device (%s); recreating it\n' "$kind" >&2
    rm -f /dev/null && mknod -m 0666 /dev/null c 1 3
fi

# Cargo caches its rustc probes, failures included, in these files: one that read a broken
# /dev/null would fail every later build. A probe costs milliseconds; forget them.
forget_rustc_probes() {
    rm -f "$KP_ROOT/target/.rustc_info.json" "$KP_ROOT/target/kern-profile-plugin-embed/.rustc_info.json"
}

# Empties the seed corpus DIR (fuzz/corpus) for regeneration, keeping the inputs fuzzing
# found (found-*), which no script can make again.
clear_generated_seeds() {
    [ -d "$1" ] || return 0
    find "$1" -type f ! -name 'found-*' -delete
}

# Succeeds when dotted version $1 >= $2.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# The QEMU binary version as "X.Y.Z", or nothing.
qemu_version() {
    command -v "$1" >/dev/null 2>&1 || return 0
    "$1" --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9.]*\).*/\1/p'
}

# The Debian sid root holding QEMU 11.1 (plugin API v7) that scripts/setup/qemu-sid.sh makes.
qemu_sid_root() { printf '%s\n' "${KP_QEMU_SID_ROOT:-/var/cache/kern-profile/qemu-sid}"; }

# The directory of that script's wrappers qemu-system-{i386,x86_64,riscv64,aarch64}: put it
# first on PATH to run everything on sid's QEMU (as root). Printed even when not made yet:
# check with qemu_sid_ready.
qemu_sid_bin_dir() { printf '%s/kp-bin\n' "$(qemu_sid_root)"; }

# Succeeds when the sid QEMU wrappers exist (scripts/setup/qemu-sid.sh ran to the end).
qemu_sid_ready() {
    local d p
    d="$(qemu_sid_bin_dir)"
    for p in qemu-system-i386 qemu-system-x86_64 qemu-system-riscv64 qemu-system-aarch64 qemu-system-riscv32 qemu-system-arm; do
        [ -x "$d/$p" ] || return 1
    done
}

# The directory scripts/setup/qemu-7.2.sh unpacks Debian 12's QEMU 7.2 into (too old for the
# plugin; its gdbstub serves `record --gdb` and `--attach`).
qemu_72_root() { printf '%s\n' "${KP_QEMU_72_ROOT:-/var/cache/kern-profile/qemu-7.2}"; }

# The programs that script wraps in qemu_72_bin_dir.
QEMU_72_PROGS="qemu-system-i386 qemu-system-x86_64 qemu-system-riscv64 qemu-system-aarch64 qemu-system-riscv32 qemu-system-arm"

# The directory of its wrappers (QEMU_72_PROGS): put it first on PATH to run everything on
# QEMU 7.2 (no root needed). Printed even when not made yet: check with qemu_72_ready.
qemu_72_bin_dir() { printf '%s/kp-bin\n' "$(qemu_72_root)"; }

# Succeeds when the QEMU 7.2 wrappers exist (scripts/setup/qemu-7.2.sh ran to the end).
qemu_72_ready() {
    local d p
    d="$(qemu_72_bin_dir)"
    for p in $QEMU_72_PROGS; do
        [ -x "$d/$p" ] || return 1
    done
}

# Debian's rustc (the guest-kernel compiler; rustup's rustc has no i686 core here).
GUEST_RUSTC=/usr/bin/rustc
GUEST_RUSTLIB_I686=/usr/lib/rustlib/i686-unknown-linux-gnu/lib
