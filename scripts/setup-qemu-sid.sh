#!/usr/bin/env bash
# Installs Debian sid's QEMU (11.1.x, plugin API v7) beside the system's, for a second pass of
# the tests on the newest QEMU. On Debian 12 (bookworm), as root (or through sudo):
#   - debootstrap, with apt, if it is missing;
#   - a minimal Debian sid root holding qemu-system-x86, qemu-system-arm and qemu-system-riscv,
#     in $KP_QEMU_SID_ROOT (default /var/cache/kern-profile/qemu-sid), from deb.debian.org;
#   - in ROOT/kp-bin, wrappers qemu-system-{i386,x86_64,riscv64,aarch64,riscv32,arm} that run sid's binary
#     of the same name in that root with the host's /dev, /proc, /sys, the current directory's
#     top-level tree, /tmp, $TMPDIR, $HOME/.cache, $KP_ROOT and the top-level directory of
#     every absolute path in QEMU's arguments visible at the same paths, and the current
#     directory kept. Put ROOT/kp-bin first on PATH (lib.sh: qemu_sid_bin_dir) and
#     the project runs sid's QEMU as it runs the system's. The wrappers need root (unshare -m).
# Idempotent: a second run finds the root complete, checks the wrappers and installs nothing.
. "$(dirname "$0")/lib.sh"

for a in "$@"; do
    case "$a" in
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) die "unknown argument '$a' (see --help)" ;;
    esac
done

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

ROOT="$(qemu_sid_root)"
BIN="$(qemu_sid_bin_dir)"
# The guests kern-profile samples, and two it refuses (the tests check that it says so).
PROGS="qemu-system-i386 qemu-system-x86_64 qemu-system-riscv64 qemu-system-aarch64 qemu-system-riscv32 qemu-system-arm"
# qemu-system-riscv64 is in its own package (qemu-system-riscv), not in qemu-system-misc.
PACKAGES="qemu-system-x86,qemu-system-arm,qemu-system-riscv"

