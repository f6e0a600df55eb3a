#!/usr/bin/env bash
# Unpacks Debian 12's own QEMU 7.2 beside the system's, for a pass of the gdbstub tests on an
# old QEMU (the plugin needs 9.2 or newer; `record --gdb` and `--attach` work on any). On
# Debian 12 (bookworm), as root (or through sudo); nothing is installed, dpkg never hears of it:
#   - `apt-get download` of bookworm's qemu-system-x86, qemu-system-common, qemu-system-arm and
#     qemu-system-misc at their newest 7.2 version (`apt-cache madison`) and qemu-system-data
#     at its own (about 68 MB), `dpkg-deb -x` of each into $KP_QEMU_72_ROOT (default
#     /var/cache/kern-profile/qemu-7.2; of qemu-system-misc only its riscv64 and riscv32
#     binaries), unpacked beside it and moved into place when complete;
#   - in ROOT/kp-bin, wrappers qemu-system-{i386,x86_64,riscv64,aarch64,riscv32,arm} that exec
#     7.2's binary with its own modules (QEMU_MODULE_DIR) and ROMs (-L ROOT/usr/share/qemu,
#     searched before the system QEMU's /usr/share/qemu; the BIOS and option ROMs of the system's
#     seabios and ipxe-qemu packages serve). Put ROOT/kp-bin first on PATH (lib.sh:
#     qemu_72_bin_dir) and the project runs 7.2 as it runs the system's QEMU. They need no root.
# Idempotent: a second run finds the root complete, checks the wrappers and downloads nothing.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/setup/lib.sh"

no_arguments "$@"

ROOT="$(qemu_72_root)"
BIN="$(qemu_72_bin_dir)"
# The packages sharing one version (qemu-system-data, architecture-independent, has its own).
PACKAGES="qemu-system-x86 qemu-system-common qemu-system-arm qemu-system-misc"
# What the wrappers need of the system: the BIOS (seabios) and the NICs' option ROMs (ipxe-qemu).
SYSTEM_ROMS="/usr/share/seabios/bios-256k.bin /usr/lib/ipxe/qemu/efi-virtio.rom"
# The download directory (removed on exit).
dl=""

check_root_dir KP_QEMU_72_ROOT "$ROOT"
case "$ROOT" in
    *"'"*|*[[:space:]]*) die "KP_QEMU_72_ROOT may hold no quote or space (got '$ROOT')" ;;
esac

# The binary in root $2 that wrapper $1 runs. Debian's usr/bin/qemu-system-i386 is a script
# exec'ing /usr/libexec/qemu-system-i386: the system's, not this root's.
binary_of() {
    case "$1" in
        qemu-system-i386) printf '%s/usr/libexec/%s\n' "$2" "$1" ;;
        *) printf '%s/usr/bin/%s\n' "$2" "$1" ;;
    esac
}

