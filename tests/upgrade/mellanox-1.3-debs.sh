#!/bin/bash
# A double of Mellanox's nv_peer_mem 1.3 Debian packages (nvidia-peer-memory and
# nvidia-peer-memory-dkms, version 1.3-0), written here from what those packages are known to
# hold and do (Documentation/install.md, "Upgrading from Mellanox's 1.3"), none of their text:
#   nvidia-peer-memory       /etc/infiniband/nv_peer_mem.conf (ONBOOT=yes), /etc/init.d/nv_peer_mem
#                            and the upstart job /etc/init/nv_peer_mem.conf, all three conffiles;
#                            postinst: update-rc.d nv_peer_mem defaults; prerm: update-rc.d -f
#                            nv_peer_mem remove (on every action, the upgrade included);
#   nvidia-peer-memory-dkms  Depends: dkms, make, mlnx-ofed-kernel-dkms | mlnx-ofed-kernel-modules;
#                            the source in /usr/src/nv_peer_mem-1.3 with its dkms.conf (module
#                            nv_peer_mem/1.3, BUILD_DEPENDS mlnx-ofed-kernel, installed under
#                            updates/); dh_dkms's configure and prerm (dkms remove --all); then
#                            its postinst unloads the module if loaded and loads it again.
# The module is a trivial C module named nv_peer_mem, version 1.3, that DKMS builds in seconds.
# The reload touches only a kernel that has the module (modinfo finds it): in a chroot, the host's
# kernel has none, so nothing is unloaded or loaded there.
# usage: mellanox-1.3-debs.sh OUTDIR   prints the .deb paths: the service's, the DKMS source's,
#   and a DKMS source package whose postinst fails after DKMS has built the module (its modprobe,
#   unguarded, fails in a chroot): the old package left half-configured.
set -euo pipefail
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
rm -rf "$out"
mkdir -p "$out"
ver=1.3
control() { # control DIR PACKAGE DEPENDS DESCRIPTION
	mkdir -p "$1/DEBIAN"
	cat >"$1/DEBIAN/control" <<EOF
Package: $2
Version: $ver-0
Architecture: all
Maintainer: nv_peer_mem in Rust tests <tests@invalid>
Depends: $3
Section: kernel
Priority: optional
Description: $4
 A test double of Mellanox's package of the same name and version, written from
 its file list and maintainer scripts' effects (tests/upgrade/).
EOF
}
pack() { # pack DIR NAME
	dpkg-deb --root-owner-group -Zxz -b "$1" "$out/$2.deb" >/dev/null
	rm -rf "$1"
	echo "$out/$2.deb"
}

# --- nvidia-peer-memory: the configuration, the init script, the upstart job -----------------
d=$out/service
control "$d" nvidia-peer-memory "" "nv_peer_mem service files (test double of 1.3)"
mkdir -p "$d/etc/infiniband" "$d/etc/init.d" "$d/etc/init"
printf '# nv_peer_mem 1.3 (test double): load the module at boot\nONBOOT=yes\n' \
	>"$d/etc/infiniband/nv_peer_mem.conf"
cat >"$d/etc/init.d/nv_peer_mem" <<'EOF'
#!/bin/sh
### BEGIN INIT INFO
# Provides:          nv_peer_mem
# Required-Start:    openibd
# Required-Stop:
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: nv_peer_mem 1.3 (test double)
### END INIT INFO
# The 1.3 double's service: modprobe at start when ONBOOT=yes, modprobe -r at stop.
[ -r /etc/infiniband/nv_peer_mem.conf ] && . /etc/infiniband/nv_peer_mem.conf
case "$1" in
start) [ "${ONBOOT:-yes}" = yes ] && modprobe nv_peer_mem ;;
stop) modprobe -r nv_peer_mem ;;
restart) modprobe -r nv_peer_mem; modprobe nv_peer_mem ;;
status) [ -d /sys/module/nv_peer_mem ] && echo "nv_peer_mem loaded" || { echo "nv_peer_mem not loaded"; exit 3; } ;;
*) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
EOF
chmod 755 "$d/etc/init.d/nv_peer_mem"
cat >"$d/etc/init/nv_peer_mem.conf" <<'EOF'
# upstart job of the nv_peer_mem 1.3 double: the init script, once the RDMA stack is up
description "nv_peer_mem 1.3 (test double)"
start on (startup and started openibd)
stop on runlevel [!2345]
pre-start exec /etc/init.d/nv_peer_mem start
post-stop exec /etc/init.d/nv_peer_mem stop
EOF
printf '%s\n' /etc/infiniband/nv_peer_mem.conf /etc/init.d/nv_peer_mem /etc/init/nv_peer_mem.conf \
	>"$d/DEBIAN/conffiles"
