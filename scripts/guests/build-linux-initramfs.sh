#!/usr/bin/env bash
# Builds target/linux/ARCH/initramfs.cpio.gz (cpio newc + gzip, no root needed) from the
# static busybox scripts/setup/linux.sh fetched, and prints its path. Rebuilt only when
# missing or older than busybox or this script.
#
# usage: scripts/guests/build-linux-initramfs.sh --arch i386|x86_64|aarch64
#
# Its /init (busybox sh) mounts proc, sysfs, devtmpfs and a tmpfs, writes /proc/kallsyms,
# gzipped (the UART is slow), to the second serial port (/dev/ttyS1: the kernel's symbols, for
# `kern-profile --symbols`; valid for every boot of the same kernel with `nokaslr`; on aarch64,
# whose `virt` board has one UART, base64 on the console between the lines
# `kallsyms-base64-begin` and `kallsyms-base64-end`, kernel messages held back meanwhile),
# runs a
# fixed CPU + I/O workload on both CPUs (3 rounds: 2 MiB of /dev/urandom through md5sum in
# the background while another 2 MiB is written to a tmpfs file, gzipped, gunzipped and
# compared), prints "workload done" with the guest's uptime and powers off. With
# `kp.workload=tasks` on the kernel command line (run-linux.sh --append), it runs named
# processes instead that print "kp-proc PID NAME" (md5sum and gzip on the CPUs; sleep and a
# cat reading a pipe wait, printing "kp-wait PID SECONDS").
. "$(dirname "$0")/../lib.sh"

arch=""
while [ $# -gt 0 ]; do
    case "$1" in
        --arch) need "$@"; arch="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
case "$arch" in
    i386|x86_64|aarch64) ;;
    *) die "--arch must be i386, x86_64 or aarch64 (got '${arch}')" ;;
esac

dir="$KP_ROOT/target/linux/$arch"
out="$dir/initramfs.cpio.gz"
[ -x "$dir/busybox" ] || die "no $dir/busybox: run scripts/setup.sh --with-linux"
if [ -s "$out" ] && [ "$out" -nt "$dir/busybox" ] && [ "$out" -nt "$0" ]; then
    echo "$out"
    exit 0
fi
command -v cpio >/dev/null || die "cpio not found (apt-get install cpio)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage" "${tmp:-}"' EXIT
mkdir -p "$stage"/{bin,dev,proc,sys,tmp}
cp "$dir/busybox" "$stage/bin/busybox"
cat >"$stage/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
up() { cut -d' ' -f1 /proc/uptime; }
echo "kallsyms dump at $(up) s"
if [ "$(uname -m)" = aarch64 ]; then
  # One UART: on the console, as text, while the kernel prints only emergencies there.
  level="$(cut -f1 /proc/sys/kernel/printk)"
  echo 1 > /proc/sys/kernel/printk
  echo "kallsyms-base64-begin"
  gzip -c /proc/kallsyms | base64
  echo "kallsyms-base64-end"
  echo "$level" > /proc/sys/kernel/printk
else
  stty -F /dev/ttyS1 raw -echo  # binary: no \n to \r\n
  gzip -c /proc/kallsyms > /dev/ttyS1
fi
if grep -q 'kp.workload=tasks' /proc/cmdline; then
  # Named processes on both CPUs, each printing its pid and name before it runs (exec keeps
  # the pid; the name is the applet's): two CPU-bound ones, and two that wait a second.
  echo "workload start at $(up) s: $(nproc) CPUs, tasks"
  dd if=/dev/urandom of=/tmp/data bs=64k count=48 2>/dev/null
  sh -c 'echo "kp-proc $$ md5sum" >&2; exec md5sum /tmp/data /tmp/data /tmp/data /tmp/data /tmp/data /tmp/data' >/dev/null &
  sh -c 'echo "kp-proc $$ gzip" >&2; exec gzip -9 -c /tmp/data' >/dev/null &
  # Two that wait, each saying how long: one sleeps, one reads a pipe its writer fills a
  # second later (the writer's own sleep is not announced).
  sh -c 'echo "kp-proc $$ sleep" >&2; echo "kp-wait $$ 1.0" >&2; exec sleep 1' &
  (sleep 1; echo filled) | sh -c 'echo "kp-proc $$ cat" >&2; echo "kp-wait $$ 1.0" >&2; exec cat' >/dev/null &
  wait
  echo "workload done at $(up) s"
  poweroff -f
fi
echo "workload start at $(up) s: $(nproc) CPUs"
for r in 1 2 3; do
  dd if=/dev/urandom bs=64k count=32 2>/dev/null | md5sum > /tmp/md5.$r &
  dd if=/dev/urandom of=/tmp/data bs=64k count=32 2>/dev/null
  gzip -c /tmp/data > /tmp/data.gz
  gunzip -c /tmp/data.gz | cmp - /tmp/data || echo "round $r: gzip round trip differs"
  wait
  echo "round $r at $(up) s: $(cat /tmp/md5.$r)"
done
echo "workload done at $(up) s"
poweroff -f
INIT
chmod 755 "$stage/init"
# Tests may build it concurrently: a temporary file of our own, renamed into place.
tmp="$(mktemp "$out.XXXXXX")"
(cd "$stage" && find . | LC_ALL=C sort | cpio -o -H newc --owner=0:0 --quiet) | gzip -9n >"$tmp"
chmod 644 "$tmp"
mv -f "$tmp" "$out"
echo "$out"