# The module directory (accel-tcg-*.so: QEMU 7.2 loads TCG itself as a module) of root $1.
module_dir_of() {
    local d
    for d in "$1"/usr/lib/*/qemu; do
        [ -f "$d/accel-tcg-x86_64.so" ] && { printf '%s\n' "$d"; return; }
    done
}

# Succeeds when root $1 holds every binary, the modules and the ROMs.
root_complete() {
    local p
    for p in $QEMU_72_PROGS; do
        [ -x "$(binary_of "$p" "$1")" ] || return 1
    done
    [ -n "$(module_dir_of "$1")" ] && [ -f "$1/usr/share/qemu/linuxboot_dma.bin" ]
}

# The newest version starting with 1:7.2 that apt offers ($1, `apt-cache madison` lines)
# hold for every package named in the rest.
newest_72_of_all() {
    local offers="$1"
    shift
    awk -F' [|] ' -v want="$*" '
        BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) named[w[i]] = 1 }
        { gsub(/ /, "", $1) }
        ($1 in named) && $2 ~ /^1:7\.2[+~-]/ && $3 ~ / Packages$/ && !seen[$1 " " $2]++ { c[$2]++ }
        END { for (v in c) if (c[v] == n) print v }' <<<"$offers" | sort -V | tail -n1
}

# Sets $ver (PACKAGES) and $data_ver (qemu-system-data) from apt's indexes (one madison: each
# takes seconds), updating them once when they offer no 7.2.
find_versions() {
    local try offers
    for try in 1 2; do
        # shellcheck disable=SC2086
        offers="$(apt-cache madison $PACKAGES qemu-system-data)"
        # shellcheck disable=SC2086
        ver="$(newest_72_of_all "$offers" $PACKAGES)"
        data_ver="$(newest_72_of_all "$offers" qemu-system-data)"
        [ -z "$ver" ] || [ -z "$data_ver" ] || return 0
        [ "$try" = 1 ] || break
        apt_update
    done
    die "apt offers no QEMU 7.2 for all of $PACKAGES and qemu-system-data (bookworm main): check the apt sources (apt-cache madison qemu-system-x86)"
}

install_system_roms() {
    local f missing=0
    for f in $SYSTEM_ROMS; do
        [ -f "$f" ] || missing=1
    done
    [ "$missing" = 1 ] || return 0
    apt_update
    say "installing seabios and ipxe-qemu (the BIOS and option ROMs QEMU 7.2 boots with)"
    apt_install seabios ipxe-qemu
    for f in $SYSTEM_ROMS; do
        [ -f "$f" ] || die "$f is missing after installing seabios and ipxe-qemu"
    done
}

make_root() {
    if [ -d "$ROOT" ]; then
        root_complete "$ROOT" || die "$ROOT exists but lacks QEMU 7.2's binaries ($QEMU_72_PROGS), modules or ROMs: remove it and run this script again"
        say "QEMU 7.2 already unpacked: $ROOT ($(paste -sd ' ' "$ROOT/kp-versions" 2>/dev/null))"
        return
    fi
    need_debian12 "Unpack Debian 12's qemu-system-x86, qemu-system-common and qemu-system-data 7.2 by hand (dpkg-deb -x) and point KP_QEMU_72_ROOT at the directory."
    local ver data_ver tmp="$ROOT.tmp" start p try debs=()
    find_versions
    dl="$(mktemp -d)"
    trap 'rm -rf "$dl"' EXIT
    start=$SECONDS
    for p in $PACKAGES; do debs+=("$p=$ver"); done
    debs+=("qemu-system-data=$data_ver")
    say "downloading QEMU $ver (${debs[*]%%=*}; about 68 MB)"
    for try in 1 2; do
        # The sandbox user (_apt) cannot write into our private directory: download as us.
        (cd "$dl" && apt-get download -qq -o APT::Sandbox::User="$(id -un)" "${debs[@]}") && break
        # Mirrors are sometimes mid-sync: try once more before giving up.
        [ "$try" = 1 ] || die "apt-get download ${debs[*]} failed twice"
        say "download failed (try $try of 2); trying again in 10 s"
        sleep 10
    done
    say "downloaded in $((SECONDS - start)) s; unpacking into $ROOT"
    start=$SECONDS
    $SUDO rm -rf --one-file-system "$tmp"
    $SUDO mkdir -p "$tmp"
    # qemu-system-misc holds 19 emulators (200 MB unpacked): take the two RISC-V ones, while
    # the others unpack (decompressing it all is half the time).
    dpkg-deb --fsys-tarfile "$dl/qemu-system-misc_"*.deb |
        $SUDO tar -x -C "$tmp" ./usr/bin/qemu-system-riscv64 ./usr/bin/qemu-system-riscv32 &
    local misc=$!
    for p in qemu-system-x86 qemu-system-common qemu-system-arm qemu-system-data; do
        $SUDO dpkg-deb -x "$dl/${p}_"*.deb "$tmp"
    done
    wait "$misc" || die "unpacking qemu-system-misc's RISC-V binaries failed"
    printf '%s\n' "${debs[@]}" | $SUDO tee "$tmp/kp-versions" >/dev/null
    root_complete "$tmp" || { $SUDO rm -rf --one-file-system "$tmp"; die "the unpacked packages lack a binary ($QEMU_72_PROGS), the TCG modules or the ROMs"; }
    $SUDO mv "$tmp" "$ROOT"
    say "QEMU 7.2 unpacked in $((SECONDS - start)) s: $ROOT ($(du -sh "$ROOT" 2>/dev/null | cut -f1))"
}

# The text of the wrapper for program $1.
wrapper_text() {
    cat <<EOF
#!/bin/sh
# Generated by kern-profile's scripts/setup/qemu-7.2.sh: runs Debian 12's QEMU 7.2 $1,
# unpacked in $ROOT, with its own modules and its ROMs found before the system QEMU's.
# exec: QEMU keeps this script's PID, signals and exit status reach the caller unchanged.
QEMU_MODULE_DIR='$(module_dir_of "$ROOT")'
export QEMU_MODULE_DIR
exec '$(binary_of "$1" "$ROOT")' -L '$ROOT/usr/share/qemu' -L /usr/share/seabios -L /usr/lib/ipxe/qemu "\$@"
EOF
}

check_wrappers() {
    local p v
    for p in $QEMU_72_PROGS; do
        v="$(qemu_version "$BIN/$p")"
        case "$v" in
            7.2.*) ;;
            *) die "$BIN/$p --version said '${v:-nothing}', not 7.2.x (run it to see why)" ;;
        esac
    done
    say "QEMU $v runs through $BIN (put it first on PATH)"
}

install_system_roms
make_root
write_wrappers "$BIN" "$QEMU_72_PROGS"
check_wrappers