printf '#!/bin/sh\nupdate-rc.d nv_peer_mem defaults >/dev/null 2>&1\nexit 0\n' >"$d/DEBIAN/postinst"
printf '#!/bin/sh\nupdate-rc.d -f nv_peer_mem remove >/dev/null 2>&1\nexit 0\n' >"$d/DEBIAN/prerm"
chmod 755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
pack "$d" nvidia-peer-memory_1.3-0_all

# --- nvidia-peer-memory-dkms: the module source for DKMS ----------------------------------
dkms_deb() { # dkms_deb DIR RELOAD-SCRIPT
	local d=$1 src=$1/usr/src/nv_peer_mem-$ver
	control "$d" nvidia-peer-memory-dkms "dkms, make, mlnx-ofed-kernel-dkms | mlnx-ofed-kernel-modules" \
		"nv_peer_mem module source for DKMS (test double of 1.3)"
	mkdir -p "$src"
	cat >"$src/nv_peer_mem.c" <<'EOF'
// SPDX-License-Identifier: GPL-2.0
/* The nv_peer_mem 1.3 double: a module of that name and version that does nothing. */
#include <linux/module.h>
static int __init nvpm13_init(void) { return 0; }
static void __exit nvpm13_exit(void) { }
module_init(nvpm13_init);
module_exit(nvpm13_exit);
MODULE_LICENSE("GPL");
MODULE_VERSION("1.3");
MODULE_DESCRIPTION("nv_peer_mem 1.3 test double");
EOF
	printf 'obj-m := nv_peer_mem.o\nall:\n\t$(MAKE) -C $(KDIR) M=$(CURDIR) modules\nclean:\n\t$(MAKE) -C $(KDIR) M=$(CURDIR) clean\n' \
		>"$src/Makefile"
	cat >"$src/dkms.conf" <<'EOF'
PACKAGE_NAME="nv_peer_mem"
PACKAGE_VERSION="1.3"
BUILT_MODULE_NAME[0]="nv_peer_mem"
BUILT_MODULE_LOCATION[0]="./"
DEST_MODULE_LOCATION[0]="/kernel/../updates/"
BUILD_DEPENDS[0]="mlnx-ofed-kernel"
MAKE="make all KVER=$kernelver KDIR=$kernel_source_dir"
CLEAN="make clean KDIR=$kernel_source_dir"
AUTOINSTALL="yes"
EOF
	{
		printf '#!/bin/sh\nset -e\n'
		printf 'if [ "$1" = configure ]; then\n\t/usr/lib/dkms/common.postinst nv_peer_mem %s "" "" "$2"\nfi\n' "$ver"
		printf '%s\n' "$2"
		printf 'exit 0\n'
	} >"$d/DEBIAN/postinst"
	cat >"$d/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
case "\$1" in
remove | upgrade | deconfigure) dkms remove -m nv_peer_mem -v $ver --all >/dev/null 2>&1 || true ;;
esac
EOF
	chmod 755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
}
dkms_deb "$out/dkms" 'if modinfo -n nv_peer_mem >/dev/null 2>&1; then
	[ ! -d /sys/module/nv_peer_mem ] || rmmod nv_peer_mem 2>/dev/null || :
	modprobe nv_peer_mem
fi'
pack "$out/dkms" nvidia-peer-memory-dkms_1.3-0_all
dkms_deb "$out/dkms-half" 'modprobe nv_peer_mem'
pack "$out/dkms-half" nvidia-peer-memory-dkms_1.3-0-postinst-fails_all
