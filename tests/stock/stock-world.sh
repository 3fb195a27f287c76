#!/bin/bash
# The stock world: this project's packages on an unmodified Debian 13 machine with Debian's
# own 7.x kernel, booted whole (its kernel, its initrd, systemd as PID 1) in QEMU.
#   1. the prepared root (prepare-root.sh: Debian's archive only), copied;
#   2. apt-get install of the two debs, then of the doubles packaged as Debian's NVIDIA driver
#      and MLNX_OFED's kernel package are (doubles-debs.sh): nv_peer_mem is skipped, apt
#      succeeds, and the package's trigger builds it once the last prerequisite is there,
#      completing the headers' Rust build tree by itself (scripts/rust-tree.sh); the five other
#      install orders run in copies of the root (install-order.sh);
#   3. kernels installed later, then the driver purged, with apt in the installed root;
#   4. two boots of the machine from one disk: ONBOOT=yes (the service, doctor, metrics read by
#      Debian's node_exporter (installed into this copy of the root), registration
#      with DMA, invalidation, the free races), ONBOOT=no then apt purge and what it left.
# With --bench (make bench), only steps 1 and 2 in the first order, then NVPM_BENCH_BOOTS boots
# (3) that run tests/bench/bench-vm.py with 1 GiB BARs (NVPM_BENCH_GPU_MIB): the production
# kernel's figures.
# usage: stock-world.sh [--bench] PACKAGES   (build-packages.sh's OUTDIR, holding deb/)
# Prints "PASS stock:<check>" / "FAIL stock:<check>: <why>" lines; logs in $NVPM_CACHE/work/stock
# (stock-bench with --bench; the judged bench boots' console logs are listed in bench-boots.txt
# there).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/../kernel/env.sh"
bench= # --bench or empty
[ "${1:-}" != --bench ] || { bench=--bench; shift; }
[ $# = 1 ] || { echo "usage: $0 [--bench] PACKAGES" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" \
		NVPM_BENCH_GPU_MIB="${NVPM_BENCH_GPU_MIB:-}" NVPM_BENCH_COST_PCT="${NVPM_BENCH_COST_PCT:-}" \
		NVPM_BENCH_TIMEOUT="${NVPM_BENCH_TIMEOUT:-}" NVPM_BENCH_BOOTS="${NVPM_BENCH_BOOTS:-}" \
		NVPM_WORK="${NVPM_WORK:-}" "$0" ${bench:+"$bench"} "$1"
fi
packages=$(cd "$1" && pwd)
work=${NVPM_WORK:-$NVPM_CACHE/work}/stock
[ -z "$bench" ] || work=$work-bench
root=$work/root
log=$work/stock.log
# world_begin, and the Rust trees kept between runs (seed_tree, keep_tree): what the worlds on
# the stock root share.
# shellcheck source=machine.sh
. "$here/machine.sh"
world_begin stock
say "stock world: Debian's $kver"
# Its contents ("$base/."): $base may be a symbolic link to a shared cache's root, and cp -a
# "$base" would copy the link, so that everything below ran in the shared root (2026-11-28).
# Only the root's own file system: a proc or sysfs left mounted in it is not copied file by file.
mkdir -p "$root" && cp -a --one-file-system "$base/." "$root/" && mkdir -p "$root/proc" "$root/sys" ||
	fatal root "cannot copy $base"
[ ! -L "$root" ] || fatal root "$root is a symbolic link"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
in_root() { in_chroot "$root" "$@"; }

hdr=/usr/src/linux-headers-$kver

# --- bad input to scripts/rust-tree.sh: one sentence with the fix, and nothing kept ---------
cp "$top/scripts/rust-tree.sh" "$root/tmp/rust-tree.sh"
refuses() { # refuses NAME EXPECTED-TEXT [VAR=value...] [-- KDIR]
	local name=$1 want=$2 tree=$hdr out rc cache e left
	shift 2
	local env=()
	while [ $# -gt 0 ]; do
		case $1 in --) tree=$2; shift 2 ;; *) env+=("$1"); shift ;; esac
	done
	out=$(in_root env "${env[@]}" /tmp/rust-tree.sh "$tree" 2>&1)
	rc=$?
	echo "$name: $out" >>"$log"
	# The cache it was given, or the default one, must not exist afterwards.
	cache=/var/cache/nv_peer_mem
	for e in "${env[@]}"; do case $e in NV_PEER_MEM_RUST_CACHE=*) cache=${e#*=} ;; esac; done
	left=$(find "$root$cache" 2>/dev/null | sed "s|^$root||" | paste -sd ' ')
	if [ $rc = 1 ] && grep -qF -- "$want" <<<"$out" && [ -z "$left" ] &&
		[ "$(grep -c '^nv_peer_mem: ' <<<"$out")" = "$(wc -l <<<"$out")" ]; then
		result PASS "rust-tree-refuses-$name"
	else result FAIL "rust-tree-refuses-$name" "exit $rc, left '${left}', said: $(paste -sd ' ' <<<"$out")"; fi
}
if [ -z "$bench" ]; then
	printf '#!/bin/sh\necho "rustc 1.96.1 (ed61e7d7e 2026-10-01) (built from a source tarball)"\n' >"$root/tmp/other-rustc"
	mkdir -p "$root/tmp/linux-7.2.12" "$root/tmp/no-rust/include/config" "$root/mnt/ro" "$root/mnt/small"
	printf 'kernelversion:\n\t@echo 7.2.12\n' >"$root/tmp/linux-7.2.12/Makefile"
	echo '# CONFIG_RUST is not set' >"$root/tmp/no-rust/.config"
	echo 6.12.117+deb13-amd64 >"$root/tmp/no-rust/include/config/kernel.release"
	chmod 755 "$root/tmp/other-rustc"
	mount -t tmpfs -o ro,size=1m tmpfs "$root/mnt/ro"
	mount -t tmpfs -o size=100m tmpfs "$root/mnt/small"
	src_deb=$(in_root dpkg-query -W -f='${Version}' "linux-source-$(cut -d. -f1,2 <<<"$kver")")
	refuses other-source "is Linux 7.2.12, the headers are $kver" NV_PEER_MEM_KERNEL_SOURCE=/tmp/linux-7.2.12
	refuses other-rustc "but /tmp/other-rustc is 'rustc 1.96.1" RUSTC=/tmp/other-rustc
	refuses other-rustc-fix "apt-get install rustc=1.85.1" RUSTC=/tmp/other-rustc
	mv "$root"/usr/src/linux-source-*.tar.xz "$root/tmp/"
	refuses no-source "install the source package of the same version (apt-get install linux-source-$(cut -d. -f1,2 <<<"$kver")=$src_deb)"
	mv "$root"/tmp/linux-source-*.tar.xz "$root/usr/src/"
	refuses no-bindgen "no bindgen ('/nonexistent/bindgen')" BINDGEN=/nonexistent/bindgen
	refuses no-rust "was built without Rust (CONFIG_RUST is not set)" -- /tmp/no-rust
	refuses read-only-cache "cannot write the cache directory /mnt/ro/trees" NV_PEER_MEM_RUST_CACHE=/mnt/ro/trees
	refuses full-cache "/mnt/small/trees has " NV_PEER_MEM_RUST_CACHE=/mnt/small/trees
	umount "$root/mnt/ro" "$root/mnt/small"
