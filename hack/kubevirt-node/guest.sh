#!/usr/bin/env bash
# Builds the root of the test world's tiny guest, the kernel-boot image of
# its VMIs (spec.domain.firmware.kernelBoot.container): /boot/vmlinuz, Debian
# 12's cloud kernel, and /boot/initrd.img, busybox with the modules a q35
# guest needs to see disks hot-plugged on the SCSI bus (and virtio disks).
# The initrd's /init says TETHER-GUEST-UP on the serial console, then one
# line per disk that comes or goes:
#
#   TETHER-DISK-ADDED name=sdb serial=hp1 size=67108864
#   TETHER-DISK-REMOVED name=sdb serial=hp1
#
# (the serial is the disk's SCSI unit serial, KubeVirt's disk serial, or
# "-"). virt-controller runs the image with the container-disk binary
# mounted on /usr/bin, as user 107: the files only need to be readable.
#
#   guest.sh DIR    writes DIR/boot/vmlinuz and DIR/boot/initrd.img
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: guest.sh DIR" >&2; exit 2; }
out=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The packages from the host's apt (Debian 12, as the images' roots).
apt-cache show linux-image-cloud-amd64 >/dev/null 2>&1 || apt-get update -q >&2
kernel=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$kernel" ] || { echo "guest.sh: apt names no kernel for linux-image-cloud-amd64 (a Debian 12 host with its apt sources is needed)" >&2; exit 1; }
(cd "$work" && apt-get download -q "$kernel" busybox-static >/dev/null 2>&1) ||
	{ echo "guest.sh: apt-get download $kernel busybox-static failed" >&2; exit 1; }
dpkg-deb -x "$work/$kernel"_*.deb "$work/k"
dpkg-deb -x "$work"/busybox-static_*.deb "$work/b"
version=$(ls "$work/k/lib/modules")

# The modules and what they need (each module's own depends= field; the
# package leaves modules.dep to depmod at installation), in load order.
wanted=(virtio_pci virtio_scsi sd_mod virtio_blk)
moddir=lib/modules/$version
declare -A seen=()
order=()
add() {
	local name=$1 file path dep
	file=$(find "$work/k/$moddir" -name "$name.ko" -o -name "${name//_/-}.ko" | head -1)
	[ -n "$file" ] || { echo "guest.sh: no module $name in $kernel" >&2; exit 1; }
	path=${file#"$work/k/$moddir/"}
	[ -z "${seen[$path]:-}" ] || return 0
	seen[$path]=1
	for dep in $(tr '\0' '\n' <"$file" | sed -n 's/^depends=//p' | tr ',' ' '); do
		add "$dep"
	done
	order+=("$path")
}
for m in "${wanted[@]}"; do add "$m"; done

r=$work/initrd
mkdir -p "$r"/{bin,dev,proc,sys,"$moddir"}
install -m 0755 "$work/b/bin/busybox" "$r/bin/busybox"
for path in "${order[@]}"; do
	install -D -m 0644 "$work/k/$moddir/$path" "$r/$moddir/$path"
	# insmod in this order: no modprobe, no modules.dep needed.
	echo "/$moddir/$path" >>"$r/modules"
done
cat >"$r/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "$m" 2>/dev/null; done </modules
echo TETHER-GUEST-UP
# serial NAME: the SCSI unit serial (VPD page 0x80 without its 4-byte
# header), else a virtio disk's serial, else "-".
serial() {
	s=
	if [ -r "/sys/block/$1/device/vpd_pg80" ]; then
		s=$(dd if="/sys/block/$1/device/vpd_pg80" bs=1 skip=4 2>/dev/null | tr -d '\000' | tr -d ' ')
	elif [ -r "/sys/block/$1/serial" ]; then
		s=$(tr -d ' ' <"/sys/block/$1/serial")
	fi
	echo "${s:--}"
}
known=
while :; do
	now=
	for d in /sys/block/sd* /sys/block/vd*; do
		[ -e "$d" ] || continue
		n=${d##*/}
		now="$now $n"
		case " $known " in *" $n "*) continue ;; esac
		s=$(serial "$n")
		eval "serial_$n=\$s"
		echo "TETHER-DISK-ADDED name=$n serial=$s size=$(($(cat "$d/size") * 512))"
	done
	for n in $known; do
		case " $now " in *" $n "*) continue ;; esac
		eval "s=\$serial_$n"
		echo "TETHER-DISK-REMOVED name=$n serial=$s"
	done
	known=$now
	sleep 1
done
EOF
chmod 0755 "$r/init"
mkdir -p "$out/boot"
(cd "$r" && find . | sort | "$r/bin/busybox" cpio -o -H newc 2>/dev/null) | gzip -9 -n >"$out/boot/initrd.img"
install -m 0644 "$work/k/boot/vmlinuz-$version" "$out/boot/vmlinuz"
chmod 0644 "$out/boot/initrd.img"
chmod 0755 "$out/boot"
echo "guest.sh: $kernel, initrd $(stat -c %s "$out/boot/initrd.img") bytes" >&2
