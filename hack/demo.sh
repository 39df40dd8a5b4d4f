#!/usr/bin/env bash
# make demo: tether's main job on the local environment.
#
# Starts a real control plane with the KubeVirt emulator and a tenant cluster,
# seeds a realistic scene, then runs: tether audit, tether fix (plan),
# tether fix --apply, tether audit again, and shows that exactly the orphans
# went away. KEEP=1 leaves the environment running afterwards. KUBEVIRT=real
# runs it on real KubeVirt (virt-api and virt-controller built by
# hack/kubevirt.sh) instead of the emulator; there a migration converges at
# once (only tests, in process, can hold one), so the demo does not migrate
# node-3 and its orphan is detached too. KUBEVIRT=handler adds real
# virt-handler on a real node (root): a tiny guest boots there under QEMU's
# software emulation, gets a hot-plug its tenant wants and an orphan, and
# says on its serial console that the orphan's disk went.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_DIR=.tether-env
BIN=bin
export KUBECONFIG="$PWD/$ENV_DIR/kubeconfig"
TENANT_KC="$PWD/$ENV_DIR/tenant-guest.kubeconfig"
k() { kubectl "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
	if [ "${KEEP:-0}" = 1 ]; then
		echo; echo "Environment left running (KEEP=1): export KUBECONFIG=$KUBECONFIG; stop it with: make env-down"
	else
		"$BIN/tether-env" down --dir "$ENV_DIR" >/dev/null 2>&1 || true
	fi
}

KUBEVIRT=${KUBEVIRT:-emulator}
step "Starting the local environment (control plane, KubeVirt: $KUBEVIRT, tenant cluster 'guest')"
"$BIN/tether-env" down --dir "$ENV_DIR" >/dev/null 2>&1 || true
"$BIN/tether-env" up --dir "$ENV_DIR" --tenant guest --migration-duration 30m --kubevirt "$KUBEVIRT" >/dev/null
trap cleanup EXIT

step "Seeding the scene"
# The hot-plug API at VMI level needs KubeVirt's HotplugVolumes gate.
k patch kubevirt kubevirt -n kubevirt --type merge \
	-p '{"spec":{"configuration":{"developerConfiguration":{"featureGates":["HotplugVolumes"]}}}}' >/dev/null
if [ "$KUBEVIRT" = handler ]; then
	# These VMs have no guest OS: keep them on the kwok nodes (the emulated
	# handler's), away from the real node and its kube-scheduler.
	sed 's/^    spec:$/    spec:\n      nodeSelector: {type: kwok}/' hack/demo/infra.yaml | k apply -f - >/dev/null
else
	k apply -f hack/demo/infra.yaml >/dev/null
fi
for ns_claim in tenant-a/node-1-root tenant-a/node-2-root tenant-a/node-3-root legacy/app-1-root legacy/app-2-root \
	tenant-a/pvc-aaa tenant-a/pvc-bbb tenant-a/pvc-ccc tenant-a/pvc-ddd tenant-a/pvc-eee tenant-a/manual-disk legacy/pvc-scratch; do
	ns=${ns_claim%/*} claim=${ns_claim#*/}
	k create -n "$ns" -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
YAML
done
for vmi in tenant-a/node-1 tenant-a/node-2 tenant-a/node-3 legacy/app-1; do
	until [ "$(k get vmi -n "${vmi%/*}" "${vmi#*/}" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; do sleep 0.2; done
done
# hotplug LEVEL NS NAME VOLUME: the virtctl addvolume call, as a raw PUT.
hotplug() {
	local level=$1 ns=$2 name=$3 vol=$4
	k replace --raw "/apis/subresources.kubevirt.io/v1/namespaces/$ns/$level/$name/addvolume" -f - >/dev/null <<JSON
{"name":"$vol","disk":{"name":"$vol","serial":"$vol","disk":{"bus":"scsi"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"$vol","hotpluggable":true}}}
JSON
}
hotplug virtualmachines         tenant-a node-1 pvc-aaa      # persisted in the VM spec; tenant attaches it
hotplug virtualmachineinstances tenant-a node-1 pvc-bbb      # VMI-only; tenant attaches it
hotplug virtualmachineinstances tenant-a node-2 pvc-ccc      # VMI-only; tenant detached it long ago: orphan
hotplug virtualmachineinstances tenant-a node-2 pvc-ddd      # VMI-only; tenant detached it: orphan
hotplug virtualmachineinstances tenant-a node-2 manual-disk  # not a CSI-driver volume: out of scope
hotplug virtualmachineinstances tenant-a node-3 pvc-eee      # orphan, but its VMI is migrating
hotplug virtualmachineinstances legacy   app-1  pvc-scratch  # VMI-only, no tenant evidence: legitimate as far as anyone knows
kubectl --kubeconfig "$TENANT_KC" apply -f hack/demo/tenant.yaml >/dev/null
until [ "$(k get vmi -A -o jsonpath='{range .items[*]}{range .status.volumeStatus[*]}{.hotplugVolume.attachPodName}{" "}{end}{end}' | wc -w)" -ge 7 ]; do sleep 0.2; done
expected_gone="pvc-ccc pvc-ddd"
if [ "$KUBEVIRT" = handler ]; then
	. hack/demo/guest.sh
	expected_gone="pvc-ccc pvc-ddd pvc-ggg"
fi
if [ "$KUBEVIRT" = emulator ]; then
k create -f - >/dev/null <<YAML
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceMigration
metadata: {name: move-node-3, namespace: tenant-a}
spec: {vmiName: node-3}
YAML
until [ -n "$(k get vmi -n tenant-a node-3 -o jsonpath='{.status.migrationState.startTimestamp}')" ]; do sleep 0.2; done
else
	expected_gone="$expected_gone pvc-eee"
fi

# A claim someone tried to delete, held by a batch pod that finished long ago
# and was never cleaned up: the PVC stays Terminating.
k create -n legacy -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc-archive}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: archive-job}
spec:
  nodeName: node-1
  restartPolicy: Never
  containers: [{name: job, image: registry.invalid/archiver:1, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: pvc-archive}}]
