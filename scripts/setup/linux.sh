#!/usr/bin/env bash
# Fetches the Linux guest of the end-to-end tests and benchmarks (called by
# `scripts/setup.sh --with-linux`): Debian 12's Linux 6.1 kernels (i386: the "686" flavour,
# frame pointers on; x86_64: "amd64"; aarch64: "arm64", frame pointers on) and a static
# busybox of each architecture, downloaded
# with `apt-get download` (no install) and unpacked under target/linux/ARCH/:
#   vmlinuz      the kernel (boots with `qemu-system-* -kernel`)
#   busybox      static busybox for the initramfs
#   packages.txt the Debian packages they came from
#   vmlinux      (i386 only) the same kernel with its DWARF, from its -dbg package (760 MB,
#                of which the vmlinux alone is unpacked): the 686 kernels carry no BTF, so
#                tasks= reads task_struct's layout from DWARF
# then builds target/linux/ARCH/initramfs.cpio.gz (scripts/guests/build-linux-initramfs.sh).
# Also Debian 12's newest Linux 6.12 amd64 kernel (bookworm's 6.12.x+deb12 packages; no 686
# flavour exists) as target/linux/x86_64-6.12/vmlinuz, booted with the x86_64 initramfs
# (`scripts/guests/run-linux.sh --arch x86_64 --kernel ...`): 6.10 renamed the allocator entry
# points (`_noprof`), which alloc=linux must find.
# Cached: a second run checks and downloads nothing. --force downloads again.
. "$(dirname "$0")/../lib.sh"
. "$KP_ROOT/scripts/setup/lib.sh"

force=0
for a in "$@"; do
    case "$a" in
        --force) force=1 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$a' (see --help)" ;;
    esac
done

LINUX_DIR="$KP_ROOT/target/linux"

# The newest Debian 12 Linux 6.1 image of flavour $1 (686, amd64) offered for dpkg arch $2.
newest_image() {
    apt-cache search --names-only "^linux-image-[0-9.]+-[0-9]+-$1-unsigned\$" | awk '{print $1}' |
        sort -V | while read -r p; do
            apt-cache show "$p:$2" >/dev/null 2>&1 && echo "$p"
        done | tail -n1
}

# fetch ARCH (i386|x86_64|aarch64): kernel and busybox into target/linux/ARCH.
fetch() {
    local arch="$1" deb flavour out pkg tmp
    case "$arch" in
        i386) deb=i386 flavour=686 ;;
        x86_64) deb=amd64 flavour=amd64 ;;
        aarch64) deb=arm64 flavour=arm64 ;;
    esac
    out="$LINUX_DIR/$arch"
    if [ "$force" = 0 ] && [ -s "$out/vmlinuz" ] && [ -x "$out/busybox" ]; then
        say "Linux guest ($arch) already fetched: $(tr '\n' ' ' <"$out/packages.txt")"
        return
    fi
    . /etc/os-release 2>/dev/null || true
    [ "${VERSION_CODENAME:-}" = bookworm ] ||
        die "the Linux guest comes from Debian 12 (bookworm) packages; found '${PRETTY_NAME:-unknown}'"
    enable_arch "$deb"  # for its kernel and busybox
    apt_update
    pkg="$(newest_image "$flavour" "$deb")"
    [ -n "$pkg" ] || die "apt offers no linux-image-*-$flavour-unsigned for $deb"
    say "downloading $pkg:$deb and busybox-static:$deb"
    tmp="$(mktemp -d)"
    chmod 755 "$tmp"  # apt-get download runs as _apt
    (cd "$tmp" && apt-get download -qq "$pkg:$deb" "busybox-static:$deb") ||
        { rm -rf "$tmp"; die "apt-get download $pkg:$deb busybox-static:$deb failed"; }
    dpkg-deb -x "$tmp"/linux-image-*.deb "$tmp/k"
    dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/b"
    mkdir -p "$out"
    cp "$tmp"/k/boot/vmlinuz-* "$out/vmlinuz"
    cp "$tmp/b/bin/busybox" "$out/busybox"
    (cd "$tmp" && ls -- *.deb) >"$out/packages.txt"
    rm -rf "$tmp"
    rm -f "$out/initramfs.cpio.gz" "$out/vmlinux"
}

