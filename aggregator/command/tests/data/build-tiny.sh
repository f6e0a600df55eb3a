#!/bin/sh
# Rebuilds tiny.elf, the aggregator tests' small i386 ELF with DWARF (inlined functions).
# -fdebug-prefix-map: DWARF names the source relative to this directory, so goldens with
# --lines do not hold the path of the checkout that built it.
set -eu
cd "$(dirname "$0")"
gcc -m32 -g -O2 -fno-omit-frame-pointer -ffreestanding -fno-pic -fno-asynchronous-unwind-tables \
    -nostdlib -static -Wl,--build-id=none -Wl,-Ttext=0xc0100000 \
    -fdebug-prefix-map="$PWD"=. -o tiny.elf tiny.c
