# SPDX-License-Identifier: GPL-2.0
# nv_peer_mem in Rust.
#
#   make [KDIR=...] [OFA_KERNEL=...] [NV_SYMVERS=...]   build nv_peer_mem.ko for a kernel tree
#   make demo                                          build, boot the emulated world, show it working
#   make check                                         every test on the newest kernel line and the
#                                                      stock kernel; ends with "N passed, N failed"
#   make fullcheck                                     the same in every world on both kernel lines,
#                                                      the stress at 2000 per race (longer than make
#                                                      check's time budget)
#   make vmtest                                        only the VM scenarios
#   make stocktest                                     only the stock world: the packages on Debian 13's
#                                                      own kernel, DKMS, systemd (tests/stock/)
#   make racetest                                      the race scenarios, NVPM_RACE_RUNS boots per world
#   make stress                                        the in-kernel races, NVPM_STRESS_ITERS (100000) per race
#   make soak                                          SOAK_MINUTES (10) of random registrations, frees,
#                                                      DMA checks and service restarts in the VM
#   make bench                                         registration timed in the VM on the stock and
#                                                      the test kernel (NVPM_BENCH_KERNELS); rewrites
#                                                      Documentation/performance.md
#   make install / uninstall                           hand install of the module and the service
#                                                      (DESTDIR-aware; packages do this themselves)
#   make install-service                               only the service files
#   make install-dkms-source                           the module source for DKMS

