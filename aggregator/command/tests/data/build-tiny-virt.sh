#!/bin/sh
# Rebuilds tiny-riscv64.elf (from tiny-riscv64.s, with .eh_frame) and tiny-riscv64-nocfi.elf
# (the same without it), the aggregator tests' riscv64 ELFs; binutils-riscv64-linux-gnu.
set -eu
cd "$(dirname "$0")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
riscv64-linux-gnu-as -march=rv64gc -o "$tmp/tiny.o" tiny-riscv64.s
riscv64-linux-gnu-ld -static -nostdlib --build-id=none -Ttext=0x80000000 -o tiny-riscv64.elf "$tmp/tiny.o"
riscv64-linux-gnu-objcopy --remove-section .eh_frame tiny-riscv64.elf tiny-riscv64-nocfi.elf
