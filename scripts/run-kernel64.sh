#!/usr/bin/env bash
# Boots the x86_64 example guest kernel (examples/kernel64) in qemu-system-x86_64 (TCG):
# `scripts/run-kernel.sh --arch x86_64 ARGS...` (see its --help).
exec "$(dirname "$0")/run-kernel.sh" --arch x86_64 "$@"