# fetch_dbg: the i386 kernel's vmlinux with DWARF (its -dbg package, same version) into
# target/linux/i386/vmlinux.
fetch_dbg() {
    local out="$LINUX_DIR/i386" image pkg ver tmp
    if [ "$force" = 0 ] && [ -s "$out/vmlinux" ]; then
        say "Linux guest (i386) vmlinux with DWARF already fetched"
        return
    fi
    image="$(grep -o '^linux-image-[^_]*-686-unsigned_[^_]*' "$out/packages.txt")" ||
        die "$out/packages.txt names no 686 kernel package"
    pkg="${image%%_*}"
    pkg="${pkg%-unsigned}-dbg"
    ver="$(printf '%b' "${image#*_}" | sed 's/%3a/:/')"
    apt_update
    say "downloading $pkg:i386=$ver (for its vmlinux)"
    tmp="$(mktemp -d)"
    chmod 755 "$tmp"  # apt-get download runs as _apt
    (cd "$tmp" && apt-get download -qq "$pkg:i386=$ver") ||
        { rm -rf "$tmp"; die "apt-get download $pkg:i386=$ver failed"; }
    mkdir -p "$tmp/d"
    # The vmlinux comes first in the package: tar stops there, and dpkg-deb, cut off, fails.
    { dpkg-deb --fsys-tarfile "$tmp"/linux-image-*.deb 2>/dev/null || true; } |
        tar -x -C "$tmp/d" --occurrence=1 --wildcards './usr/lib/debug/boot/vmlinux-*' ||
        { rm -rf "$tmp"; die "no vmlinux in $pkg"; }
    cp "$tmp"/d/usr/lib/debug/boot/vmlinux-* "$out/vmlinux.part"
    mv "$out/vmlinux.part" "$out/vmlinux"
    (cd "$tmp" && ls -- *.deb) >>"$out/packages.txt"
    rm -rf "$tmp"
}

# fetch_612: the newest Linux 6.12 amd64 kernel into target/linux/x86_64-6.12 (vmlinuz only).
fetch_612() {
    local out="$LINUX_DIR/x86_64-6.12" pkg tmp
    if [ "$force" = 0 ] && [ -s "$out/vmlinuz" ]; then
        say "Linux 6.12 guest kernel already fetched: $(tr '\n' ' ' <"$out/packages.txt")"
        return
    fi
    apt_update
    pkg="$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' |
        awk '{print $1}' | sort -V | tail -n1)"
    [ -n "$pkg" ] || die "apt offers no linux-image-6.12.*+deb12-amd64-unsigned"
    say "downloading $pkg:amd64"
    tmp="$(mktemp -d)"
    chmod 755 "$tmp"  # apt-get download runs as _apt
    (cd "$tmp" && apt-get download -qq "$pkg:amd64") ||
        { rm -rf "$tmp"; die "apt-get download $pkg:amd64 failed"; }
    mkdir -p "$tmp/k" "$out"
    dpkg-deb --fsys-tarfile "$tmp"/linux-image-*.deb | tar -x -C "$tmp/k" --wildcards './boot/vmlinuz-*' ||
        { rm -rf "$tmp"; die "no vmlinuz in $pkg"; }
    cp "$tmp"/k/boot/vmlinuz-* "$out/vmlinuz"
    (cd "$tmp" && ls -- *.deb) >"$out/packages.txt"
    rm -rf "$tmp"
}

# The initramfs is packed with cpio; run-linux.sh times boots with bc. Neither is in every
# minimal Debian 12.
missing=()
for tool in cpio bc; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt_update
    say "installing ${missing[*]}"
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi

for arch in i386 x86_64 aarch64; do
    fetch "$arch"
    bash "$KP_ROOT/scripts/guests/build-linux-initramfs.sh" --arch "$arch" >/dev/null
done
fetch_dbg
fetch_612
say "Linux guest ready in $LINUX_DIR"
