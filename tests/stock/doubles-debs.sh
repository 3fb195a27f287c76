#!/bin/bash
# The doubles as the packages whose modules they stand for (tests/fakes/INTERFACE.md):
#   nvidia-kernel-dkms     as Debian's (non-free): the fake nvidia.ko registered with DKMS as
#                          nvidia-current, built as nvidia and installed as
#                          updates/dkms/nvidia-current.ko (module name still nvidia), reached by
#                          modprobe through the install line of
#                          /etc/nvidia/current/nvidia-modprobe.conf;
#   mlnx-ofed-kernel-dkms  as MLNX_OFED's: the fake ib_core.ko registered as mlnx-ofed-kernel,
#                          its Module.symvers in /usr/src/ofa_kernel/<arch>/<kernel>/.
# Both have the maintainer scripts dh_dkms writes: configure runs DKMS's common.postinst
# (add, then build and install for the kernels), prerm runs "dkms remove --all".
# usage: doubles-debs.sh OUTDIR   prints the .deb paths: nvidia's, MLNX_OFED's, the broken driver's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
rm -rf "$out"
mkdir -p "$out"

# deb PACKAGE DKMS-NAME DKMS-VERSION FAKE-DIR DESCRIPTION: the package's tree in $out/PACKAGE
deb() {
	local pkg=$1 name=$2 ver=$3 fake=$4 desc=$5 d=$out/$1
	mkdir -p "$d/DEBIAN" "$d/usr/src/$name-$ver"
	cp -r "$top/tests/fakes/$fake/." "$d/usr/src/$name-$ver/"
	cat >"$d/DEBIAN/control" <<EOF
Package: $pkg
Version: $ver-1
Architecture: all
Maintainer: nv_peer_mem in Rust tests <tests@invalid>
Depends: dkms
Section: kernel
Priority: optional
Description: $desc
 A test double of nv_peer_mem in Rust (tests/fakes/INTERFACE.md), packaged
 the way the package of the same name registers its module with DKMS.
EOF
	cat >"$d/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
	/usr/lib/dkms/common.postinst $name $ver "" "" "\$2"
fi
EOF
	cat >"$d/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
case "\$1" in
remove | upgrade | deconfigure) dkms remove -m $name -v $ver --all >/dev/null 2>&1 || true ;;
esac
EOF
	chmod 755 "$d/DEBIAN/postinst" "$d/DEBIAN/prerm"
}

# pack PACKAGE NAME: $out/NAME.deb from the tree deb() made, which goes
pack() {
	dpkg-deb --root-owner-group -Zxz -b "$out/$1" "$out/$2.deb" >/dev/null
	rm -rf "${out:?}/$1"
	echo "$out/$2.deb"
}
ver() { sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$here/dkms/$1.conf"; }

nv_ver=$(ver nvidia-current)
deb nvidia-kernel-dkms nvidia-current "$nv_ver" nvidia "NVIDIA driver kernel module (test double, as Debian's nvidia-current)"
cp "$here/dkms/nvidia-current.conf" "$out/nvidia-kernel-dkms/usr/src/nvidia-current-$nv_ver/dkms.conf"
mkdir -p "$out/nvidia-kernel-dkms/etc/nvidia/current" "$out/nvidia-kernel-dkms/etc/modprobe.d"
echo 'install nvidia modprobe -i nvidia-current $CMDLINE_OPTS' \
	>"$out/nvidia-kernel-dkms/etc/nvidia/current/nvidia-modprobe.conf"
# Debian links it through the alternatives system (nvidia-alternative); a plain link here.
ln -s /etc/nvidia/current/nvidia-modprobe.conf "$out/nvidia-kernel-dkms/etc/modprobe.d/nvidia.conf"
echo /etc/nvidia/current/nvidia-modprobe.conf >"$out/nvidia-kernel-dkms/DEBIAN/conffiles"
pack nvidia-kernel-dkms nvidia-kernel-dkms_double_all

of_ver=$(ver mlnx-ofed-kernel)
deb mlnx-ofed-kernel-dkms mlnx-ofed-kernel "$of_ver" ib_core "MLNX_OFED kernel modules (test double of ib_core with PeerDirect)"
cp "$here/dkms/mlnx-ofed-kernel.conf" "$out/mlnx-ofed-kernel-dkms/usr/src/mlnx-ofed-kernel-$of_ver/dkms.conf"
pack mlnx-ofed-kernel-dkms mlnx-ofed-kernel-dkms_double_all

# A driver whose own DKMS build fails for the kernel, as Debian's 550.163.01 does on 7.3
# (../shared/REFERENCE.md §7): its configure fails, with the compiler's error in make.log.
bad_ver=$(ver nvidia-current-broken)
deb nvidia-kernel-dkms nvidia-current "$bad_ver" nvidia "NVIDIA driver kernel module (test double that does not build)"
cp "$here/dkms/nvidia-current-broken.conf" "$out/nvidia-kernel-dkms/usr/src/nvidia-current-$bad_ver/dkms.conf"
pack nvidia-kernel-dkms nvidia-kernel-dkms_broken_all
