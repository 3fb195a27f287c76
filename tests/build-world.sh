# shellcheck shell=bash
# Sourced by run.sh and demo.sh: installs the host tools, builds (or reuses) the test kernel,
# builds the fakes and nv_peer_mem against it in a copy of the sources, makes the BAR images and
# the initramfs (with the service's files installed as `make install-service` does).
# Sets: kbuild krel ksrc work build_dir logs initrd; build_ok=1 when all modules built.
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/tests/kernel/env.sh"

"$top/tests/kernel/setup-host.sh" || die "host setup failed"
kbuild=$("$top/tests/kernel/build-kernel.sh") || die "no test kernel"
# shellcheck disable=SC2034 # read by run.sh
ksrc=$(dirname "$kbuild")/src
# NVPM_WORK moves the per-kernel work directory (parallel runs on one machine need their own).
work=${NVPM_WORK:-$NVPM_CACHE/work}/$(basename "$(dirname "$kbuild")")
build_dir=$work/build
logs=$work/logs
initrd=$work/initramfs.cpio.gz
mkdir -p "$work" "$logs"
mapfile -t kargs < <(kmake_args)

fake_build() { # fake_build DIR [FLAVOUR]
	make -C "$kbuild" "${kargs[@]}" M="$1" ${2:+FLAVOUR=$2} W=1 modules
}
module_make() { # module_make DIR [make args]: the project Makefile in DIR, as a user runs it
	local dir=$1
	shift
	make -C "$dir" KDIR="$kbuild" RUSTC="$HOST_RUSTC" LLVM="$LLVM_DIR/bin/" \
		EXTRA_KMAKE="BINDGEN=$BINDGEN RUSTFMT=$HOST_RUSTFMT CLIPPY_DRIVER=$HOST_CLIPPY ${KMAKE_EXTRA:-}" \
		OFA_SYMVERS="$build_dir/ib_core/Module.symvers" \
		NV_SYMVERS="$build_dir/nvidia/Module.symvers" "$@"
}

krel=$(cat "$kbuild/include/config/kernel.release")
# NVPM_WORLD_REUSE=1: the world is built already (tests/vm/world.sh ran): only the settings above.
if [ "${NVPM_WORLD_REUSE:-0}" = 1 ]; then
	# shellcheck disable=SC2034 # read by the scripts that source this one
	build_ok=1
	return 0
fi
say "building the fakes and nv_peer_mem for $krel"
rm -rf "$build_dir"
mkdir -p "$build_dir/module"
cp -r "$top/tests/fakes/ib_core" "$build_dir/ib_core"
cp -r "$top/Makefile" "$top/Kbuild" "$top/src" "$top/scripts" "$build_dir/module/"
build_ok=1
# One fake nvidia.ko per NVIDIA driver generation (tests/fakes/INTERFACE.md).
NV_GENERATIONS="r470 r515 r535 r580"
for gen in $NV_GENERATIONS; do
	cp -r "$top/tests/fakes/nvidia" "$build_dir/nvidia-$gen"
	fake_build "$build_dir/nvidia-$gen" "$gen" >"$logs/nvidia-$gen.log" 2>&1 ||
		{ build_ok=0; tail -20 "$logs/nvidia-$gen.log" >&2; }
done
ln -sfn nvidia-r580 "$build_dir/nvidia"
fake_build "$build_dir/ib_core" >"$logs/ib_core.log" 2>&1 || { build_ok=0; tail -20 "$logs/ib_core.log" >&2; }
# NVIDIA's own peer client, which nv_peer_mem refuses to load beside (scenario 32).
cp -r "$top/tests/fakes/nvidia_peermem" "$build_dir/nvidia_peermem"
make -C "$kbuild" "${kargs[@]}" M="$build_dir/nvidia_peermem" W=1 \
	KBUILD_EXTRA_SYMBOLS="$build_dir/ib_core/Module.symvers" modules >"$logs/nvidia_peermem.log" 2>&1 ||
	{ build_ok=0; tail -20 "$logs/nvidia_peermem.log" >&2; }
module_make "$build_dir/module" modules >"$logs/module.log" 2>&1 || { build_ok=0; tail -30 "$logs/module.log" >&2; }

if [ $build_ok = 1 ]; then
	bars=$work/bars
	if [ ! -f "$bars/gpu1.sha256" ]; then
		mkdir -p "$bars"
		python3 "$top/tests/vm/mkbar.py" 1 16 "$bars/gpu0.img" "$bars/gpu0.sha256"
		python3 "$top/tests/vm/mkbar.py" 2 16 "$bars/gpu1.img" "$bars/gpu1.sha256"
	fi
	# The service as `make install` puts it (the demo starts it; scenarios leave it alone).
	service_root=$work/service-files
	rm -rf "$service_root"
	make -s -C "$top" install-service DESTDIR="$service_root" >"$logs/install-service.log" 2>&1 ||
		die "make install-service failed: $logs/install-service.log"
	# Threads of one process for the race scenarios (NVIDIA finds GPU memory by process).
	gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$build_dir/race" "$top/tests/vm/race.c" \
		>"$logs/race.log" 2>&1 || die "building tests/vm/race.c failed: $logs/race.log"
	# make bench's calibration workload (tests/bench/calibrate.c), the same binary on the host.
	gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$build_dir/calibrate" "$top/tests/bench/calibrate.c" \
		>"$logs/calibrate.log" 2>&1 || die "building tests/bench/calibrate.c failed: $logs/calibrate.log"
	# The fault-injection sweep: its helper, and the module's failure sites from its code.
	gcc -static -O2 -Wall -Wextra -Werror -o "$build_dir/failnth" "$top/tests/vm/failnth.c" \
		>"$logs/failnth.log" 2>&1 || die "building tests/vm/failnth.c failed: $logs/failnth.log"
	python3 "$top/tests/sweep/sites.py" "$build_dir/module/nv_peer_mem.ko" \
		>"$build_dir/sweep-sites.txt" 2>"$logs/sweep-sites.log" ||
		die "listing the module's failure sites failed: $logs/sweep-sites.log"
	# Every generation is in the VM; /init puts the one the boot asks for where modprobe looks.
	nv_kos=()
	for gen in $NV_GENERATIONS; do
		nv_kos+=("/opt/fake-nvidia/$gen/nvidia.ko=$build_dir/nvidia-$gen/nvidia.ko")
	done
	"$top/tests/vm/mkinitramfs.sh" --overlay "$service_root" "$kbuild" "$initrd" "$bars" \
		"$build_dir/nvidia/nvidia.ko" "${nv_kos[@]}" "/bin/race=$build_dir/race" \
		"/bin/calibrate=$build_dir/calibrate" "/bin/failnth=$build_dir/failnth" "/tests/sweep-sites.txt=$build_dir/sweep-sites.txt" \
		"$build_dir/ib_core/ib_core.ko" "$build_dir/nvidia_peermem/nvidia_peermem.ko" "$build_dir/module/nv_peer_mem.ko" ||
		die "initramfs build failed"
fi
