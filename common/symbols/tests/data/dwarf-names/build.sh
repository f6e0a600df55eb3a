#!/bin/sh
# Rebuilds names.elf, the symbols tests' x86_64 ELF whose functions have linkage names in no
# mangling scheme (asm labels) and DWARF names in a namespace, a structure and at file scope.
# -fdebug-prefix-map: DWARF names no checkout.
set -eu
cd "$(dirname "$0")"
g++ -g -O1 -fno-inline -ffreestanding -fno-pic -fno-asynchronous-unwind-tables -fno-exceptions \
    -nostdlib -static -Wl,--build-id=none -Wl,-Ttext=0x200000 \
    -fdebug-prefix-map="$PWD"=. -o names.elf names.cc
