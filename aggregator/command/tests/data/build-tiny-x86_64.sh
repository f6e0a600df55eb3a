#!/bin/sh
# Rebuilds tiny-x86_64.elf: tiny.c as a 64-bit x86_64 ELF with DWARF and .eh_frame, which the
# tests of ELFs marked EM_386 but 64-bit (Asterinas' OSDK's kernels) re-mark in a copy.
set -eu
cd "$(dirname "$0")"
gcc -m64 -g -O2 -fno-omit-frame-pointer -ffreestanding -fno-pic -no-pie -fasynchronous-unwind-tables \
    -nostdlib -static -Wl,--build-id=none -Wl,-Ttext=0xffffffff80100000 \
    -fdebug-prefix-map="$PWD"=. -o tiny-x86_64.elf tiny.c
