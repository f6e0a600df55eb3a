#!/bin/sh
# Rebuilds kernel.elf, the symbols tests' FreePascal program (x86_64, DWARF): FreePascal 3.2.2
# (Debian 12's fp-compiler). Its units are compiled without the RTL linked in (-Cn) and
# linked by ld alone: the calls into the RTL stay unresolved (the ELF never runs), which keeps
# it a few KiB. Built in a fixed directory, so DWARF's comp_dir names no checkout.
# crunch.pas exports TICK under `crunch$tick`, a name in no mangling scheme; its mangled
# alias is removed so that the symbol table names it by that name only (the DWARF fallback).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=/tmp/kern-profile-fpc
rm -rf "$work" && mkdir -p "$work" && cp "$here/crunch.pas" "$here/kernel.pas" "$work"
cd "$work"
fpc -g -O1 -Cn kernel.pas
ld -static -nostdlib -e main --unresolved-symbols=ignore-all -z noexecstack \
    -Ttext=0x100000 --build-id=none -o kernel.elf kernel.o crunch.o
objcopy --strip-symbol='CRUNCH_$$_TICK$LONGINT$$LONGINT' kernel.elf
cp kernel.elf "$here/kernel.elf"
