# shellcheck shell=bash
# Tools/lib/setup.sh: shared set-up for Tools/test, Tools/demo and Tools/install (sourced, not
# run). Provides `say`, `die` and `install_packages`, which installs the Debian packages Nearby
# needs when they are missing (as root), or fails naming them and the command that installs them.

say() { printf '\n==> %s\n' "$*"; }
die() { echo "${0##*/}: $*" >&2; exit 1; }

# The Debian packages, by what needs them (one list; each tool takes the groups it needs).
# To build nearby: the headers of Package.swift's two system libraries, COpenSSL (pkg-config
# openssl) and CQREncode (libqrencode). The Swift toolchain's own prerequisites (pkg-config,
# libc6-dev, …) come with Swift.
build_packages=(libssl-dev libqrencode-dev)
# To run it: the system backend opens avahi's libdns_sd.so.1 with dlopen (without it, nearby
# uses its embedded engine; nothing is linked against it, so no -dev package is needed).
runtime_packages=(libavahi-compat-libdnssd1)
# For the lab, the tests and the demo: avahi-daemon, BIND and the tools they drive; man-db for
# the installer's check (man -l), zbar-tools to read back the QR codes nearby draws; curl and
# prometheus for its promtool, which checks the metrics endpoint's exposition in Tests/LabTests
# (its server is never started: service starts are forbidden below).
lab_packages=(zbar-tools openssl man-db avahi-daemon avahi-utils dbus iproute2 iptables tcpdump bind9 bind9-utils bind9-dnsutils curl prometheus)
apt_packages=("${build_packages[@]}" "${runtime_packages[@]}" "${lab_packages[@]}")

# missing_packages PACKAGE...: prints those of the packages that are not installed, one line.
missing_packages() {
  local package missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  echo "${missing[*]}"
}

# install_packages [1|0] [PACKAGE...]: the packages given (default: all of apt_packages, and
# python3-venv unless python3 has venv and ensurepip), installed when missing. With 1 (the
# default) and as root, apt-get installs them; otherwise it dies naming them, with the command
# that installs them, before anything else runs.
install_packages() {
  local install="${1:-1}" command="Tools/${0##*/}"
  if (($#)); then shift; fi
  local wanted=("$@")
  ((${#wanted[@]})) || wanted=("${apt_packages[@]}")
  if ! command -v dpkg-query >/dev/null; then
    echo "${0##*/}: warning: not a Debian system (no dpkg-query): cannot check for ${wanted[*]}; the build needs the headers of OpenSSL and libqrencode" >&2
    return 0
  fi
  local missing=()
  read -r -a missing <<<"$(missing_packages "${wanted[@]}")"
  if (($# == 0)) && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then missing+=(python3-venv); fi
  ((${#missing[@]})) || return 0
  local how="sudo apt-get install ${missing[*]}"
  ((install)) || die "missing Debian packages: ${missing[*]}; install them ($how), or run $command as root without --no-install"
  if [[ "$(id -u)" != 0 ]]; then
    die "missing Debian packages: ${missing[*]}
  Install them with: $how
  (or run $command as root, which installs them; without root, ask whoever administers this machine), then run $command again."
  fi
  say "installing ${missing[*]}"
  # Installing avahi-daemon must not start it in the root namespace, where it would talk to
  # the real network (nor bind9's named, which the lab runs in its own namespaces only, nor
  # the Prometheus server, of which only promtool is used):
  # forbid service starts while apt runs, unless a policy already exists.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && added_policy=1
  fi
  local status=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } ||
    status=$?
  if ((added_policy)); then rm -f "$policy"; fi
  ((status == 0)) || die "apt-get install ${missing[*]} failed"
}
