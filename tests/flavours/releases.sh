# shellcheck shell=bash disable=SC2154,SC2034 # the sourcing script's variables, and its failed
# The newest Debian 7.x release beyond trixie-backports, on the flavours world's machine (make
# fullcheck): sourced by flavours-world.sh once its boots are over, with its root, in_root,
# result (prefix releases), dkms_built, machine_pieces, completion and the harness installed.
# As an administrator of a trixie machine who wants sid's kernel would:
#   1. sid in the sources at a low priority (nothing else comes from it unless asked);
#   2. apt-get install -t sid of the image, the headers and linux-source-X.Y of that release:
#      whatever the headers need from sid comes along (their gcc, and the gcc runtime libraries
#      it needs), and is reported; DKMS builds the doubles, and skips nv_peer_mem with
#      rust-tree.sh's reason when trixie's rustc is not the one the kernel names;
#   3. the fix that reason names, as given (sid's rustc and rust-src, -t sid), with sid's
#      bindgen, then dkms autoinstall;
#   4. a boot of that kernel: stock-boot and the registration scenario.
# Results releases:sid-<check> and releases:sid:<scenario>. A release that cannot be installed
# fails releases:sid-apt with the unmet dependencies apt names: a finding for
# Documentation/kernels.md.

mounts
mirror=$(awk '$1 == "deb" { print $2; exit }' "$root/etc/apt/sources.list")
# check-valid-until=no: the archive the tests reach may be a snapshot, whose sid Release file
# has expired (2026-11-28: "invalid since 22d"); trixie's have no end date.
echo "deb [check-valid-until=no] $mirror sid main" >"$root/etc/apt/sources.list.d/sid.list"
printf 'Package: *\nPin: release n=sid\nPin-Priority: 50\n' >"$root/etc/apt/preferences.d/sid"
in_root apt-get update -q >"$work/sid-update.log" 2>&1 || fatal sid-apt "apt-get update with sid failed; see $work/sid-update.log"
# The newest 7.x image of sid whose linux-source-X.Y is in sid in the same version.
in_sid() { # in_sid PACKAGE: its version in sid, or nothing
	in_root apt-cache madison "$1" 2>/dev/null | awk -F'|' '$3 ~ / sid\// { gsub(/ /, "", $2); print $2; exit }'
}
sid_k=
for k in $(in_root apt-cache search --names-only '^linux-image-7\.[0-9.]+\+deb[0-9]+-amd64$' |
	sed -n 's/^linux-image-\([^ ]*\) .*/\1/p' | sort -V | tac); do
	v=$(in_sid "linux-image-$k")
	[ -n "$v" ] && [ "$(in_sid "linux-source-$(cut -d. -f1,2 <<<"$k")")" = "$v" ] && { sid_k=$k; break; }
done
[ -n "$sid_k" ] || fatal sid-apt "no 7.x linux-image in sid whose linux-source is there in the same version"
src=linux-source-$(cut -d. -f1,2 <<<"$sid_k")
say "releases: sid's $sid_k"
seed_tree "$sid_k"
start=$SECONDS
in_root apt-get install -y -q --no-install-recommends -t sid "linux-image-$sid_k" "linux-headers-$sid_k" "$src" \
	>"$work/sid-apt.log" 2>&1
rc=$?
cat "$work/sid-apt.log" >>"$log"
# What came from sid besides the kernel: apt's "will be upgraded" list, and the new packages
# that are not the kernel's own.
upgraded=$(sed -n '/^The following packages will be upgraded:/,/^[0-9]* upgraded/p' "$work/sid-apt.log" |
	sed '1d;$d' | xargs)
if [ $rc = 0 ] && [ -z "$(in_root dpkg --audit 2>&1)" ]; then
	result PASS sid-apt
	echo "  apt-get install -t sid linux-image-$sid_k linux-headers-$sid_k $src: $((SECONDS - start)) s; upgraded from sid: ${upgraded:-nothing}"
else
	result FAIL sid-apt "apt-get install -t sid linux-image-$sid_k linux-headers-$sid_k $src: exit $rc: $(grep -E 'Depends:|^E: ' "$work/sid-apt.log" | head -n 4 | paste -sd ' ' | tr -s ' ')"
	exit 1
fi
# trixie's rustc is not the one sid's kernel was built with: nv_peer_mem is skipped with the fix.
skip=$(grep -m1 "^nv_peer_mem: kernel $sid_k was built with '" "$work/sid-apt.log")
echo "  ${skip:-no rustc problem reported for $sid_k}"
fix=$(grep -o 'apt-get install [^)]*rustc=[^)]*' <<<"$skip")
if [ -n "$fix" ]; then
	# The fix as rust-tree.sh gives it (with -t the suite that has that version), and bindgen
	# from there too (olddefconfig records the bindgen it finds; the kernel's names sid's).
	start=$SECONDS
	read -ra fix_args <<<"${fix#apt-get install }"
	in_root apt-get install -y -q --no-install-recommends "${fix_args[@]}" bindgen >"$work/sid-rustc.log" 2>&1
	rc=$?
	cat "$work/sid-rustc.log" >>"$log"
	if [ $rc = 0 ] && [ -z "$(in_root dpkg --audit 2>&1)" ]; then
		result PASS sid-rustc-fix
		echo "  $fix bindgen: $((SECONDS - start)) s; rustc is now $(in_root rustc --version 2>&1), $(in_root bindgen --version 2>&1)"
	else
		result FAIL sid-rustc-fix "$fix bindgen: exit $rc: $(grep -E '^E: |Depends:' "$work/sid-rustc.log" | head -n 3 | paste -sd ' ' | tr -s ' ')"
	fi
else
	result FAIL sid-rustc-fix "no 'apt-get install ... rustc=...' fix in rust-tree.sh's line: '${skip:-(none)}'"
fi
start=$SECONDS
in_root dkms autoinstall -k "$sid_k" >"$work/sid-dkms.log" 2>&1
echo "  dkms autoinstall -k $sid_k: exit $? in $((SECONDS - start)) s"
cat "$work/sid-dkms.log" >>"$log"
if why=$(dkms_built sid "$sid_k"); then
	result PASS sid-dkms
	echo "  $sid_k: $(completion "$sid_k")"
	keep_tree "$sid_k"
else
	# Nothing to boot: say why DKMS built nothing (rust-tree.sh's sentences in the make.log).
	fatal sid-dkms "$why; $(grep -h '^nv_peer_mem: ' "$work/sid-dkms.log" "$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | grep -v 'completing' | head -n 2 | paste -sd ' ')"
fi
missing=$(machine_pieces "$sid_k")
if [ -z "$missing" ]; then result PASS sid-machine
else result FAIL sid-machine "$sid_k lacks what the machine needs: $missing"; fi

unmount_under "$root/proc"
unmount_under "$root/sys"
cp "$root/boot/vmlinuz-$sid_k" "$work/vmlinuz-sid" && cp "$root/boot/initrd.img-$sid_k" "$work/initrd-sid.img" ||
	fatal sid-machine "no kernel or initrd for $sid_k in /boot"
size=$(($(du -sm "$root" | cut -f1) + 512))
mke2fs -q -F -t ext4 -L stock -d "$root" "$disk" "${size}M" >>"$log" 2>&1 || fatal sid-machine "mke2fs of the disk failed; see $log"
boot sid stock-boot 03-register-dma | tee "$work/boot-sid.out"
grep -q '^FAIL' "$work/boot-sid.out" && failed=1