fi

# doc_figures RELEASE: the figures install.md gives a user to plan disk by, against this run's
# tree: its size and the peak while it is completed, each within 25 % (times are never judged).
doc_figures() {
	local doc=$top/Documentation/install.md size peak want
	size=$(du -sm "$root$root_trees/$1" | cut -f1)
	want=$(grep -o 'rust-trees/<kernel release>` (about [0-9]* MB' "$doc" | grep -o '[0-9]*' | tail -n 1)
	if [ -n "$want" ] && [ $((size * 4)) -ge $((want * 3)) ] && [ $((size * 4)) -le $((want * 5)) ]; then
		result PASS doc-rust-tree-size
		echo "  the completed Rust tree of $1 takes $size MB; install.md says about $want MB"
	else result FAIL doc-rust-tree-size "the completed Rust tree of $1 takes $size MB; install.md says about ${want:-(no figure)} MB"; fi
	peak=$(cat "$tree_cache/$1.peak" 2>/dev/null)
	want=$(grep -o 'at its peak about [0-9]* MB' "$doc" | grep -o '[0-9]*' | tail -n 1)
	if [ -n "$peak" ] && [ -n "$want" ] && [ $((peak * 4)) -ge $((want * 3)) ] && [ $((peak * 4)) -le $((want * 5)) ]; then
		result PASS doc-rust-tree-peak
		echo "  completing it took at its peak $peak MB in /var/cache/nv_peer_mem; install.md says about $want MB"
	else result FAIL doc-rust-tree-peak "completing the tree of $1 took at its peak ${peak:-(never measured: NVPM_STOCK_FRESH_TREES=1 measures it)} MB; install.md says about ${want:-(no figure)} MB"; fi
}
# tree_origin RELEASE: what completed RELEASE's Rust tree, this run's DKMS build or an earlier run's
tree_origin() {
	local line
	line=$(completion "$1")
	if [ -n "$line" ]; then echo "$line"
	else echo "its Rust tree kept from an earlier run: $(cat "$root$root_trees/$1/.nv_peer_mem-rust-tree" 2>&1)"; fi
}

