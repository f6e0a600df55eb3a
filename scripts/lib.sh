# Shared helpers for kern-profile's scripts. Source it: `. "$(dirname "$0")/lib.sh"`.
set -euo pipefail

KP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KP_ROOT

# Value of KEY in qemu-version.txt.
qv() { sed -n "s/^$1=//p" "$KP_ROOT/qemu-version.txt"; }

say() { printf '\033[1m[kern-profile]\033[0m %s\n' "$*" >&2; }
die() { printf '[kern-profile] error: %s\n' "$*" >&2; exit 1; }

# Succeeds when dotted version $1 >= $2.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# The QEMU binary version as "X.Y.Z", or nothing.
qemu_version() {
    command -v "$1" >/dev/null 2>&1 || return 0
    "$1" --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9.]*\).*/\1/p'
}

# Debian's rustc (the guest-kernel compiler; rustup's rustc has no i686 core here).
GUEST_RUSTC=/usr/bin/rustc
GUEST_RUSTLIB_I686=/usr/lib/rustlib/i686-unknown-linux-gnu/lib
