#!/bin/bash
# Build the source packages of nv_peer_mem and say how to turn them into installed packages:
# the orig tarball for dpkg-buildpackage (Debian, Ubuntu) or a src.rpm (RHEL, SLES, Fedora).
# They hold the source files of this tree (those git tracks, no build artefacts, no tests).
set -euo pipefail

usage() {
	cat <<USAGE
usage: ${0##*/} [--deb | --rpm | --both] [--outdir DIR]
  --deb         build the Debian source tarball (default on Debian-like hosts)
  --rpm         build the src.rpm (default on RPM-based hosts)
  --both        build both
  --outdir DIR  where to put them (default /tmp)
USAGE
}
die() {
	echo "build_module.sh: $*" >&2
	exit 1
}

top=$(cd "$(dirname "$0")/.." && pwd)
outdir=/tmp
mode=
while (($#)); do
	case $1 in
	--deb | --rpm | --both) mode=${1#--} ;;
	--outdir)
		(($# >= 2)) || die "--outdir needs a directory"
		outdir=$2
		shift
		;;
	--outdir=*) outdir=${1#*=} ;;
	-h | --help)
		usage
		exit 0
		;;
	*)
		usage >&2
		die "unknown argument '$1'"
		;;
	esac
	shift
done

if [ -z "$mode" ]; then
	# shellcheck disable=SC1091 # the host's file, not the repo's
	like=$(. /etc/os-release 2>/dev/null && echo "${ID:-} ${ID_LIKE:-}")
	case " $like " in
	*" debian "* | *" ubuntu "*) mode=deb ;;
	*" rhel "* | *" fedora "* | *" suse "* | *" centos "*) mode=rpm ;;
	*)
		if command -v dpkg >/dev/null; then
			mode=deb
		elif command -v rpmbuild >/dev/null; then
			mode=rpm
		else
			die "cannot tell whether this is a Debian or an RPM host; pass --deb or --rpm"
		fi
		;;
	esac
fi

version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
[ -n "$version" ] || die "no PACKAGE_VERSION in $top/dkms.conf"
mkdir -p "$outdir" || die "cannot create $outdir"
outdir=$(cd "$outdir" && pwd)
for tool in tar gzip; do
	command -v $tool >/dev/null || die "$tool not found; install it first"
done
if [ "$mode" != deb ] && ! command -v rpmbuild >/dev/null; then
	die "rpmbuild not found; install the rpm-build package (on Debian and Ubuntu: rpm)"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The shipped files: what git tracks (plus new files that are not ignored, so that uncommitted
# work is packed too), or outside a git checkout the source directories minus build leftovers.
source_files() {
	if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git -C "$top" ls-files -co --exclude-standard
	else
		(cd "$top" && find dkms.conf Makefile Kbuild README.md Documentation src scripts packaging \
			-type f ! -name '*.o' ! -name '*.ko' ! -name '*.cmd' ! -name '*.mod*' ! -name '*.d' \
			! -name '*.rmeta' ! -name Module.symvers ! -name modules.order ! -name nv.symvers)
	fi | while IFS= read -r f; do
		case $f in tests/* | .*) continue ;; esac
		[ -f "$top/$f" ] && printf '%s\n' "$f"
	done | LC_ALL=C sort
}

# stage DIR: copy the shipped files into WORK/DIR.
stage() {
	mkdir -p "$work/$1"
	source_files | (cd "$top" && xargs -d '\n' cp --parents -p -t "$work/$1")
}

# pack DIR TARBALL: a reproducible tarball of WORK/DIR (the same tree gives the same bytes).
pack() {
	local epoch
	epoch=$(git -C "$top" log -1 --format=%ct 2>/dev/null || stat -c %Y "$top/dkms.conf")
	(cd "$work" && tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
		--mode='u+rw,go+r,go-w' -cf - "$1") | gzip -n -9 >"$2"
}

if [ "$mode" = deb ] || [ "$mode" = both ]; then
	echo "Building debian tarball for nvidia-peer-memory..."
	dir=nvidia-peer-memory-$version
	stage "$dir"
	cp -pr "$top/packaging/debian" "$work/$dir/debian"
	tarball=$outdir/nvidia-peer-memory_$version.orig.tar.gz
	pack "$dir" "$tarball"
	echo "Built: $tarball"
	cat <<HOWTO
To build and install the packages on Debian or Ubuntu (as root):
  cd $outdir
  tar xzf $tarball
  cd $dir
  dpkg-buildpackage -us -uc
  dpkg -i $outdir/nvidia-peer-memory_$version-*_all.deb $outdir/nvidia-peer-memory-dkms_$version-*_all.deb
HOWTO
fi

if [ "$mode" = rpm ] || [ "$mode" = both ]; then
	echo "Building source rpm for nvidia_peer_memory..."
	dir=nvidia_peer_memory-$version
	stage "$dir"
	mkdir -p "$work/rpm"
	pack "$dir" "$work/rpm/$dir.tar.gz"
	if ! rpmbuild -bs --define "_topdir $work/rpm" --define "_sourcedir $work/rpm" \
		--define "_srcrpmdir $outdir" "$top/packaging/rpm/nvidia_peer_memory.spec" \
		>"$work/rpmbuild.log" 2>&1; then
		cat "$work/rpmbuild.log" >&2
		die "rpmbuild -bs failed (output above)"
	fi
	srpm=$(sed -n 's/^Wrote: //p' "$work/rpmbuild.log" | tail -n 1)
	[ -f "$srpm" ] || die "rpmbuild wrote no src.rpm"
	echo "Built: $srpm"
	cat <<HOWTO
To build and install the package on RHEL, SLES or Fedora (as root):
  rpmbuild --rebuild $srpm
  rpm -ivh \$(rpm --eval %{_rpmdir})/noarch/nvidia_peer_memory-$version-*.noarch.rpm
HOWTO
fi
