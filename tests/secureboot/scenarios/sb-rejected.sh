# shellcheck shell=sh
# The Secure Boot machine with DKMS's key not in the MOK list: the signed modules are rejected,
# the service says so in one line, and nv_peer_mem doctor names Secure Boot, the key and the fix.
lockdown=$(cat /sys/kernel/security/lockdown 2>&1)
check "the kernel is locked down ($lockdown)" contains "$lockdown" '\[integrity\]\|\[confidentiality\]'
check "mokutil: Secure Boot enabled" contains "$(mokutil --sb-state 2>&1)" '^SecureBoot enabled'
key=$(mokutil --test-key /var/lib/dkms/mok.pub 2>&1)
echo "  mokutil --test-key /var/lib/dkms/mok.pub: $key"
check "DKMS's key is not enrolled" contains "$key" 'is not enrolled'
check "nv_peer_mem was not loaded at boot" test ! -d /sys/module/nv_peer_mem
check "  the unit failed" systemctl is-failed --quiet nv_peer_mem
boot_said=$(journalctl -b -o cat -u nv_peer_mem 2>&1 | grep '^nv_peer_mem: ')
echo "$boot_said" | sed 's/^/  journal| /'
fix='mokutil --import /var/lib/dkms/mok.pub, reboot, and confirm it in MokManager'
check "  and said why at boot, in one line" one_line "$boot_said"
check "  naming Secure Boot and the fix" contains "$boot_said" "Secure Boot is on and the kernel rejected .*$fix"
# The service's own script (service(8) hands a start to systemd, whose words these are not).
out=$(nv_peer_mem start 2>&1)
rc=$?
echo "  \$ nv_peer_mem start: rc=$rc: $out"
check "nv_peer_mem start: exit 1" test $rc = 1
check "  one line" one_line "$out"
check "  naming Secure Boot, the signer and the fix" \
	contains "$out" "Secure Boot is on and the kernel rejected the .* (DKMS module signing key); enroll DKMS's key: $fix"
out=$(modprobe nv_peer_mem 2>&1)
rc=$?
echo "  modprobe nv_peer_mem: exit $rc: $out"
check "modprobe nv_peer_mem fails" test $rc != 0
check "  the key was rejected" contains "$out" 'Key was rejected by service'
check "the kernel says why" contains "$(dmesg)" 'Loading of module with unavailable key is rejected'
out=$(nv_peer_mem doctor 2>&1)
rc=$?
echo "$out" | sed 's/^/  doctor| /'
check "nv_peer_mem doctor: exit 1" test $rc = 1
check "  FAIL naming Secure Boot and the key that signed the module" contains "$out" \
	"^FAIL module.signature: Secure Boot is on and the kernel does not trust the key that signed \(/usr\)\{0,1\}/lib/modules/$(uname -r)/updates/dkms/nv_peer_mem.ko.xz ('DKMS module signing key', serial [0-9A-F]*, /var/lib/dkms/mok.pub)"
check "  and the fix" contains "$out" \
	"^FAIL module.signature: .* -> fix: mokutil --import /var/lib/dkms/mok.pub, reboot, and confirm the key in MokManager"
finish
