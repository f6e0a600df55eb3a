#!/usr/bin/env bash
# Builds the Debian package of kern-profile: the command, its QEMU plugin builds, the man
# pages and the shell completions, as target/debian/kern-profile_VERSION_ARCH.deb (printed
# last). Install it with `sudo apt install ./target/debian/kern-profile_*.deb`; then
# `kern-profile record -- qemu-system-i386 -kernel kernel.elf ...` finds the plugin build its
# QEMU loads in /usr/lib/kern-profile/ (kern-profile.so: QEMU 9.2 to 11.0; kern-profile-api7.so:
# 11.1 and later). QEMU >= min_version of qemu-version.txt is recommended, not required
# (Debian 12 has it in bookworm-backports only; scripts/setup.sh installs it).
#
# usage: scripts/package.sh [--bin PATH] [--plugins DIR] [--out DIR]
#   --bin PATH     the kern-profile binary to package (default: built in release here)
#   --plugins DIR  where kern-profile.so and kern-profile-api7.so are (default: built in
#                  release here, target/release)
#   --out DIR      where the .deb goes (default: target/debian)
# Needs dpkg-deb (and binutils' strip and objdump, which scripts/setup.sh installs).
. "$(dirname "$0")/lib.sh"
# Nothing here reads stdin; cargo's rustc probe would (and cache what it read).
exec </dev/null
cd "$KP_ROOT"

bin="" plugins="" out="$KP_ROOT/target/debian"
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) [ $# -ge 2 ] || die "--bin needs a path"; bin="$2"; shift 2 ;;
        --plugins) [ $# -ge 2 ] || die "--plugins needs a directory"; plugins="$2"; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a directory"; out="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian's dpkg)"
command -v objdump >/dev/null || die "objdump not found: install binutils (scripts/setup.sh does)"
# Every plugin build, as installed (scripts/build.sh's names).
builds=(kern-profile.so kern-profile-api7.so)
if [ -z "$bin" ] || [ -z "$plugins" ]; then
    [ -n "$plugins" ] || bash "$KP_ROOT/scripts/build.sh" --no-kernels
    bin="${bin:-$KP_ROOT/target/release/kern-profile}"
    plugins="${plugins:-$KP_ROOT/target/release}"
fi
[ -x "$bin" ] || die "no kern-profile binary at $bin"
for b in "${builds[@]}"; do
    [ -f "$plugins/$b" ] || die "no plugin build $b in $plugins (scripts/build.sh makes both)"
done

version="$("$bin" --version | awk '{print $2}')"
[ -n "$version" ] || die "$bin --version said no version"
arch="$(dpkg --print-architecture)"
qemu_min="$(qv min_version)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/kern-profile" \
    "$root/usr/share/man/man1" "$root/usr/share/doc/kern-profile" \
    "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"
install -m 0755 "$bin" "$root/usr/bin/kern-profile"
libs=()
for b in "${builds[@]}"; do
    install -m 0644 "$plugins/$b" "$root/usr/lib/kern-profile/$b"
    libs+=("$root/usr/lib/kern-profile/$b")
done
if command -v strip >/dev/null; then
    strip --strip-debug "$root/usr/bin/kern-profile" "${libs[@]}"
fi
kp="$root/usr/bin/kern-profile"
"$kp" man --dir "$root/usr/share/man/man1"
gzip -9n "$root"/usr/share/man/man1/*.1
"$kp" completions bash > "$root/usr/share/bash-completion/completions/kern-profile"
"$kp" completions zsh > "$root/usr/share/zsh/vendor-completions/_kern-profile"
"$kp" completions fish > "$root/usr/share/fish/vendor_completions.d/kern-profile.fish"
install -m 0644 README.md "$root/usr/share/doc/kern-profile/README.md"
# README.md links into docs/: ship them beside it so the links resolve.
install -d "$root/usr/share/doc/kern-profile/docs"
install -m 0644 docs/*.md "$root/usr/share/doc/kern-profile/docs/"
cat > "$root/usr/share/doc/kern-profile/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: kern-profile

Files: *
License: MIT or Apache-2.0
COPY

# Depends: the packages of the shared libraries the two files need.
depends=()
for lib in $(objdump -p "$kp" "${libs[@]}" |
             awk '$1 == "NEEDED" {print $2}' | sort -u); do
    case "$lib" in
        libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|ld-linux*) pkg=libc6 ;;
        libgcc_s.so.1) pkg=libgcc-s1 ;;
        *) die "no Debian package known for $lib: add it to scripts/package.sh" ;;
    esac
    [[ " ${depends[*]} " == *" $pkg "* ]] || depends+=("$pkg")
done
glibc="$(objdump -T "$kp" "${libs[@]}" 2>/dev/null |
         grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)"
dep_line=""
for d in "${depends[@]}"; do
    [ "$d" = libc6 ] && [ -n "$glibc" ] && d="libc6 (>= $glibc)"
    dep_line="${dep_line:+$dep_line, }$d"
done
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat > "$root/DEBIAN/control" <<CONTROL
Package: kern-profile
Version: $version
Architecture: $arch
Maintainer: kern-profile developers <kern-profile@example.invalid>
Installed-Size: $size
Depends: ${dep_line:-libc6}
Recommends: qemu-system-x86 (>= 1:$qemu_min~)
Suggests: qemu-system-misc (>= 1:$qemu_min~), qemu-system-arm (>= 1:$qemu_min~)
Section: devel
Priority: optional
Homepage: https://example.invalid/kern-profile
Description: CPU flamegraphs of an OS kernel running in QEMU
 kern-profile samples a guest kernel's call stacks with a QEMU TCG plugin (QEMU $qemu_min
 or newer: one build for plugin API 4, one for API 7) and draws flamegraphs, perf-style
 reports and Firefox Profiler
 profiles from them: kern-profile record -- qemu-system-i386 -kernel kernel.elf ...
 It also turns Maestro memtrace allocation traces into allocation flamegraphs.
CONTROL

mkdir -p "$out"
deb="$out/kern-profile_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
say "built $deb"
echo "$deb"