KVER       ?= $(shell uname -r)
KDIR       ?= /lib/modules/$(KVER)/build
# MLNX_OFED's kernel tree (its Module.symvers has the PeerDirect symbols).
OFA_KERNEL ?= $(firstword $(wildcard /usr/src/ofa_kernel/$(shell uname -m)/$(KVER) /usr/src/ofa_kernel/default))
OFA_SYMVERS ?= $(if $(OFA_KERNEL),$(OFA_KERNEL)/Module.symvers)
# Symbol versions of nvidia.ko's P2P API; generated from the installed nvidia.ko when not given.
NV_SYMVERS ?= $(CURDIR)/nv.symvers
# Rust toolchain: must be the one the kernel tree was built with.
RUSTC      ?= rustc
EXTRA_KMAKE ?=
# Where a hand install puts the service (the packages use their distribution's places).
SYSTEMD_UNIT_DIR ?= /lib/systemd/system
LIBEXEC_DIR ?= /usr/libexec/nv_peer_mem
SBIN_DIR ?= /usr/sbin
INITD_DIR ?= /etc/init.d
# Where DKMS looks for the module source (make install-dkms-source).
DKMS_SRC_DIR ?= /usr/src/nv_peer_mem-$(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
SERVICE_SRC = packaging/service

KMAKE = $(MAKE) -C $(KDIR) M=$(CURDIR) $(if $(filter y,$(shell sed -n 's/^CONFIG_CC_IS_CLANG=//p' $(KDIR)/.config 2>/dev/null)),LLVM=$(or $(LLVM),1)) RUSTC=$(RUSTC) $(EXTRA_KMAKE)

.PHONY: all modules preflight glue-check prerequisites loadable clean install install-service install-dkms-source uninstall check fullcheck stocktest vmtest racetest stress soak demo bench test-kernel diagrams

all: modules

preflight:
	@KDIR='$(KDIR)' RUSTC='$(RUSTC)' OFA_SYMVERS='$(OFA_SYMVERS)' NV_SYMVERS='$(NV_SYMVERS)' \
		KVER='$(KVER)' scripts/preflight.sh

# Whether everything nv_peer_mem needs for KDIR is there or can be made (dkms.conf asks, to skip
# a kernel instead of failing its build): preflight's checks, writing nothing.
prerequisites:
	@KDIR='$(KDIR)' RUSTC='$(RUSTC)' OFA_SYMVERS='$(OFA_SYMVERS)' KVER='$(KVER)' PREREQUISITES=1 \
		NV_SYMVERS='$(if $(filter file,$(origin NV_SYMVERS)),,$(NV_SYMVERS))' scripts/preflight.sh

# Whether a module already built for KDIR can load there: MLNX_OFED's and nvidia.ko's symbols
# only (scripts/dkms-follow.sh keeps an installed module while this passes, whatever became of
# the compiler or the Rust tree it was built with).
loadable:
	@KDIR='$(KDIR)' OFA_SYMVERS='$(OFA_SYMVERS)' KVER='$(KVER)' LOADABLE=1 \
		NV_SYMVERS='$(if $(filter file,$(origin NV_SYMVERS)),,$(NV_SYMVERS))' scripts/preflight.sh

# A distribution's headers built with Rust but shipped without its build artifacts (Debian's):
# build against a completed copy of the tree (scripts/rust-tree.sh rebuilds the artifacts from
# the kernel's source package, once per kernel). Complete trees, and trees without Rust (for
# preflight to explain), are used as they are.
RUST_TREE_NEEDED = $(and $(filter y,$(shell sed -n 's/^CONFIG_RUST=//p' $(KDIR)/.config 2>/dev/null)),$(if $(wildcard $(KDIR)/rust/libkernel.rmeta),,y))

# The C/Rust boundary agrees before anything compiles: every prototype in src/glue.h against
# its Rust declaration in src/glue.rs (or its #[no_mangle] definition), types mapped
# (scripts/glue-check.py; make check runs it too, as tests/lint/glue.py). Skipped where there
# is no python3: DKMS builds the module on machines that need not have python3, and the module
# itself does not need it. (With a completed Rust tree, the inner make modules runs it.)
GLUE_PYTHON := $(shell command -v python3 2>/dev/null)
glue-check:
ifneq ($(GLUE_PYTHON),)
	@out=$$($(GLUE_PYTHON) scripts/glue-check.py src) || \
		{ echo "$$out" | sed 's/^FAIL glue:declarations: /nv_peer_mem: glue: /' >&2; \
		echo "nv_peer_mem: src/glue.h and src/glue.rs disagree (above): fix the one that is wrong" >&2; \
		exit 1; }
endif

ifneq ($(RUST_TREE_NEEDED),)
modules:
	+@tree=$$(RUSTC='$(RUSTC)' scripts/rust-tree.sh '$(KDIR)') && \
		$(MAKE) --no-print-directory modules KDIR="$$tree"
else
modules: preflight glue-check
	+$(KMAKE) KBUILD_EXTRA_SYMBOLS="$(OFA_SYMVERS) $(NV_SYMVERS)" modules
endif

clean:
	+$(KMAKE) clean 2>/dev/null || true
	rm -f nv.symvers

install: modules install-service
	install -D -m 644 nv_peer_mem.ko $(DESTDIR)/lib/modules/$(KVER)/updates/nv_peer_mem.ko
	[ -n "$(DESTDIR)" ] || depmod -a $(KVER)

# The service alone: init script, systemd unit, their helper, the doctor, the metrics and their
# timer, the nv_peer_mem command (start|stop|status|doctor|metrics ...) and the boot config file (the packages use this too,
# with their distribution's directories).
install-service:
	install -D -m 755 $(SERVICE_SRC)/nv_peer_mem-service $(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-service
	install -D -m 755 scripts/nv_peer_mem-doctor $(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-doctor
	install -D -m 755 scripts/nv_peer_mem-metrics $(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-metrics
	install -d $(DESTDIR)$(SBIN_DIR)
	ln -sfr $(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-service $(DESTDIR)$(SBIN_DIR)/nv_peer_mem
	install -D -m 755 $(SERVICE_SRC)/nv_peer_mem.init $(DESTDIR)$(INITD_DIR)/nv_peer_mem
	install -D -m 644 $(SERVICE_SRC)/nv_peer_mem.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/nv_peer_mem.service
	@# The metrics timer and its service: installed, never enabled (Documentation/metrics.md).
	install -m 644 $(SERVICE_SRC)/nv_peer_mem-metrics.service $(SERVICE_SRC)/nv_peer_mem-metrics.timer \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR)/
	@# An existing config file is the admin's: keep it.
	[ -e $(DESTDIR)/etc/infiniband/nv_peer_mem.conf ] || \
		install -D -m 644 $(SERVICE_SRC)/nv_peer_mem.conf $(DESTDIR)/etc/infiniband/nv_peer_mem.conf

# The module source as DKMS wants it, for dkms add/build/install (the packages use this too).
install-dkms-source:
	install -d $(DESTDIR)$(DKMS_SRC_DIR)/src/registration $(DESTDIR)$(DKMS_SRC_DIR)/scripts
	install -m 644 dkms.conf Makefile Kbuild $(DESTDIR)$(DKMS_SRC_DIR)/
	install -m 644 src/*.rs src/*.c src/*.h $(DESTDIR)$(DKMS_SRC_DIR)/src/
	install -m 644 src/registration/*.rs $(DESTDIR)$(DKMS_SRC_DIR)/src/registration/
	install -m 755 scripts/preflight.sh scripts/nv-symvers.sh scripts/rust-tree.sh scripts/dkms-follow.sh $(DESTDIR)$(DKMS_SRC_DIR)/scripts/
	install -m 644 scripts/glue-check.py $(DESTDIR)$(DKMS_SRC_DIR)/scripts/

uninstall:
	rm -f $(DESTDIR)/lib/modules/$(KVER)/updates/nv_peer_mem.ko \
		$(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-service $(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-doctor \
		$(DESTDIR)$(LIBEXEC_DIR)/nv_peer_mem-metrics \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR)/nv_peer_mem-metrics.service \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR)/nv_peer_mem-metrics.timer \
		$(DESTDIR)$(SBIN_DIR)/nv_peer_mem $(DESTDIR)$(INITD_DIR)/nv_peer_mem \
		$(DESTDIR)$(SYSTEMD_UNIT_DIR)/nv_peer_mem.service
	-rmdir $(DESTDIR)$(LIBEXEC_DIR) 2>/dev/null
	@# The config file goes only if the admin never changed it.
	if cmp -s $(SERVICE_SRC)/nv_peer_mem.conf $(DESTDIR)/etc/infiniband/nv_peer_mem.conf; then \
		rm -f $(DESTDIR)/etc/infiniband/nv_peer_mem.conf; \
		rmdir $(DESTDIR)/etc/infiniband 2>/dev/null || true; \
	elif [ -e $(DESTDIR)/etc/infiniband/nv_peer_mem.conf ]; then \
		echo "kept $(DESTDIR)/etc/infiniband/nv_peer_mem.conf: it has local changes"; \
	fi
	[ -n "$(DESTDIR)" ] || depmod -a $(KVER)

# Every target below runs the declared plan (tests/plan.toml) through tests/run.py, which lists
# every result it expects before anything boots and fails each one that never arrives.
check:
	tests/run.py check

# make check in every world of the matrix on both kernel lines (tests/plan.toml, profile.full),
# the doctor's and the packaged service's boots on both, the in-kernel stress at 2000 per race, and
# sid's newest 7.x kernel on the flavours world's Debian 13 machine (releases:*).
fullcheck:
	tests/run.py full

# Only the stock worlds (part of make check): the packages on Debian 13's own 7.x kernel, under
# Secure Boot, and its cloud and rt flavours.
stocktest:
	tests/run.py check --only stock

vmtest:
	tests/run.py check --only vm

# The race scenarios again and again (tests/plan.toml, profile.race): the newest, R515 (whose
# put_pages reads the table) and the oldest world on 7.x, the newest and the oldest on 6.12; the
# oldest on each line boots the server machine (GPU and NIC behind one PCIe switch).
NVPM_RACE_RUNS ?= 5
racetest:
	tests/run.py race --repeat $(NVPM_RACE_RUNS)

# The in-kernel races at full length: scenario 29 with NVPM_STRESS_ITERS iterations per race
# (make check runs 500) in the newest and the oldest world of the newest kernel (profile.stress),
# booted side by side (hours on 2 cores: --jobs 1 boots one at a time).
NVPM_STRESS_ITERS ?= 100000
stress:
	NVPM_TESTING_REPORT="make stress NVPM_STRESS_ITERS=$(NVPM_STRESS_ITERS)" \
		tests/run.py stress --append "nvpm.stress_iters=$(NVPM_STRESS_ITERS)"

SOAK_MINUTES ?= 10
soak:
	NVPM_TESTING_REPORT="make soak SOAK_MINUTES=$(SOAK_MINUTES)" tests/run.py soak \
		--append "nvpm.soak_minutes=$(SOAK_MINUTES)" --vm-timeout $$(( $(SOAK_MINUTES) * 60 + 900 ))

demo:
	tests/demo.sh

# Registration timed in the emulated world, on Debian's own kernel and on the test kernel;
# rewrites Documentation/performance.md's figures.
bench:
	tests/bench/run-bench.sh

# The design's diagrams (Documentation/diagrams/*.dot) rendered beside their sources, after
# the check that they match the code (tests/lint/diagrams.py; make check runs it too).
diagrams:
	python3 tests/lint/diagrams.py --render Documentation/diagrams

test-kernel:
	@tests/kernel/setup-host.sh && tests/kernel/build-kernel.sh
