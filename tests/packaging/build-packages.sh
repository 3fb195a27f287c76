#!/bin/bash
# Build the .deb and .rpm packages from a clean tree as a user would (build_module.sh, then
# dpkg-buildpackage on the unpacked orig tarball, rpmbuild --rebuild of the src.rpm), check
# their file lists, conffiles and scriptlets, run lintian and rpmlint, and check that every
# place holding the version agrees.
# usage: build-packages.sh OUTDIR
# Results: OUTDIR/deb/ (.deb, .dsc, .changes, ...), OUTDIR/rpm/ (.noarch.rpm, .src.rpm).
# Prints one "PASS packaging:<check>" or "FAIL packaging:<check>: <detail>" line per check;
# everything else goes to OUTDIR/build-packages.log. Exits non-zero if a check failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
log=$out/build-packages.log
: >"$log"
failed=0
result() { # result PASS|FAIL check [detail]
	echo "$1 packaging:$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}
# First line of a text, for details that must stay on one line.
oneline() { head -n 1 | tr -d '\r'; }

if ! "$here/setup.sh" >>"$log" 2>&1; then
	result FAIL setup "installing the packaging tools failed; see $log"
	exit 1
fi

version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dkms.conf")
rm -rf "$out/deb" "$out/rpm" "$out/src"
mkdir -p "$out/deb" "$out/rpm" "$out/src"
work=$(mktemp -d "$out/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The expected list NAME from tests/packaging, with @VERSION@ and @SRC@ (each file of src/)
# filled in, sorted.
expected() {
	local src
	src=$(cd "$top" && git ls-files -co --exclude-standard src 2>/dev/null | sed 's|^src/||' ||
		(cd "$top/src" && ls))
	sed "s/@VERSION@/$version/g" "$here/$1" | while IFS= read -r line; do
		case $line in
		*@SRC@*) for f in $src; do echo "${line/@SRC@/$f}"; done ;;
		*) echo "$line" ;;
		esac
	done | LC_ALL=C sort
}
# compare NAME EXPECTED ACTUAL: "" when equal, else a one-line summary of the difference.
compare() {
	local diff
	diff=$(diff <(echo "$2") <(echo "$3") | grep '^[<>]' | sed 's/^</missing/; s/^>/unexpected/' |
		paste -sd ';' || true)
	[ -z "$diff" ] || echo "$1: $diff"
}

# --- build_module.sh: names what it built and how to install it ---------------------------
orig=$out/src/nvidia-peer-memory_$version.orig.tar.gz
srpm_built=$out/src/nvidia_peer_memory-$version-1.src.rpm
if bm=$("$top/scripts/build_module.sh" --both --outdir "$out/src" 2>>"$log"); then
	echo "$bm" >>"$log"
	missing=
	for want in "Built: $orig" "Built: $srpm_built" "dpkg-buildpackage -us -uc" "rpmbuild --rebuild $srpm_built"; do
		grep -qF -- "$want" <<<"$bm" || missing+="'$want' "
	done
	if [ -z "$missing" ] && [ -f "$orig" ] && [ -f "$srpm_built" ]; then
		result PASS build-module
	else result FAIL build-module "output lacks ${missing:-nothing} or the files are not there"; fi
else
	result FAIL build-module "build_module.sh failed: $(tail -n 1 "$log")"
fi

