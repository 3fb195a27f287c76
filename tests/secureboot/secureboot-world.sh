#!/bin/bash
# The Secure Boot world (issue 36): the stock machine (tests/stock/) booted the way a machine with
# Secure Boot boots Debian, every piece from Debian's archive at test time:
#   - ovmf: OVMF_CODE_4M.secboot.fd (Secure Boot code, SMM) and OVMF_VARS_4M.ms.fd (PK, KEK and
#     db with Microsoft's keys, Secure Boot on);
#   - shim-signed (shimx64.efi.signed, Microsoft's signature) as the ESP's EFI/BOOT/BOOTX64.EFI,
#     shim-helpers-amd64-signed's MokManager (mmx64.efi) beside it;
#   - grub-efi-amd64-signed (grubx64.efi.signed, Debian's signature, its prefix /EFI/debian);
#   - the stock kernel image, signed by Debian (checked with sbverify);
#   - openssl and mokutil in the machine, as an administrator has them: DKMS then makes
#     /var/lib/dkms/mok.key and mok.pub and signs nv_peer_mem and the doubles with them;
#   - the key enrolled in the firmware's MokList the way mokutil --import + MokManager leave it
#     (python3-virt-firmware's virt-fw-vars --add-mok, owner shim's GUID).
# The host needs only QEMU: the disk tools (sfdisk, mtools, dosfstools), sbverify and
# virt-fw-vars run in a throwaway overlay of the prepared root.
# usage: secureboot-world.sh PACKAGES   (build-packages.sh's OUTDIR, holding deb/)
# Prints "PASS secureboot:<check>" / "FAIL secureboot:<check>: <why>" lines; logs in
# $NVPM_CACHE/work/secureboot.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
stock=$top/tests/stock
. "$top/tests/kernel/env.sh"
[ $# = 1 ] || { echo "usage: $0 PACKAGES" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" "$0" "$1"
fi
packages=$(cd "$1" && pwd)
work=${NVPM_WORK:-$NVPM_CACHE/work}/secureboot
root=$work/root
tools=$work/tools/root
log=$work/secureboot.log
# shim's own GUID: the owner mokutil --import gives the keys it adds to MokList.
shim_guid=605dab50-e046-4300-abb6-3dd810dd8b23
# shellcheck source=../stock/machine.sh
. "$stock/machine.sh"
world_begin secureboot share
say "secure boot world: Debian's $kver"

# --- the tools: an overlay of the prepared root (a copy where overlays cannot be mounted) -----
mkdir -p "$work/tools/upper" "$work/tools/over" "$tools"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/tools/upper,workdir=$work/tools/over" "$tools" 2>>"$log" ||
	cp -a "$base/." "$tools/"
mount -t proc proc "$tools/proc"
mkdir -p "$tools/w"
mount --bind "$work/share" "$tools/w"
in_tools() { in_chroot "$tools" "$@"; }
in_tools apt-get update -q >>"$log" 2>&1 || fatal tools "apt-get update in the tools' root failed; see $log"
in_tools apt-get install -y -q --no-install-recommends python3-virt-firmware sbsigntool mtools dosfstools fdisk \
	openssl >>"$log" 2>&1 || fatal tools "installing the tools failed; see $log"

# --- the boot chain: Debian's packages, as they are in the archive today -------------------
fw_pkgs=(ovmf shim-signed shim-helpers-amd64-signed grub-efi-amd64-signed)
mkdir -p "$work/share/debs" "$work/share/fw"
if in_tools sh -c 'cd /w/debs && apt-get download -q "$@"' download "${fw_pkgs[@]}" >>"$log" 2>&1; then
	for d in "$work"/share/debs/*.deb; do dpkg-deb -x "$d" "$work/share/fw" || fatal firmware "cannot unpack $d"; done
	echo "  $(cd "$work/share/debs" && ls | sed 's/_all\.deb$\|_amd64\.deb$//' | paste -sd ' ')"
else fatal firmware "apt-get download ${fw_pkgs[*]} failed; see $log"; fi
fw=$work/share/fw
code=$fw/usr/share/OVMF/OVMF_CODE_4M.secboot.fd
vars=$fw/usr/share/OVMF/OVMF_VARS_4M.ms.fd
shim=$fw/usr/lib/shim/shimx64.efi.signed
mm=$fw/usr/lib/shim/mmx64.efi.signed
grub=$fw/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed
for f in "$code" "$vars" "$shim" "$mm" "$grub"; do
	[ -s "$f" ] || fatal firmware "no ${f#"$fw"} in ${fw_pkgs[*]}"
done
# The firmware's variables: Secure Boot on, Microsoft's KEK and db.
v=$(in_tools virt-fw-vars -i "/w/fw${vars#"$fw"}" -p -v 2>&1)
echo "$v" >"$work/vars-ms.txt"
# virt-fw-vars -p -v: "name=VAR guid=..." then the value's lines (the certificates' subjects).
value_of() { awk -v n="name=$1" '$1 == n { on = 1; next } /^name=/ { on = 0 } on' <<<"$v"; }
if grep -q 'bool: ON' <<<"$(value_of SecureBootEnable)" &&
	grep -q 'Microsoft Corporation KEK CA' <<<"$(value_of KEK)" &&
	grep -q 'Microsoft Corporation UEFI CA' <<<"$(value_of db)"; then
	result PASS firmware-ms-keys
else result FAIL firmware-ms-keys "OVMF_VARS_4M.ms.fd: no Secure Boot or no Microsoft keys; see $work/vars-ms.txt"; fi
# Who signed each stage: shim by Microsoft, grub and the kernel by Debian.
signers() { in_tools sbverify --list "$1" 2>&1 | sed -n 's/^.*subject: //p' | paste -sd ';'; }
cp "$base/boot/vmlinuz-$kver" "$work/share/vmlinuz"
s_shim=$(signers "/w/fw${shim#"$fw"}") s_mm=$(signers "/w/fw${mm#"$fw"}")
s_grub=$(signers "/w/fw${grub#"$fw"}") s_kernel=$(signers /w/vmlinuz)
if grep -q 'CN=Microsoft Corporation UEFI CA 2011' <<<"$s_shim" &&
	grep -q 'CN=Debian Secure Boot Signer .* - shim' <<<"$s_mm" &&
	grep -q 'CN=Debian Secure Boot Signer .* - grub2' <<<"$s_grub" &&
	grep -q 'CN=Debian Secure Boot Signer .* - linux' <<<"$s_kernel"; then
	result PASS signed-boot-chain
	echo "  signers: shim: Microsoft (UEFI CA 2011, in the firmware's db); MokManager, grub, $kver: Debian (in shim)"
else result FAIL signed-boot-chain "shim '$s_shim', MokManager '$s_mm', grub '$s_grub', kernel '$s_kernel'"; fi

# --- the machine: the stock root, with what an administrator of a Secure Boot machine has -----
# Its contents: $base may be a symbolic link to a shared cache's root (tests/stock/stock-world.sh).
mkdir -p "$root" && cp -a --one-file-system "$base/." "$root/" && mkdir -p "$root/proc" "$root/sys" ||
	fatal root "cannot copy $base"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
in_root() { in_chroot "$root" "$@"; }
in_root apt-get update -q >>"$log" 2>&1 && in_root apt-get install -y -q --no-install-recommends openssl mokutil >>"$log" 2>&1 ||
	fatal root "apt-get install openssl mokutil failed; see $log"
# The Rust tree the stock world completed and kept, if it is current (stock-world.sh's seed_tree).
tree_cache=$NVPM_CACHE/stock/rust-trees
root_trees=/var/cache/nv_peer_mem/rust-trees
if [ -d "$tree_cache/$kver" ] && [ "$(cat "$tree_cache/$kver.key" 2>/dev/null)" = \
	"$(sha256sum "$top/scripts/rust-tree.sh" | cut -c1-16)" ]; then
	mkdir -p "$root$root_trees"
	cp -a "$tree_cache/$kver" "$root$root_trees/$kver" || rm -rf "${root:?}$root_trees/$kver"
fi
debs=("$packages"/deb/nvidia-peer-memory-dkms_*_all.deb "$packages"/deb/nvidia-peer-memory_*_all.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || fatal install "no packages in $packages/deb"
"$stock/doubles-debs.sh" "$work/doubles" >>"$log" 2>&1 || fatal doubles "building the doubles' packages failed; see $log"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$work"/doubles/*.deb "$root/tmp/debs/"
start=$SECONDS
"$stock/install-order.sh" "$root" PNO /tmp/debs "$work/apt-install.log" >"$work/order-PNO.out"
rc=$?
cat "$work/apt-install.log" >>"$log"
if [ $rc = 0 ]; then result PASS dkms-installed
else result FAIL dkms-installed "$(head -n 1 "$work/order-PNO.out" | sed 's/^FAIL stock:order-PNO: //')"; fi
echo "  apt-get install of the packages and the doubles, DKMS building for $kver: $((SECONDS - start)) s"
# DKMS made its MOK key and signed what it built with it: nv_peer_mem, nvidia-current, ib_core.
mok=$root/var/lib/dkms/mok.pub
bad=()
[ -s "$root/var/lib/dkms/mok.key" ] && [ -s "$mok" ] || bad+=("no /var/lib/dkms/mok.key and mok.pub")
serial=$(in_root openssl x509 -inform DER -in /var/lib/dkms/mok.pub -noout -serial 2>/dev/null | sed 's/^serial=//')
subject=$(in_root openssl x509 -inform DER -in /var/lib/dkms/mok.pub -noout -subject 2>/dev/null)
for m in nv_peer_mem nvidia-current ib_core; do
	ko=$(cd "$root" && ls "lib/modules/$kver/updates/dkms/$m.ko"* 2>/dev/null | head -n1)
	[ -n "$ko" ] || { bad+=("no $m.ko"); continue; }
	signer=$(in_root modinfo -F signer "/$ko" 2>&1)
	key=$(in_root modinfo -F sig_key "/$ko" 2>&1 | tr -d ':')
	echo "  $m: signer '$signer', key $key" >>"$log"
	[ "$signer" = "DKMS module signing key" ] || bad+=("$m's signer is '$signer'")
	[ -n "$serial" ] && [ "${key^^}" = "${serial^^}" ] || bad+=("$m's key $key is not mok.pub's ($serial)")
done
if [ ${#bad[@]} = 0 ]; then
	result PASS dkms-signed
	echo "  signer of nv_peer_mem, nvidia-current and ib_core: DKMS module signing key, serial $serial ($subject)"
else result FAIL dkms-signed "$(IFS=';'; echo "${bad[*]}")"; fi
in_root openssl x509 -inform DER -in /var/lib/dkms/mok.pub -out /tmp/mok.pem 2>>"$log"
cp "$root/tmp/mok.pem" "$work/share/mok.pem" 2>>"$log"

# --- the machine's disk: GPT, the ESP with shim, MokManager and grub, the root -------------
unmount_under "$root"
t=$root/usr/lib/nvpm-stock
mkdir -p "$t/scenarios" "$root/etc/nvpm"
install -m 755 "$stock/stock-vm.sh" "$t/stock-vm.sh"
install -m 644 "$top/tests/vm/lib.py" "$top/tests/vm/cleanup.py" "$t/"
install -m 644 "$stock"/scenarios/stock-*.py "$here"/scenarios/*.py \
	"$top"/tests/scenarios/{03-register-dma,07-invalidate,13-free-races}.* "$t/scenarios/"
gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$root/usr/local/bin/race" "$top/tests/vm/race.c" >>"$log" 2>&1 ||
	fatal harness "building tests/vm/race.c failed; see $log"
install -m 644 "$stock/nvpm-stock.service" "$root/etc/systemd/system/"
ln -sf /etc/systemd/system/nvpm-stock.service "$root/etc/systemd/system/multi-user.target.wants/"
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
echo "/dev/vda2 / ext4 defaults 0 1" >"$root/etc/fstab"
mkdir -p "$work/bars"
for g in 0 1; do
	python3 "$top/tests/vm/mkbar.py" $((g + 1)) 16 "$work/bars/gpu$g.img" "$work/bars/gpu$g.sha256"
	cp "$work/bars/gpu$g.sha256" "$root/etc/nvpm/"
done
# The ESP: 1 MiB in, 64 MiB; the root right after it; the backup GPT in the last MiB.
esp_mib=64
root_mib=$(($(du -sm "$root" | cut -f1) + 512))
disk=$work/share/disk.img
rm -f "$disk"
truncate -s $((1 + esp_mib + root_mib + 1))M "$disk"
printf 'label: gpt\nstart=2048, size=%d, type=U, name="EFI system"\nstart=%d, size=%d, type=L, name=root\n' \
	$((esp_mib * 2048)) $(((1 + esp_mib) * 2048)) $((root_mib * 2048)) >"$work/share/partitions"
in_tools sh -c 'sfdisk -q /w/disk.img </w/partitions' >>"$log" 2>&1 || fatal disk "sfdisk failed; see $log"
in_tools mkfs.vfat --offset=2048 -F 32 -s 1 -n ESP /w/disk.img $((esp_mib * 1024)) >>"$log" 2>&1 ||
	fatal disk "mkfs.vfat failed; see $log"
# shim as the removable-media boot loader, grub and MokManager next to it (shim loads them from
# its own directory); grub's signed image reads /EFI/debian/grub.cfg (its prefix) on the ESP.
esp() { in_tools "$@" -i /w/disk.img@@1M; }
{
	esp mmd ::/EFI ::/EFI/BOOT ::/EFI/debian &&
		esp mcopy "/w/fw${shim#"$fw"}" ::/EFI/BOOT/BOOTX64.EFI &&
		esp mcopy "/w/fw${grub#"$fw"}" ::/EFI/BOOT/grubx64.efi &&
		esp mcopy "/w/fw${mm#"$fw"}" ::/EFI/BOOT/mmx64.efi
} >>"$log" 2>&1 || fatal disk "mtools could not fill the ESP; see $log"
mke2fs -q -F -t ext4 -L sbroot -E offset=$(((1 + esp_mib) * 1048576)) -d "$root" "$disk" "${root_mib}M" >>"$log" 2>&1 ||
	fatal disk "mke2fs failed; see $log"
# What run-vm.sh boots: the firmware, the variables, and how the command line reaches grub.
uefi() { # uefi DIR VARS: run-vm.sh's NVPM_VM_UEFI directory with those variables
	mkdir -p "$1"
	cp "$code" "$1/code.fd"
	cp "$2" "$1/vars.fd"
	cat >"$1/set-cmdline" <<EOS
#!/bin/sh
# set-cmdline DISK CMDLINE: grub.cfg on the disk's ESP, booting Debian's $kver with CMDLINE
[ "\$1" = "$disk" ] || { echo "set-cmdline: not the disk \$1" >&2; exit 1; }
printf 'set timeout=0\nsearch --no-floppy --label --set=root sbroot\nlinux /boot/vmlinuz-%s %s\ninitrd /boot/initrd.img-%s\nboot\n' \\
	"$kver" "\$2" "$kver" >"$work/share/grub.cfg"
chroot "$tools" mcopy -o -i /w/disk.img@@1M /w/grub.cfg ::/EFI/debian/grub.cfg
EOS
	chmod 755 "$1/set-cmdline"
}
cp "$vars" "$work/share/vars-ms.fd"
if in_tools virt-fw-vars -i /w/vars-ms.fd --add-mok "$shim_guid" /w/mok.pem -o /w/vars-mok.fd >>"$log" 2>&1 &&
	grep -q 'DKMS module signing key' <<<"$(in_tools virt-fw-vars -i /w/vars-mok.fd -p -v 2>&1)"; then
	result PASS mok-enrolled
else fatal mok-enrolled "virt-fw-vars --add-mok did not put /var/lib/dkms/mok.pub into MokList; see $log"; fi
uefi "$work/uefi-mok" "$work/share/vars-mok.fd"
uefi "$work/uefi-ms" "$work/share/vars-ms.fd"
# run-vm.sh looks for the BARs beside its INITRAMFS argument.
touch "$work/initrd.img"

# --- two boots: the key enrolled, then not ---------------------------------------------------
# no_timer_check: booted through OVMF under a loaded host, the kernel's check that the timer
# interrupt arrives through the interrupt-remapped IO-APIC failed and it panicked ("timer
# doesn't work through Interrupt-remapped IO-APIC", 2026-11-27, load average 15 on 2 cores);
# the -kernel boots of the other worlds have not met it. A VM's timer needs no such check.
boot() { # boot NAME UEFI-DIR SCENARIO...
	local name=$1 dir=$2 start=$SECONDS
	shift 2
	NVPM_VM_TIMEOUT=$((900 + 300 * $#)) NVPM_VM_DISK=$disk NVPM_VM_ROOT=/dev/vda2 NVPM_VM_UEFI=$dir \
		NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x no_timer_check" \
		"$top/tests/vm/run-vm.sh" none "$work/initrd.img" "$work/boot-$name" "$@" 2>>"$log" |
		sed 's/^\(PASS\|FAIL\) /\1 secureboot:/'
	echo "  boot $name: $((SECONDS - start)) s (TCG)"
}
unmount_under "$root"
{
	boot 1-mok "$work/uefi-mok" sb-enrolled stock-boot stock-service 03-register-dma 07-invalidate 13-free-races
	boot 2-no-mok "$work/uefi-ms" sb-rejected
} | tee "$work/boots.out"
grep -q '^FAIL' "$work/boots.out" && failed=1
exit $failed