YAML
k patch pod -n legacy archive-job --subresource=status --type merge -p '{"status":{"phase":"Succeeded"}}' >/dev/null
k delete pvc -n legacy pvc-archive --wait=false >/dev/null

volumes() {
	k get vmi -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}:{range .status.volumeStatus[*]} {.name}{end}{"\n"}{end}'
}
echo "VMIs and their volumes:"
volumes | sed 's/^/  /'
volumes > "$ENV_DIR/before.txt"
k get pods -A -l kubevirt.io=hotplug-disk -o name | sort > "$ENV_DIR/pods-before.txt"

# --blocked-deletion-grace: the demo cannot wait the default minute for the
# claim above to count as stuck.
SCOPE=(-A --volume-prefix pvc- --tenant "guest=$TENANT_KC:tenant-a" --blocked-deletion-grace 1s)

step "tether audit ${SCOPE[*]}"
"$BIN/tether" audit "${SCOPE[@]}" || echo "(exit code $?: findings)"

# The same findings as a picture: -o dot for Graphviz (docs/images/audit.svg comes from here).
"$BIN/tether" audit "${SCOPE[@]}" -o dot > "$BIN/demo-audit.dot" || true
if command -v dot >/dev/null; then
	dot -Tsvg "$BIN/demo-audit.dot" > "$BIN/demo-audit.svg"
	echo "The world around each finding, drawn: $BIN/demo-audit.svg (from $BIN/demo-audit.dot)"
else
	echo "The world around each finding, for Graphviz: $BIN/demo-audit.dot (dot -Tsvg $BIN/demo-audit.dot > audit.svg)"
fi

step "tether fix (the plan: a dry run, nothing changes)"
"$BIN/tether" fix "${SCOPE[@]}"

step "tether fix --apply"
"$BIN/tether" fix "${SCOPE[@]}" --apply

if [ "$KUBEVIRT" = handler ]; then
	guest_says "TETHER-DISK-REMOVED name=[a-z]* serial=pvc-ggg"
fi

step "tether audit, again"
"$BIN/tether" audit "${SCOPE[@]}" || echo "(exit code $?: findings)"

step "tether fix --check DanglingVolumeReference --object legacy/app-2 --apply (the per-VM cleanup)"
"$BIN/tether" fix -n legacy --check DanglingVolumeReference --object legacy/app-2 --apply
echo "app-2 volumes now: $(k get vm -n legacy app-2 -o jsonpath='{.spec.template.spec.volumes[*].name}')"

step "What changed"
volumes > "$ENV_DIR/after.txt"
k get pods -A -l kubevirt.io=hotplug-disk -o name | sort > "$ENV_DIR/pods-after.txt"
diff -u "$ENV_DIR/before.txt" "$ENV_DIR/after.txt" | sed -n '/^[-+][^-+]/p' || true
gone=$( (diff <(tr ' ' '\n' < "$ENV_DIR/before.txt" | sort) <(tr ' ' '\n' < "$ENV_DIR/after.txt" | sort) || true) | sed -n 's/^< //p' | sort | xargs)
expected_gone=$(tr ' ' '\n' <<<"$expected_gone" | sort | xargs)
if [ "$gone" = "$expected_gone" ]; then
	echo "OK: exactly the orphans ($expected_gone) were detached; everything else is as it was."
else
	echo "UNEXPECTED: volumes gone: '$gone', expected '$expected_gone'" >&2
	exit 1
fi
