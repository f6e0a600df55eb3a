#!/bin/sh
# Rebuilds tiny.elf, the aggregator tests' small i386 ELF with DWARF (inlined functions).
set -eu
cd "$(dirname "$0")"
gcc -m32 -g -O2 -fno-omit-frame-pointer -ffreestanding -fno-pic -fno-asynchronous-unwind-tables \
    -nostdlib -static -Wl,--build-id=none -Wl,-Ttext=0xc0100000 -o tiny.elf tiny.c