# --- the packages, with apt, as an administrator installs them: this project's first, then
# the NVIDIA driver (Debian's packaging of it), then MLNX_OFED. The doubles are packaged as those
# are (doubles-debs.sh), so DKMS builds them against the stock headers for every kernel. The
# other five orders run in copies of the prepared root below.
debs=("$packages"/deb/nvidia-peer-memory-dkms_*_all.deb "$packages"/deb/nvidia-peer-memory_*_all.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || fatal install "no packages in $packages/deb"
"$here/doubles-debs.sh" "$work/doubles" >>"$log" 2>&1 || fatal doubles "building the doubles' packages failed; see $log"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$work"/doubles/*.deb "$root/tmp/debs/"
seed_tree "$kver"
# The disk the completion takes at its peak, sampled while it runs (only when this run completes
# the tree: a tree kept from an earlier run brings the peak measured then, $tree_cache/R.peak).
sampler=
if ! [ -d "$root$root_trees/$kver" ]; then
	(
		peak=0
		while ! [ -f "$work/peak.stop" ]; do
			s=$(du -sm "$root/var/cache/nv_peer_mem" 2>/dev/null | cut -f1)
			[ "${s:-0}" -le "$peak" ] || { peak=$s; echo "$peak" >"$work/peak"; }
			sleep 2
		done
	) &
	sampler=$!
fi
start=$SECONDS
"$here/install-order.sh" "$root" PNO /tmp/debs "$work/apt-install.log" >"$work/order-PNO.out"
rc=$?
[ -z "$sampler" ] || { touch "$work/peak.stop"; wait "$sampler"; }
took=$((SECONDS - start))
cat "$work/apt-install.log" >>"$log"
[ $rc = 0 ] || failed=1
# Installed first, with neither the driver nor MLNX_OFED: skipped with the reasons, apt fine.
if grep -q "^nv_peer_mem: .*install the NVIDIA driver" "$work/apt-install.log" &&
	grep -q "skipped for kernel $kver, not failed" "$work/apt-install.log"; then
	result PASS apt-install-first-skips
else result FAIL apt-install-first-skips "no skip with the reasons for $kver; see $work/apt-install.log"; fi
# Debian's layout of the driver: nvidia-current.ko, module name nvidia, no module file named
# nvidia (modprobe reaches it through the install line).
nvko=$(ls "$root/lib/modules/$kver/updates/dkms/"nvidia-current.ko* 2>/dev/null | head -n1)
if [ -n "$nvko" ] && [ "$(in_root modinfo -F name "${nvko#"$root"}" 2>&1)" = nvidia ] &&
	! in_root modinfo -k "$kver" -n nvidia >/dev/null 2>&1 &&
	grep -qx 'install nvidia modprobe -i nvidia-current $CMDLINE_OPTS' <<<"$(in_root modprobe -c)" &&
	[ -s "$root/usr/src/ofa_kernel/x86_64/$kver/Module.symvers" ] &&
	in_root modinfo -k "$kver" -n ib_core >>"$log" 2>&1; then
	result PASS doubles-dkms
else fatal doubles-dkms "the doubles' packages did not install their modules as Debian's and MLNX_OFED's do for $kver; see $log"; fi
# MLNX_OFED came last: the package's trigger built nv_peer_mem.
if grep -q "^nv_peer_mem: building for kernel $kver" "$work/apt-install.log"; then
	result PASS trigger-builds
else result FAIL trigger-builds "no build by dkms-follow.sh after the last prerequisite; see $work/apt-install.log"; fi
cat "$work/order-PNO.out"
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/dkms.conf")
# completion RELEASE: what rust-tree.sh said in DKMS's make.log when it completed that tree
completion() {
	grep -h 'nv_peer_mem: completed' "$root/var/lib/dkms/nv_peer_mem/$version/$1"/*/log/make.log \
		"$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | head -n1
}
status=$(in_root dkms status -m nv_peer_mem -k "$kver" 2>&1)
if grep -q "^nv_peer_mem/$version, $kver, x86_64: installed" <<<"$status"; then
	result PASS dkms-installed
	echo "  the three apt-get installs with the DKMS builds for $kver took $took s; $(tree_origin "$kver")"
	keep_tree "$kver"
	[ ! -s "$work/peak" ] || cp "$work/peak" "$tree_cache/$kver.peak"
	doc_figures "$kver"
else
	result FAIL dkms-installed "dkms status: '$status'; $(tail -n 3 "$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | paste -sd ' ')"
fi
ko=$(ls "$root/lib/modules/$kver/updates/dkms/"nv_peer_mem.ko* 2>/dev/null | head -n1)
[ -n "$ko" ] || fatal module "DKMS installed no nv_peer_mem.ko for $kver"
# Every symbol the module imports is exported by the stock kernel or by the doubles: no module
# that cannot load is installed.
deps=$(in_root modinfo -F depends "/lib/modules/$kver/updates/dkms/${ko##*/}" 2>&1)
if [ "$(tr ',' '\n' <<<"$deps" | sort | paste -sd ,)" = ib_core,nvidia ]; then
	result PASS module-depends
else result FAIL module-depends "nv_peer_mem depends on '$deps', wanted ib_core and nvidia"; fi

# Debian's node_exporter for stock-metrics, from the archive into this copy of the root (not in
# prepare-root.sh's set): its unit reads /var/lib/prometheus/node-exporter/*.prom from boot on.
if [ -z "$bench" ]; then
	in_root apt-get install -y -q --no-install-recommends prometheus-node-exporter >"$work/node-exporter.log" 2>&1 ||
		echo "  apt-get install prometheus-node-exporter failed; stock-metrics will say so; see $work/node-exporter.log"
	cat "$work/node-exporter.log" >>"$log"
fi

# --- the machine's disk: the root as it is now, plus the tests and their unit --------------
unmount_all
t=$root/usr/lib/nvpm-stock
mkdir -p "$t/scenarios" "$root/etc/nvpm"
install -m 755 "$here/stock-vm.sh" "$t/stock-vm.sh"
install -m 644 "$top/tests/vm/lib.py" "$top/tests/vm/cleanup.py" "$t/"
install -m 644 "$here"/scenarios/*.py "$top"/tests/scenarios/{03-register-dma,07-invalidate,13-free-races}.* \
	"$top/tests/bench/bench-vm.py" "$t/scenarios/"
gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$root/usr/local/bin/calibrate" "$top/tests/bench/calibrate.c" >>"$log" 2>&1 ||
	fatal harness "building tests/bench/calibrate.c failed; see $log"
gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$root/usr/local/bin/race" "$top/tests/vm/race.c" >>"$log" 2>&1 ||
	fatal harness "building tests/vm/race.c failed; see $log"
install -m 644 "$here/nvpm-stock.service" "$root/etc/systemd/system/"
ln -sf /etc/systemd/system/nvpm-stock.service "$root/etc/systemd/system/multi-user.target.wants/"
# The serial console is the tests' output, not a login prompt.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
echo "/dev/vda / ext4 defaults 0 0" >"$root/etc/fstab"
mkdir -p "$work/bars"
for g in 0 1; do
	python3 "$top/tests/vm/mkbar.py" $((g + 1)) 16 "$work/bars/gpu$g.img" "$work/bars/gpu$g.sha256"
	cp "$work/bars/gpu$g.sha256" "$root/etc/nvpm/"
done
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
size=$(($(du -sm "$root" | cut -f1) + 512))
disk=$work/disk.img
mke2fs -q -F -t ext4 -L stock -d "$root" "$disk" "${size}M" >>"$log" 2>&1 || fatal disk "mke2fs failed; see $log"

# --- make bench: boots of the one disk, the benchmark on the production kernel ------------
# NVPM_BENCH_BOOTS boots (3), each calibrated on the host just before it; report.py judges them
# together (the median of each figure, and its range). A boot whose emulator speed moved by more
# than 20% between its first and last calibration is booted again and not judged, and so is one
# the emulator crashed in the profile's text patching (below), at most NVPM_BENCH_BOOTS times
# more in all. The judged boots' console logs: bench-boots.txt.
if [ -n "$bench" ]; then
	want=${NVPM_BENCH_BOOTS:-3}
	judged=0
	tries=0
	: >"$work/bench.out"
	: >"$work/bench-boots.txt"
	while [ $judged -lt "$want" ] && [ $tries -lt $((2 * want)) ]; do
		tries=$((tries + 1))
		calib=$("$top/tests/bench/host-calibration.sh" "$root/usr/local/bin/calibrate") ||
			fatal calibration "the host's calibration run failed"
		b=$work/boot-bench-$tries
		NVPM_GPU_MIB=${NVPM_BENCH_GPU_MIB:-1024} NVPM_VM_TIMEOUT=${NVPM_BENCH_TIMEOUT:-5400} NVPM_VM_DISK=$disk \
			NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x nvpm.calib=$calib${NVPM_BENCH_COST_PCT:+ nvpm.cost_pct=$NVPM_BENCH_COST_PCT}" \
			"$top/tests/vm/run-vm.sh" "$work/vmlinuz" "$work/initrd.img" "$b" bench-vm 2>>"$log" |
			sed 's/^\(PASS\|FAIL\) /\1 stock:/' | tee "$b.out"
		cat "$b.out" >>"$work/bench.out"
		# A failed boot (a "not ok", a kernel report) ends the bench: make bench judges nothing.
		# But for one the emulator crashed: the kernel died in its int3 handler while the bench
		# switched the function tracer on for the profile, the kernel patching the entry of
		# every function (text_poke_bp plants an int3 in each while it rewrites it). A vCPU met
		# a breakpoint the patch had already removed, exc_int3 found no patch under way, went on
		# to notify_die, whose __rcu_read_lock was itself being patched, and recursed until the
		# stack's guard page (2026-11-29, 1 of 8 bench boots; the early-boot int3 of
		# tests/vm/run-vm.sh is the same emulator at the same work). Booted again, not judged.
		if ! grep -qx 'PASS stock:bench-vm' "$b.out" || grep -q '^FAIL' "$b.out"; then
			if awk '/^BENCH /{last=$0} /exc_int3/{if (last ~ /kind=profile/) hit=1} END{exit !hit}' "$b/console.log"; then
				say "bench boot $tries: the kernel died in exc_int3 while the tracer was switched on for the profile (the emulator; $b/console.log): booted again, not judged"
				continue
			fi
			failed=1
			break
		fi
		if moved=$(python3 "$top/tests/bench/report.py" --drift "$b/console.log"); then
			judged=$((judged + 1))
			echo "$b/console.log" >>"$work/bench-boots.txt"
			say "bench boot $tries: the emulator's speed moved $moved during it: judged ($judged of $want)"
		else
			say "bench boot $tries: the emulator's speed moved $moved during it: booted again, not judged"
		fi
	done
	if [ $failed = 0 ] && [ $judged -lt "$want" ]; then
		result FAIL bench-boots "$judged of $want boots steady enough to judge after $tries boots"
	fi
	exit $failed
fi

# --- two boots of the one disk -------------------------------------------------------------
# A boot's time limit: a systemd boot and apt inside TCG, beside every other boot of make check:
# 10 minutes and 5 a scenario (boot 2 ran out of run-vm.sh's 8 minutes during apt-get purge
# under a loaded make check, 2026-11-25). It catches a hang; it is not a speed target.
boot() { # boot NAME SCENARIO...
	local name=$1
	shift
	NVPM_VM_TIMEOUT=$((600 + 300 * $#)) NVPM_VM_DISK=$disk NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x" \
		"$top/tests/vm/run-vm.sh" "$work/vmlinuz" "$work/initrd.img" "$work/boot-$name" "$@" 2>>"$log" |
		sed 's/^\(PASS\|FAIL\) /\1 stock:/'
}
{
	boot 1-onboot-yes stock-boot stock-service stock-doctor stock-metrics 03-register-dma 07-invalidate 13-free-races stock-onboot-off
	boot 2-onboot-no stock-onboot-no stock-purge stock-purged
} >"$work/boots.out" &
boots=$!

# --- meanwhile, in the installed root: kernels installed after the packages ----------------
# Another Debian 7.x kernel whose source package is in the archive: DKMS builds nv_peer_mem for
# it when the kernel is installed. An older one of the same X.Y, whose source version is not the
# installed one: DKMS skips it with nv_peer_mem's reason, apt succeeds. Then trixie's default 6.12, which has no Rust: DKMS skips it with its
# BUILD_EXCLUSIVE message, apt succeeds, and the doctor says why on that kernel.
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
# The five other install orders, each in a fresh copy of the prepared root (an overlay on it,
# or a copy where overlays cannot be mounted). The Rust tree completed above is each one's
# cache: completing it is shown once, and the orders are about what follows what.
cp -a "$root/var/cache/nv_peer_mem" "$work/rust-cache"
fresh_root() { # fresh_root DIR: DIR/root, a copy of the prepared root with the debs and the cache
	local o=$1
	mkdir -p "$o/upper" "$o/over" "$o/root"
	mount -t overlay overlay -o "lowerdir=$base,upperdir=$o/upper,workdir=$o/over" "$o/root" 2>>"$log" ||
		cp -a "$base/." "$o/root/"
	mkdir -p "$o/root/tmp/debs" "$o/root/var/cache/nv_peer_mem"
	cp "$root"/tmp/debs/*.deb "$o/root/tmp/debs/"
	mount --bind "$work/rust-cache" "$o/root/var/cache/nv_peer_mem"
	mount -t proc proc "$o/root/proc"
	mount -t sysfs sysfs "$o/root/sys"
}
drop_root() { unmount_under "$1"; rm -rf --one-file-system "$1"; }
for order in NOP NPO ONP OPN PON; do
	fresh_root "$work/orders/$order"
	"$here/install-order.sh" "$work/orders/$order/root" "$order" /tmp/debs "$work/orders/$order.log" || failed=1
	drop_root "$work/orders/$order"
done

# A driver whose own build fails for the kernel (Debian's 550 on 7.3), installed with
# MLNX_OFED before this package: apt fails for the driver, and goes on failing for it (dpkg
# retries its configure on every run), but this package is configured, says why nv_peer_mem
# waits, and the doctor blames the driver's build.
o=$work/orders/broken-driver
fresh_root "$o"
r=$o/root
b_log=$work/orders/broken-driver.log
in_r() { in_chroot "$r" "$@"; }
in_r apt-get install -y -q --no-install-recommends /tmp/debs/mlnx-ofed-kernel-dkms_double_all.deb \
	/tmp/debs/nvidia-kernel-dkms_broken_all.deb >"$b_log" 2>&1
rc1=$?
echo "=== then this project's packages" >>"$b_log"
in_r apt-get install -y -q --no-install-recommends "/tmp/debs/${debs[0]##*/}" "/tmp/debs/${debs[1]##*/}" >"$o/p.log" 2>&1
rc2=$?
cat "$o/p.log" >>"$b_log"
mkdir -p "$r/tmp/doctor/proc/sys/kernel" "$r/tmp/doctor/var/lib" "$r/tmp/doctor/lib"
echo "$kver" >"$r/tmp/doctor/proc/sys/kernel/osrelease"
ln -s /lib/modules "$r/tmp/doctor/lib/modules"
ln -s /var/lib/dkms "$r/tmp/doctor/var/lib/dkms"
doctor=$(in_r python3 /usr/libexec/nv_peer_mem/nv_peer_mem-doctor --root /tmp/doctor --kernel-log /dev/null 2>&1)
echo "$doctor" >>"$b_log"
why="nv_peer_mem: the DKMS module nvidia-current is registered but not installed for $kver (its last build log: /var/lib/dkms/nvidia-current/550.163.01-fake/build/make.log)"
audit=$(in_r dpkg --audit 2>&1)
bad=()
[ $rc1 != 0 ] || bad+=("the driver's configure did not fail")
grep -qF "$why" "$o/p.log" || bad+=("no reason naming nvidia-current and its make.log")
[ "$(in_r dpkg-query -W -f='${db:Status-Abbrev} ' nvidia-peer-memory-dkms nvidia-peer-memory)" = "ii  ii  " ] ||
	bad+=("this project's packages are not both configured")
grep -q '^ nvidia-kernel-dkms ' <<<"$audit" && ! grep -q 'nvidia-peer-memory' <<<"$audit" ||
	bad+=("dpkg --audit: $(grep '^ ' <<<"$audit" | paste -sd ' ')")
! ls "$r/lib/modules/$kver/updates/dkms/"nv_peer_mem.ko* >/dev/null 2>&1 || bad+=("an nv_peer_mem.ko was installed")
grep -q "^FAIL nvidia.dkms: the NVIDIA driver's own DKMS build (nvidia-current/550.163.01-fake) failed for kernel $kver (nvidia/nv-mmap.c:712:19: error: " <<<"$doctor" ||
	bad+=("doctor: $(grep -m1 'nvidia.dkms' <<<"$doctor" | cut -c1-160)")
if [ ${#bad[@]} = 0 ]; then result PASS broken-driver
else result FAIL broken-driver "$(IFS=';'; echo "${bad[*]}"); see $b_log"; fi
echo "  driver that does not build, then this package: apt $rc1 $rc2 (the driver's configure, retried);" \
	"nvidia-peer-memory-dkms: $(in_r dpkg-query -W -f='${db:Status-Abbrev}' nvidia-peer-memory-dkms);" \
	"$(grep -m1 -o 'nv_peer_mem: the DKMS module nvidia-current is registered but not installed' "$o/p.log" || echo 'no reason given')"
drop_root "$o"
rm -rf "$work/rust-cache"
# The symbol check itself: headers whose Module.symvers lists one Rust symbol the kernel's crates
# do not define, as headers of another build would. The rebuild must refuse to keep anything.
cp -a "$root$hdr" "$root/tmp/headers-other-build"
printf '0x00000000\t_RNvCs0000000000_6kernel16nvpm_not_a_symbol\tvmlinux\tEXPORT_SYMBOL_GPL\t\n' \
	>>"$root/tmp/headers-other-build/Module.symvers"
refuses other-build "the rebuilt Rust crates lack 1 of the " NV_PEER_MEM_RUST_CACHE=/mnt/other-build \
	-- /tmp/headers-other-build
# The kernels below are never booted: no initramfs for them. update_initramfs=no stops the updates
# (update-initramfs -u, from triggers); the kernel's own hook (/etc/kernel/postinst.d/initramfs-tools)
# creates one with -c whatever that says, unless INITRD=No is set (later_kernel below).
sed -i 's/^update_initramfs=.*/update_initramfs=no/' "$root/etc/initramfs-tools/update-initramfs.conf"
candidate() { in_root apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'; }
newest_image() { # newest_image ERE-of-release: the newest linux-image-<release> matching it
	in_root apt-cache search --names-only "^linux-image-$1\$" | sed -n 's/^linux-image-\([^ ]*\) .*/\1/p' |
		grep -vx "$kver" | sort -V | tac
}
kernel_with_source='' kernel_without_source=''
for k in $(newest_image '7\.[0-9.]+\+deb13-amd64'); do
	if [ "$(candidate "linux-source-$(cut -d. -f1,2 <<<"$k")")" = "$(candidate "linux-image-$k")" ]; then
		[ -n "$kernel_with_source" ] || kernel_with_source=$k
	elif [ "$(cut -d. -f1,2 <<<"$k")" = "$(cut -d. -f1,2 <<<"${kernel_with_source:-none}")" ]; then
		[ -n "$kernel_without_source" ] || kernel_without_source=$k
	fi
done
later_kernel() { # later_kernel NAME RELEASE [apt-get option...] PACKAGE...
	local name=$1 k=$2 start rc
	shift 2
	start=$SECONDS
	in_root env INITRD=No apt-get install -y -q --no-install-recommends "$@" >"$work/$name.log" 2>&1
	rc=$?
	cat "$work/$name.log" >>"$log"
	if [ $rc = 0 ]; then result PASS "$name-apt"
	else result FAIL "$name-apt" "apt-get install $* exit $rc; see $work/$name.log"; fi
	echo "  apt-get install of $k with its DKMS step took $((SECONDS - start)) s"
}
if [ -n "$kernel_with_source" ]; then
	k=$kernel_with_source
	seed_tree "$k"
	later_kernel later-rust-kernel "$k" -t trixie-backports "linux-image-$k" "linux-headers-$k" \
		"linux-source-$(cut -d. -f1,2 <<<"$k")"
	ko2=$(ls "$root/lib/modules/$k/updates/dkms/"nv_peer_mem.ko* 2>/dev/null | head -n1)
	vm=${ko2:+$(in_root modinfo -F vermagic "${ko2#"$root"}" 2>&1)}
	if grep -q "^nv_peer_mem/$version, $k, x86_64: installed" <<<"$(in_root dkms status -m nv_peer_mem -k "$k" 2>&1)" &&
		[ "${vm%% *}" = "$k" ]; then
		result PASS later-rust-kernel-dkms
		echo "  $k: $(tree_origin "$k")"
		keep_tree "$k"
	else result FAIL later-rust-kernel-dkms "no nv_peer_mem.ko built for $k (vermagic '${vm:-}'); see $work/later-rust-kernel.log"; fi
else
	result FAIL later-rust-kernel "no other Debian 7.x kernel with its source package in the archive"
fi
# A 7.x kernel whose linux-source-X.Y is installed in another version (the one above: one
# linux-source-X.Y at a time): nv_peer_mem cannot be built for it, which must not fail apt.
if [ -n "$kernel_without_source" ]; then
	k=$kernel_without_source
	later_kernel nosource-kernel "$k" -t trixie-backports "linux-image-$k" "linux-headers-$k"
	if grep -q "^nv_peer_mem: the kernel source is linux-source-.* but the headers of $k are " "$work/nosource-kernel.log" &&
		grep -q "^nv_peer_mem: 1 problem(s) above: skipped for kernel $k, not failed; once they are fixed: dkms autoinstall -k $k" "$work/nosource-kernel.log" &&
		grep -q "Autoinstall on $k was skipped for module(s) nv_peer_mem" "$work/nosource-kernel.log" &&
		[ -z "$(ls "$root/lib/modules/$k/updates/dkms/"nv_peer_mem.ko* 2>/dev/null)" ]; then
		result PASS nosource-kernel-skipped
	else result FAIL nosource-kernel-skipped "no skip with nv_peer_mem's reason for $k; see $work/nosource-kernel.log"; fi
else
	result FAIL nosource-kernel "no Debian 7.x kernel without its source package in the archive"
fi
k612=$(newest_image '6\.12\.[0-9]+\+deb13-amd64' | head -n1)
later_kernel norust-kernel "$k612" "linux-image-$k612" "linux-headers-$k612"
if [ -z "$(ls "$root/lib/modules/$k612/updates/dkms/"nv_peer_mem.ko* 2>/dev/null)" ] &&
	grep -q 'for module nv_peer_mem/.* includes a BUILD_EXCLUSIVE directive' "$work/norust-kernel.log" &&
	grep -q "Autoinstall on $k612 was skipped for module(s) nv_peer_mem" "$work/norust-kernel.log" &&
	# Our own line once in the apt run, saying to boot a Rust kernel, and no advice that cannot
	# help on a kernel without Rust (dkms autoinstall, a reinstall).
	[ "$(grep -c "^nv_peer_mem: kernel $k612 was built without Rust .*boot a kernel built with Rust" "$work/norust-kernel.log")" = 1 ] &&
	! grep -q "^nv_peer_mem: .*\(dkms autoinstall -k $k612\|reinstall\)" "$work/norust-kernel.log"; then
	result PASS norust-kernel-skipped
else result FAIL norust-kernel-skipped "a module for $k612, no BUILD_EXCLUSIVE message, not exactly one line of ours saying to boot a Rust kernel, or advice to rebuild; see $work/norust-kernel.log"; fi
# The doctor on that kernel: a root whose /proc says 6.12, with the machine's /boot and modules.
doc=$root/tmp/doctor-612
mkdir -p "$doc/proc/sys/kernel"
echo "$k612" >"$doc/proc/sys/kernel/osrelease"
ln -s /boot "$doc/boot"
mkdir -p "$doc/lib" && ln -s /lib/modules "$doc/lib/modules"
out=$(in_root python3 /usr/libexec/nv_peer_mem/nv_peer_mem-doctor --root /tmp/doctor-612 --kernel-log /dev/null 2>&1)
if grep -q "^FAIL kernel.rust: the running kernel $k612 was built without Rust" <<<"$out" &&
	grep -q "^FAIL nv_peer_mem.installed: .* -> fix: boot a kernel built with Rust that has it: " <<<"$out"; then
	result PASS norust-kernel-doctor
else result FAIL norust-kernel-doctor "$(grep -m2 'kernel.rust\|installed' <<<"$out" | paste -sd ' ')"; fi
# The fallback kernel booted: most machines keep trixie's 6.12 beside the Rust kernel, and boot
# it when the newer one fails. On it the nv_peer_mem unit is skipped with one line naming the
# kernels that have the module, and the system is "running", not "degraded". Its own disk: this
# root as it is now, with an initramfs for 6.12 (apt installed it with INITRD=No).
boot3=
if [ -n "$k612" ] && in_root update-initramfs -c -k "$k612" >>"$log" 2>&1; then
	cp "$root/boot/vmlinuz-$k612" "$work/vmlinuz-fallback"
	cp "$root/boot/initrd.img-$k612" "$work/initrd-fallback.img"
	umount "$root/proc" "$root/sys"
	size=$(($(du -sm "$root" | cut -f1) + 512))
	if mke2fs -q -F -t ext4 -L stock -d "$root" "$work/disk-fallback.img" "${size}M" >>"$log" 2>&1; then
		NVPM_VM_TIMEOUT=900 NVPM_VM_DISK=$work/disk-fallback.img NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x" \
			"$top/tests/vm/run-vm.sh" "$work/vmlinuz-fallback" "$work/initrd-fallback.img" "$work/boot-3-fallback" \
			stock-fallback-kernel 2>>"$log" | sed 's/^\(PASS\|FAIL\) /\1 stock:/' >"$work/boot3.out" &
		boot3=$!
	else result FAIL stock-fallback-kernel "mke2fs of the fallback kernel's disk failed; see $log"; fi
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
else result FAIL stock-fallback-kernel "no 6.12 kernel ('$k612'), or update-initramfs -k $k612 failed; see $log"; fi

# Another rustc after all that (the admin's newer toolchain; sid's, to build for sid's kernel):
# its rust-src puts files under /usr/src, so our package's trigger runs dkms-follow.sh. The
# module built for $kver still loads there, so it stays installed and dpkg succeeds. A stand-in
# rustc that names another version (diverted, as an admin's local install would shadow it) and
# a package with files under /usr/src, as rust-src has, make the change.
rc_pkg=$work/nvpm-test-rust-src
mkdir -p "$rc_pkg/DEBIAN" "$rc_pkg/usr/src/rustc-1.99.0"
echo 'placeholder for a rust-src of another version' >"$rc_pkg/usr/src/rustc-1.99.0/README"
printf 'Package: nvpm-test-rust-src\nVersion: 1.99.0\nArchitecture: all\nMaintainer: tests <tests@localhost>\nDescription: stands in for a rust-src of another version\n' \
	>"$rc_pkg/DEBIAN/control"
dpkg-deb -b "$rc_pkg" "$root/tmp/nvpm-test-rust-src.deb" >>"$log" 2>&1
in_root dpkg-divert --quiet --local --rename --add /usr/bin/rustc >>"$log" 2>&1
printf '#!/bin/sh\necho "rustc 1.99.0 (0000000000 2026-11-01)"\n' >"$root/usr/bin/rustc"
chmod 755 "$root/usr/bin/rustc"
in_root dpkg -i /tmp/nvpm-test-rust-src.deb >"$work/rustc-change.log" 2>&1
rc=$?
cat "$work/rustc-change.log" >>"$log"
status=$(in_root dkms status -m nv_peer_mem -k "$kver" 2>&1)
if [ $rc = 0 ] && grep -q "^nv_peer_mem/$version, $kver, x86_64: installed" <<<"$status" &&
	ls "$root/lib/modules/$kver/updates/dkms/"nv_peer_mem.ko* >/dev/null 2>&1 &&
	grep -q '^Processing triggers for nvidia-peer-memory-dkms' "$work/rustc-change.log"; then
	result PASS rustc-change-keeps-module
else result FAIL rustc-change-keeps-module "dpkg -i exit $rc; our trigger: $(grep -c '^Processing triggers for nvidia-peer-memory-dkms' "$work/rustc-change.log") run(s); dkms status for $kver: '$(paste -sd ';' <<<"$status")'; see $work/rustc-change.log"; fi
in_root dpkg --purge nvpm-test-rust-src >>"$log" 2>&1
rm -f "$root/usr/bin/rustc"
in_root dpkg-divert --quiet --local --rename --remove /usr/bin/rustc >>"$log" 2>&1

# The driver purged after all that: apt succeeds, and no nv_peer_mem.ko is left that could not
# load; DKMS keeps the module (added) for the driver's return.
in_root apt-get purge -y -q nvidia-kernel-dkms >"$work/purge-driver.log" 2>&1
rc=$?
cat "$work/purge-driver.log" >>"$log"
left=$(cd "$root" && ls lib/modules/*/updates/dkms/nv_peer_mem.ko* 2>/dev/null | paste -sd ' ')
status=$(in_root dkms status -m nv_peer_mem 2>&1)
if [ $rc = 0 ] && [ -z "$left" ] && [ "$status" = "nv_peer_mem/$version: added" ] &&
	[ -z "$(in_root dpkg --audit 2>&1)" ]; then
	result PASS driver-purged
else result FAIL driver-purged "apt-get purge exit $rc; left: '${left}'; dkms status: '$(paste -sd ';' <<<"$status")'; see $work/purge-driver.log"; fi
unmount_all
rm -rf --one-file-system "$root"

wait $boots
cat "$work/boots.out"
grep -q '^FAIL' "$work/boots.out" && failed=1
if [ -n "$boot3" ]; then
	wait "$boot3"
	cat "$work/boot3.out"
	grep -q '^FAIL' "$work/boot3.out" && failed=1
fi
exit $failed