# --- Debian: unpack the orig tarball and build source and binary packages -----------------
debdir=$work/debian-build
mkdir -p "$debdir"
deb_ok=0
if [ -f "$orig" ] && cp "$orig" "$debdir/" && tar -xzf "$orig" -C "$debdir" &&
	(cd "$debdir/nvidia-peer-memory-$version" && dpkg-buildpackage -us -uc) >>"$log" 2>&1; then
	rm -rf "$debdir/nvidia-peer-memory-$version"
	mv "$debdir"/* "$out/deb/"
	deb_ok=1
	result PASS deb-build
else
	result FAIL deb-build "dpkg-buildpackage failed; see $log"
fi

deb_rev=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$top/packaging/debian/changelog")
for pkg in nvidia-peer-memory nvidia-peer-memory-dkms; do
	deb=$out/deb/${pkg}_${deb_rev}_all.deb
	if [ $deb_ok = 0 ] || [ ! -f "$deb" ]; then
		result FAIL "deb-files:$pkg" "no $deb"
		continue
	fi
	got=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./||; /^$/d' | LC_ALL=C sort)
	d=$(compare "$pkg" "$(expected "$pkg.list")" "$got")
	if [ -z "$d" ]; then result PASS "deb-files:$pkg"; else result FAIL "deb-files:$pkg" "$d"; fi
done

deb=$out/deb/nvidia-peer-memory_${deb_rev}_all.deb
if [ -f "$deb" ] && dpkg-deb -e "$deb" "$work/ctrl"; then
	d=$(compare conffiles "$(expected nvidia-peer-memory.conffiles)" \
		"$(LC_ALL=C sort "$work/ctrl/conffiles" 2>/dev/null)")
	if [ -z "$d" ]; then result PASS deb-conffiles; else result FAIL deb-conffiles "$d"; fi
	# Enabled but never started or stopped by the maintainer scripts (no GPU, no MLNX_OFED).
	# The metrics timer loads nothing: removing the package stops it (dh_installsystemd).
	starts=$(cat "$work"/ctrl/*inst "$work"/ctrl/*rm 2>/dev/null |
		grep -E '(invoke-rc\.d|deb-systemd-invoke|systemctl).*(start|stop|restart)' |
		grep -v "stop 'nv_peer_mem-metrics.timer'" || true)
	if [ -n "$starts" ]; then result FAIL deb-no-start "maintainer scripts run: $(oneline <<<"$starts")"
	elif ! grep -q 'deb-systemd-helper enable' "$work/ctrl/postinst" ||
		! grep -q 'update-rc.d nv_peer_mem defaults' "$work/ctrl/postinst"; then
		result FAIL deb-no-start "postinst does not enable the service"
	else result PASS deb-no-start; fi
else
	result FAIL deb-conffiles "no $deb"
	result FAIL deb-no-start "no $deb"
fi

# The -dkms package follows the driver and MLNX_OFED: a trigger on /usr/src that runs
# scripts/dkms-follow.sh from its postinst (what the trigger does: the stock world's orders).
deb=$out/deb/nvidia-peer-memory-dkms_${deb_rev}_all.deb
if [ -f "$deb" ] && dpkg-deb -e "$deb" "$work/ctrl-dkms" &&
	grep -qx 'interest-noawait /usr/src' "$work/ctrl-dkms/triggers" &&
	grep -q 'triggered' "$work/ctrl-dkms/postinst" && grep -q 'dkms-follow.sh' "$work/ctrl-dkms/postinst"; then
	result PASS deb-trigger
else result FAIL deb-trigger "no /usr/src trigger running dkms-follow.sh in $deb"; fi

changes=$out/deb/nvidia-peer-memory_${deb_rev}_$(dpkg --print-architecture).changes
if [ -f "$changes" ]; then
	# Exit status 1 means tags at error level, 2 that lintian itself failed.
	rc=0
	lint=$(lintian --pedantic "$changes" 2>&1) || rc=$?
	{ echo "lintian $changes (exit $rc):"; echo "$lint"; } >>"$log"
	errors=$(grep '^E:' <<<"$lint" || true)
	if [ $rc -ge 2 ]; then result FAIL lintian "lintian failed (exit $rc): $(tail -n 1 <<<"$lint")"
	elif [ -z "$errors" ]; then result PASS lintian
	else result FAIL lintian "$(grep -c '^E:' <<<"$lint") errors, first: $(oneline <<<"$errors")"; fi
else
	result FAIL lintian "no $changes"
fi

# --- RPM: rebuild the src.rpm as a user would ----------------------------------------------
rpm_out=$out/rpm/nvidia_peer_memory-$version-1.noarch.rpm
if [ -f "$srpm_built" ] && cp "$srpm_built" "$out/rpm/" &&
	rpmbuild --rebuild --nodeps --define "_topdir $work/rpmbuild" \
		"$out/rpm/${srpm_built##*/}" >>"$log" 2>&1 &&
	mv "$work"/rpmbuild/RPMS/noarch/*.rpm "$out/rpm/" && [ -f "$rpm_out" ]; then
	result PASS rpm-build
else
	result FAIL rpm-build "rpmbuild --rebuild failed; see $log"
fi

if [ -f "$rpm_out" ]; then
	got=$(rpm -qlp "$rpm_out" 2>>"$log" | LC_ALL=C sort)
	d=$(compare rpm "$(expected nvidia_peer_memory.rpm.list)" "$got")
	if [ -z "$d" ]; then result PASS rpm-files; else result FAIL rpm-files "$d"; fi
	conf=$(rpm -qpc "$rpm_out" 2>>"$log")
	scripts=$(rpm -qp --scripts "$rpm_out" 2>>"$log")
	post=$(sed -n '/^postinstall scriptlet/,/^[a-z]* *scriptlet/p' <<<"$scripts")
	preun=$(sed -n '/^preuninstall scriptlet/,/^[a-z]* *scriptlet/p' <<<"$scripts")
	if [ "$conf" != /etc/infiniband/nv_peer_mem.conf ]; then
		result FAIL rpm-scriptlets "config files: $conf"
	elif ! grep -q "dkms add -m nv_peer_mem -v $version" <<<"$post" ||
		! grep -q "dkms install -m nv_peer_mem -v $version" <<<"$post" ||
		! grep -q "dkms remove -m nv_peer_mem -v $version --all" <<<"$preun"; then
		result FAIL rpm-scriptlets "%post lacks dkms add/install or %preun lacks dkms remove"
	elif [ "$(rpm -qp --filetriggers "$rpm_out" 2>>"$log" | grep -c -- '-- /usr/src$')" != 2 ] ||
		! grep -q 'dkms-follow.sh' <<<"$(rpm -qp --filetriggers "$rpm_out" 2>>"$log")"; then
		result FAIL rpm-scriptlets "no file triggers on /usr/src running dkms-follow.sh"
	else result PASS rpm-scriptlets; fi
	lint=$(rpmlint -r "$top/packaging/rpm/nvidia_peer_memory.rpmlintrc" "$rpm_out" \
		"$out/rpm/${srpm_built##*/}" 2>&1 || true)
	echo "$lint" >>"$log"
	summary=$(grep -E '[0-9]+ errors, [0-9]+ warnings' <<<"$lint" || true)
	if grep -q ' 0 errors' <<<"$summary"; then result PASS rpmlint
	else result FAIL rpmlint "${summary:-no summary}; first: $(grep ' E: ' <<<"$lint" | oneline)"; fi
else
	for c in rpm-files rpm-scriptlets rpmlint; do result FAIL $c "no $rpm_out"; done
fi

# --- one version everywhere ------------------------------------------------------------------
v_deb=$(sed -n '1s/^[^(]*(\([^)-]*\)-.*/\1/p' "$top/packaging/debian/changelog")
v_spec=$(sed -n 's/^Version:[[:space:]]*//p' "$top/packaging/rpm/nvidia_peer_memory.spec")
v_rust=$(sed -n 's/^pub(crate) const VERSION: &str = "\(.*\)";/\1/p' "$top/src/clients.rs")
v_modinfo=$(sed -n 's/^MODULE_VERSION("\(.*\)");/\1/p' "$top/src/glue.c")
if [ -n "$version" ] && [ "$v_deb" = "$version" ] && [ "$v_spec" = "$version" ] &&
	[ "$v_rust" = "$version" ] && [ "$v_modinfo" = "$version" ]; then
	result PASS versions
else
	result FAIL versions "dkms.conf '$version', debian/changelog '$v_deb', spec '$v_spec', src VERSION '$v_rust', MODULE_VERSION '$v_modinfo'"
fi

exit $failed
