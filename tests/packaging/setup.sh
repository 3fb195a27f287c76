#!/bin/bash
# Install what building and checking the nv_peer_mem packages needs on Debian 12 (Debian's
# own packages only). Idempotent and quiet when everything is there already.
set -euo pipefail

# dpkg-dev, debhelper, dh-dkms: dpkg-buildpackage; build-essential: dpkg-checkbuilddeps wants it
# for binary builds; rpm: rpmbuild; lintian, rpmlint: the package checks; debootstrap: the
# throwaway root of deb-lifecycle.sh; dkms: the packaged module source is registered with it;
# systemd: systemd-analyze verify of the unit.
APT_PKGS=(dpkg-dev debhelper dh-dkms build-essential fakeroot rpm rpmlint lintian debootstrap
	dkms git xz-utils systemd)

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "[setup.sh] installing: ${missing[*]}" >&2
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >/dev/null
fi
