# shellcheck shell=bash
# Tools/lib/setup.sh: shared set-up for Tools/test and Tools/demo (sourced, not run).
# Provides `say`, `die` and `install_packages [1|0]`, which installs the Debian packages Nearby's
# lab and builds need when they are missing (as root), or fails saying which are missing.

say() { printf '\n==> %s\n' "$*"; }
die() { echo "${0##*/}: $*" >&2; exit 1; }

# prometheus for its promtool, which checks the metrics endpoint's exposition in Tests/LabTests
# (scraped with curl); its server is never started (service starts are forbidden below).
apt_packages=(libavahi-compat-libdnssd1 libssl-dev libqrencode-dev zbar-tools openssl man-db avahi-daemon avahi-utils dbus iproute2 iptables tcpdump
  bind9 bind9-utils bind9-dnsutils curl prometheus)

install_packages() {
  local install="${1:-1}" missing=() package
  for package in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then missing+=(python3-venv); fi
  ((${#missing[@]})) || return 0
  ((install)) || die "missing packages: ${missing[*]} (run without --no-install, as root)"
  [[ "$(id -u)" == 0 ]] || die "missing packages: ${missing[*]}; run ${0##*/} as root to install them"
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

