# shellcheck shell=sh
# The Secure Boot machine with DKMS's key enrolled in the firmware's MokList (as mokutil --import
# and MokManager leave it): booted through shim and grub with Secure Boot on, the kernel locked
# down, the key in the kernel's keys, and the signed modules loaded at boot (ONBOOT=yes).
check "PID 1 is systemd" test "$(cat /proc/1/comm)" = systemd
lockdown=$(cat /sys/kernel/security/lockdown 2>&1)
echo "  lockdown: $lockdown"
check "the kernel is locked down" contains "$lockdown" '\[integrity\]\|\[confidentiality\]'
sb=$(mokutil --sb-state 2>&1)
echo "  mokutil --sb-state: $sb"
check "mokutil: Secure Boot enabled" contains "$sb" '^SecureBoot enabled'
check "  the kernel saw it too" contains "$(dmesg)" 'Secure boot enabled'
key=$(mokutil --test-key /var/lib/dkms/mok.pub 2>&1)
echo "  mokutil --test-key /var/lib/dkms/mok.pub: $key"
check "DKMS's key is enrolled" contains "$key" 'is already enrolled'
check "  and the kernel loaded it from the MOK list" \
	contains "$(dmesg)" "Loaded X.509 cert 'DKMS module signing key"
check "nv_peer_mem loaded at boot (ONBOOT=yes)" systemctl is-active --quiet nv_peer_mem
check "  the module is in" test -d /sys/module/nv_peer_mem
# Debian's layout of the driver: the file is nvidia-current.ko (module name nvidia).
for m in nv_peer_mem nvidia-current ib_core; do
	check "$m signed by DKMS's key" test "$(modinfo -F signer $m 2>&1)" = "DKMS module signing key"
done
echo "  module.sig_enforce: $(cat /sys/module/module/parameters/sig_enforce 2>&1)"
t=$(cat /proc/sys/kernel/tainted)
# 4096: out-of-tree module (O); 8192 (E, unsigned) must not be there: the modules are signed.
check "kernel taint only out-of-tree ($t)" test $((t & ~4096)) = 0
finish