case "$ROOT" in
    /*) ;;
    *) die "KP_QEMU_SID_ROOT must be an absolute path (got '$ROOT')" ;;
esac
[ "$ROOT" != / ] || die "KP_QEMU_SID_ROOT must not be /"

need_debian12() {
    . /etc/os-release 2>/dev/null || die "cannot read /etc/os-release: unsupported system"
    if [ "${ID:-}" != debian ] || [ "${VERSION_CODENAME:-}" != bookworm ]; then
        die "this script supports Debian 12 (bookworm); found '${PRETTY_NAME:-unknown}'. Install debootstrap by hand, or make the sid root by hand: debootstrap --variant=minbase --include=$PACKAGES sid $ROOT"
    fi
}

apt_install_debootstrap() {
    if command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ]; then
        say "debootstrap already installed"
        return
    fi
    need_debian12
    say "apt-get update"
    $SUDO apt-get update -qq || say "warning: apt-get update reported errors; going on with the indexes it has"
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || die "debootstrap install failed"
}

# Succeeds when root $1 holds the four sid QEMU binaries.
root_has_qemu() {
    local p
    for p in $PROGS; do
        [ -x "$1/usr/bin/$p" ] || return 1
    done
}

# Unmounts whatever is still mounted under $1 (debootstrap mounts /proc and /sys in its target
# while it works: a killed run leaves them), deepest first, then removes $1 without crossing
# into another file system.
remove_tree() {
    [ -e "$1" ] || return 0
    local m
    # Mount points are in field 5 of mountinfo, with spaces escaped as \040.
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
        sort -r | while read -r m; do
            $SUDO umount -l "$(printf '%b' "$m")" || true
        done
    $SUDO rm -rf --one-file-system "$1"
}

make_root() {
    if [ -d "$ROOT" ]; then
        root_has_qemu "$ROOT" || die "$ROOT exists but lacks sid's QEMU binaries ($PROGS): remove it and run this script again"
        say "Debian sid root already complete: $ROOT"
        return
    fi
    apt_install_debootstrap
    local tmp="$ROOT.tmp" try start log
    $SUDO mkdir -p "$(dirname "$ROOT")"
    log="$(dirname "$ROOT")/debootstrap.log"
    for try in 1 2; do
        remove_tree "$tmp"
        say "making a Debian sid root with $PACKAGES in $ROOT (debootstrap from deb.debian.org, 1 to 4 minutes, about 400 MB; log: $log)"
        start=$SECONDS
        # debootstrap lives in /usr/sbin, which a non-root PATH may lack.
        if $SUDO env PATH="/usr/sbin:/sbin:$PATH" debootstrap --variant=minbase --include="$PACKAGES" \
            sid "$tmp" http://deb.debian.org/debian >"$log" 2>&1 && root_has_qemu "$tmp"; then
            say "debootstrap done in $((SECONDS - start)) s"
            break
        fi
        tail -n 5 "$log" >&2 || true
        # Mirrors are sometimes mid-sync: try once more before giving up.
        [ "$try" = 1 ] || { remove_tree "$tmp"; die "debootstrap failed twice (see $log)"; }
        say "debootstrap failed (try $try of 2); trying again in 10 s"
        sleep 10
    done
    # The downloaded packages and indexes are not needed to run QEMU.
    $SUDO rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*_Packages \
        "$tmp"/var/lib/apt/lists/*_Release "$tmp"/var/lib/apt/lists/*_InRelease
    $SUDO mv "$tmp" "$ROOT"
    say "Debian sid root complete: $ROOT ($(du -sh "$ROOT" 2>/dev/null | cut -f1))"
}

# The text of the wrapper for program $1.
wrapper_text() {
    cat <<EOF
#!/bin/sh
# Generated by kern-profile's scripts/setup-qemu-sid.sh: runs Debian sid's $1
# (/usr/bin/$1 of the root $ROOT)
# with every argument, stdin/stdout/stderr, the environment and the current directory passed
# through, and the host's /dev, /proc, /sys, the current directory's top-level tree, /tmp,
# \$TMPDIR, \$HOME/.cache and \$KP_ROOT mounted at the same paths in a private mount namespace
# (gone when QEMU exits; empty mount-point directories stay in the root). Every step execs, so
# QEMU keeps this script's PID: signals and exit status reach the caller unchanged. Needs root.
root='$ROOT'
kp_root_default='$KP_ROOT'
EOF
    cat <<'EOF'
if [ "$(id -u)" != 0 ]; then
    echo "$0: runs QEMU in a chroot through unshare --mount: run it as root" >&2
    exit 126
fi
export KP_ROOT="${KP_ROOT:-$kp_root_default}"
EOF
    printf 'exec unshare --mount --propagation private /bin/sh -c %s kp-qemu-sid "$root" %s "$@"\n' \
        "'$(wrapper_inner)'" "$1"
}

# The script the wrapper runs inside the new mount namespace (no single quote in it):
# $1 = root, $2 = program, the rest = QEMU's arguments.
wrapper_inner() {
    cat <<'EOF'
set -e
root=$1; prog=$2; shift 2
cwd=$(pwd -P)
# Host directories the root must see, mounted parents first; a directory inside one already
# mounted is skipped. Top-level directories the root has its own of (/usr, /etc...) are never
# covered whole: below them only the exact directory is mounted.
done_dirs=
covered() {
    for d in $done_dirs; do
        case "$1" in "$d"|"$d"/*) return 0 ;; esac
    done
    return 1
}
add() {
    [ -n "$1" ] && [ -d "$1" ] || return 0
    p=$(cd "$1" && pwd -P) || return 0
    case "$p" in /|/bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/libx32|/proc|/run|/sbin|/sys|/usr|/var) return 0 ;; esac
    covered "$p" && return 0
    mkdir -p "$root$p"
    mount --rbind "$p" "$root$p"
    done_dirs="$done_dirs $p"
}
mount --rbind /dev "$root/dev"
mount --rbind /proc "$root/proc"
mount --rbind /sys "$root/sys"
top=${cwd#/}; top=/${top%%/*}
case "$top" in
    /|/bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/libx32|/proc|/run|/sbin|/sys|/usr|/var) ;;
    *) add "$top" ;;
esac
add /tmp
add "${TMPDIR:-}"
add "${HOME:+$HOME/.cache}"
add "${KP_ROOT:-}"
add "$cwd"
# Absolute paths in the arguments (-kernel /k, -plugin /p.so,out=/o, -serial file:/f): the
# top-level directory of each, so files outside the directories above are found too.
for arg in "$@"; do
    for t in $(printf %s "$arg" | tr ",=:" "   "); do
        case "$t" in
            /?*) t=${t#/}; add "/${t%%/*}" ;;
        esac
    done
done
exec unshare --root="$root" --wd="$cwd" "/usr/bin/$prog" "$@"
EOF
}

make_wrappers() {
    local p f changed=0
    $SUDO mkdir -p "$BIN"
    for p in $PROGS; do
        f="$BIN/$p"
        if [ -x "$f" ] && [ "$(cat "$f")" = "$(wrapper_text "$p")" ]; then
            continue
        fi
        wrapper_text "$p" | $SUDO tee "$f.tmp" >/dev/null
        $SUDO chmod 0755 "$f.tmp"
        $SUDO mv "$f.tmp" "$f"
        changed=1
    done
    if [ "$changed" = 1 ]; then
        say "wrote the wrappers $BIN/{${PROGS// /,}}"
    else
        say "wrappers already in place: $BIN"
    fi
}

check_wrappers() {
    [ "$(id -u)" = 0 ] || { say "not root: skipping the wrapper check (the wrappers need root)"; return; }
    local p v
    for p in $PROGS; do
        v="$(qemu_version "$BIN/$p")"
        [ -n "$v" ] || die "$BIN/$p --version failed"
    done
    say "sid's QEMU $v runs through $BIN (put it first on PATH)"
}

make_root
make_wrappers
check_wrappers
