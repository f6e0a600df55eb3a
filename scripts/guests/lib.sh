# Shared by scripts/guests/build-kernel*.sh and run-kernel.sh, after scripts/lib.sh:
# `. "$KP_ROOT/scripts/guests/lib.sh"`.

# check_numbers VALUE...: every VALUE is empty or a decimal number.
check_numbers() {
    local v
    for v in "$@"; do
        [ -z "$v" ] || [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a number"
    done
}

# arch_arg ARG...: the value of --arch among a script's arguments (default i386).
arch_arg() {
    local arch=i386
    while [ $# -gt 0 ]; do
        case "$1" in
            --arch) need "$@"; arch="$2"; shift 2 ;;
            *) shift ;;
        esac
    done
    printf '%s\n' "$arch"
}

# print_cmd DRY CMD...: prints CMD shell-quoted on one line (DRY = 1) or each argument ended
# by a NUL byte (DRY = nul, for programs), and exits 0.
print_cmd() {
    local dry="$1"
    shift
    if [ "$dry" = nul ]; then
        printf '%s\0' "$@"
    else
        printf '%q ' "$@"
        printf '\n'
    fi
    exit 0
}

# build_args ARG...: a build script's arguments; --force sets force=1, --no-frame-pointers
# nofp=1 (--arch A, read by arch_arg, is skipped).
build_args() {
    force=0
    nofp=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --force) force=1; shift ;;
            --no-frame-pointers) nofp=1; shift ;;
            --arch) need "$@"; shift 2 ;;
            -h|--help) usage; exit 0 ;;
            *) die "unknown argument '$1' (see --help)" ;;
        esac
    done
}

# is_stale STAMP WANT OUTPUT... -- SOURCE...: succeeds when $force is 1, an OUTPUT is
# missing, STAMP does not hold WANT (flags, compiler), or a SOURCE (file or directory tree)
# is newer than the first OUTPUT.
is_stale() {
    local stamp="$1" want="$2" elf="$3"
    shift 2
    local outputs=()
    while [ "$1" != -- ]; do outputs+=("$1"); shift; done
    shift
    [ "$force" = 1 ] && return 0
    local f
    for f in "${outputs[@]}"; do [ -f "$f" ] || return 0; done
    [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && return 0
    [ -n "$(find "$@" -newer "$elf" -print -quit)" ]
}

# run_kernel DRY COM1 TIMEOUT SUCCESS PORT EXCEPTION CMD...: prints CMD (DRY = 1 or nul:
# print_cmd) or runs it, with stdin from /dev/null when COM1 is stdio ("-": keeps QEMU off the
# terminal's input), and exits with the run script's status for QEMU's: 0 for SUCCESS (33:
# isa-debug-exit; 0: the virt boards' exit), 1 for 35 (panic) and 37 (CPU exception:
# EXCEPTION says what the kernel did; PORT is where it wrote why), 2 for anything else (a
# message on stderr).
run_kernel() {
    local dry="$1" com1="$2" timeout_s="$3" success="$4" port="$5" exception="$6" status
    shift 6
    [ "$dry" = 0 ] || print_cmd "$dry" "$@"
    set +e
    if [ "$com1" = "-" ]; then
        "$@" </dev/null
    else
        "$@"
    fi
    status=$?
    set -e
    case "$status" in
        "$success") exit 0 ;;
        35) say "the kernel panicked (QEMU exit status 35; message on $port)"; exit 1 ;;
        37) say "the kernel $exception (QEMU exit status 37; details on $port)"; exit 1 ;;
        0) say "QEMU stopped without the kernel writing to isa-debug-exit (triple fault?)"; exit 2 ;;
        124) say "timed out after ${timeout_s}s"; exit 2 ;;
        *) say "QEMU failed with exit status $status"; exit 2 ;;
    esac
}
