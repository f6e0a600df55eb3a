# The installing helpers of scripts/setup.sh and scripts/setup/*.sh, after scripts/lib.sh:
# `. "$KP_ROOT/scripts/setup/lib.sh"`. Each script installs only what is missing, with apt on
# Debian 12 (bookworm).

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# no_arguments "$@": the calling script takes none but -h/--help, which prints its help.
no_arguments() {
    local a
    for a in "$@"; do
        case "$a" in
            -h|--help) usage; exit 0 ;;
            *) die "unknown argument '$a' (see --help)" ;;
        esac
    done
}

# check_root_dir VAR DIR: DIR, from the environment variable VAR, is an absolute path other
# than / (the scripts make, and may remove, a tree there).
check_root_dir() {
    case "$2" in
        /*) ;;
        *) die "$1 must be an absolute path (got '$2')" ;;
    esac
    [ "$2" != / ] || die "$1 must not be /"
}

# need_debian12 HINT: dies unless this is Debian 12, saying HINT (what to install by hand).
need_debian12() {
    . /etc/os-release 2>/dev/null || die "cannot read /etc/os-release: unsupported system"
    if [ "${ID:-}" != debian ] || [ "${VERSION_CODENAME:-}" != bookworm ]; then
        die "this script supports Debian 12 (bookworm); found '${PRETTY_NAME:-unknown}'. $1"
    fi
}

# apt-get update, once per script (set apt_updated=0 after adding a source or an architecture).
apt_updated=0
apt_update() {
    [ "$apt_updated" = 0 ] || return 0
    say "apt-get update"
    # Mirrors are sometimes mid-sync: try again before giving up.
    local try log
    for try in 1 2 3; do
        log="$($SUDO apt-get update -qq 2>&1 || true)"
        [ -z "$log" ] || printf '%s\n' "$log" >&2
        if grep -q '^E:' <<<"$log"; then
            say "apt-get update reported errors (try $try of 3)"
            sleep 5
        else
            apt_updated=1
            return
        fi
    done
    say "warning: apt-get update kept reporting errors; going on with the indexes it has"
    apt_updated=1
}

# apt_install [APT-GET OPTIONS] PACKAGE...: installs quietly, without recommends.
apt_install() {
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Adds the bookworm-backports apt source (QEMU >= min_version of qemu-version.txt) when
# no source names it.
add_backports() {
    grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
    say "adding the bookworm-backports apt source"
    $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_updated=0
}

# enable_arch DEB_ARCH: lets apt download packages of that dpkg architecture.
enable_arch() {
    [ "$1" != "$(dpkg --print-architecture)" ] || return 0
    dpkg --print-foreign-architectures | grep -qx "$1" && return 0
    say "enabling the $1 architecture (to download its packages)"
    $SUDO dpkg --add-architecture "$1"
    apt_updated=0
}

# write_wrappers BIN "PROGS": the wrapper of each program in BIN, from the calling script's
# `wrapper_text PROG`; rewrites only those whose text changed, atomically.
write_wrappers() {
    local bin="$1" progs="$2" p f changed=0
    $SUDO mkdir -p "$bin"
    for p in $progs; do
        f="$bin/$p"
        if [ -x "$f" ] && [ "$(cat "$f")" = "$(wrapper_text "$p")" ]; then
            continue
        fi
        wrapper_text "$p" | $SUDO tee "$f.tmp" >/dev/null
        $SUDO chmod 0755 "$f.tmp"
        $SUDO mv "$f.tmp" "$f"
        changed=1
    done
    if [ "$changed" = 1 ]; then
        say "wrote the wrappers $bin/{${progs// /,}}"
    else
        say "wrappers already in place: $bin"
    fi
}
