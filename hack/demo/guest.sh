# Sourced by hack/demo.sh with KUBEVIRT=handler: a real guest on the real
# node. Real virt-handler and virt-launcher boot it under QEMU's software
# emulation; its serial console (the launcher's guest-console-log
# container) says when it is up and which disks come and go, by serial.
GUEST_IMAGE=tether.local/kubevirt/guest-kernel:v1.9.0

# guest_says PATTERN: wait until the guest's console has a line matching
# PATTERN, and print it. The console is the launcher's guest-console-log
# container's log on the real node (tether-env links the node's log
# directory into its own; CRI log lines are "time stream tag text").
guest_says() {
	local line
	for _ in $(seq 900); do
		if line=$(cat "$ENV_DIR"/node-logs/pods/tenant-a_virt-launcher-node-4-*/guest-console-log/*.log 2>/dev/null | cut -d' ' -f4- | grep -E -m1 "$1"); then
			echo "  the guest of node-4 says: $line"
			return 0
		fi
		sleep 0.2
	done
	echo "the guest of node-4 never said '$1' in 3 minutes" >&2
	return 1
}

k create -f - >/dev/null <<YAML
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: node-4, namespace: tenant-a, labels: {kubevirt.io/vm: node-4}}
spec:
  nodeSelector: {kubernetes.io/hostname: real-node}
  domain:
    resources: {requests: {memory: 192Mi}}
    firmware:
      kernelBoot:
        kernelArgs: console=ttyS0 panic=-1 quiet
        container: {image: $GUEST_IMAGE, imagePullPolicy: Never, kernelPath: /boot/vmlinuz, initrdPath: /boot/initrd.img}
    devices: {autoattachPodInterface: false}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc-fff, namespace: tenant-a}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 64Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc-ggg, namespace: tenant-a}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 64Mi}}}
YAML
echo "A real guest, node-4, boots on the real node (real virt-handler and virt-launcher, QEMU under software emulation):"
guest_says TETHER-GUEST-UP
hotplug virtualmachineinstances tenant-a node-4 pvc-fff  # VMI-only; the tenant attaches it
hotplug virtualmachineinstances tenant-a node-4 pvc-ggg  # VMI-only; the tenant released it: orphan
kubectl --kubeconfig "$TENANT_KC" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: worker-d, annotations: {cluster.x-k8s.io/cluster-namespace: tenant-a}}
spec: {providerID: "kubevirt://node-4"}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: guest-pv-fff}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  csi: {driver: csi.kubevirt.io, volumeHandle: pvc-fff}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: csi-fff}
spec:
  attacher: csi.kubevirt.io
  nodeName: worker-d
  source: {persistentVolumeName: guest-pv-fff}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: guest-pv-ggg}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  csi: {driver: csi.kubevirt.io, volumeHandle: pvc-ggg}
YAML
guest_says "TETHER-DISK-ADDED name=[a-z]* serial=pvc-fff"
guest_says "TETHER-DISK-ADDED name=[a-z]* serial=pvc-ggg"
until [ "$(k get vmi -n tenant-a node-4 -o jsonpath='{.status.volumeStatus[?(@.phase=="Ready")].name}' | wc -w)" -ge 2 ]; do sleep 0.2; done
