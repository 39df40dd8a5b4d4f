#!/usr/bin/env bash
# make demo-openstack: tether on real Nova and Cinder.
#
# Starts the OpenStack test world (hack/openstack.sh), seeds the four kinds
# of drift between Nova's block device mappings and Cinder's attachments the
# way they arise, beside a healthy attachment, on running servers, then runs:
# tether openstack audit, tether openstack fix (the plan), fix --apply (which
# repairs the attachment of the server that never existed and the leftover
# reservation beside the attachment Nova uses: the running servers' other
# repairs are held ServerRunning), stops the two servers as the holds ask,
# fix --apply again (as a cron job would run it: with a state file for its
# blast-radius window and a metrics textfile) and audit again, and checks on
# both services that exactly the drift was repaired and the healthy
# attachment is as it was, and that both servers start again. KEEP=1 leaves the world
# running afterwards; OS_PORT_BASE picks its ports (default 18770).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin
PY=/usr/bin/python3
GRACE=${GRACE:-5s}
base=${OS_PORT_BASE:-18770}
dir=$(mktemp -d "${TMPDIR:-/tmp}/tether-demo-openstack-XXXXXX")
NOVA=http://127.0.0.1:$base/v2.1
CINDER=http://127.0.0.1:$((base + 1))/v3/admin
IMAGE=155d900f-4e14-4e4c-a73d-069cbf4541e6 # the Glance stub's image

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
	if [ "${KEEP:-0}" = 1 ]; then
		echo
		echo "World left running (KEEP=1): export OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml OS_CLOUD=tether-test"
		echo "Stop it with: hack/openstack.sh down --dir $dir"
	else
		hack/openstack.sh down --dir "$dir" >/dev/null 2>&1 || true
		rm -rf "$dir"
	fi
}

# api METHOD URL [JSON] [HEADER...]: one request with the world's admin token
# ("user:project"; the APIs run without Keystone); prints the body and fails
# on an HTTP error.
api() {
	local method=$1 url=$2 data=${3:-} args=()
	shift $(($# < 3 ? $# : 3))
	for h in "$@"; do args+=(-H "$h"); done
	case $url in
	"$NOVA"*) args+=(-H 'OpenStack-API-Version: compute 2.89') ;;
	*) args+=(-H 'OpenStack-API-Version: volume 3.54') ;;
	esac
	[ -z "$data" ] || args+=(--data "$data")
	curl -fsS -X "$method" -H 'X-Auth-Token: admin:admin' -H 'Content-Type: application/json' "${args[@]}" "$url"
}
# field EXPR: evaluates EXPR on the JSON document d read from stdin.
field() { "$PY" -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

wait_for() { # wait_for DESCRIPTION COMMAND...: until COMMAND succeeds, at most 60 s
	local what=$1 i
	shift
	for i in $(seq 240); do
		"$@" && return 0
		sleep 0.25
	done
	echo "UNEXPECTED: timed out waiting for $what; logs in $dir/logs" >&2
	exit 1
}
volume_is() { [ "$(api GET "$CINDER/volumes/$1" | field 'd["volume"]["status"]')" = "$2" ]; }
server_is() { [ "$(api GET "$NOVA/servers/$1" | field 'd["server"]["status"]')" = "$2" ]; }
power() { # power SERVER stop|start: os-stop or os-start, waits for SHUTOFF or ACTIVE
	local want=SHUTOFF
	[ "$2" = start ] && want=ACTIVE
	api POST "$NOVA/servers/$1/action" "{\"os-$2\": null}" >/dev/null
	wait_for "server $1 $want" server_is "$1" "$want"
}

server() {
	local id
	id=$(api POST "$NOVA/servers" "{\"server\": {\"name\": \"$1\", \"imageRef\": \"$IMAGE\", \"flavorRef\": \"1\", \"networks\": \"none\"}}" | field 'd["server"]["id"]')
	wait_for "server $1 ACTIVE" server_is "$id" ACTIVE
	echo "$id"
}
volume() {
	local id
	id=$(api POST "$CINDER/volumes" "{\"volume\": {\"name\": \"$1\", \"size\": 1}}" | field 'd["volume"]["id"]')
	wait_for "volume $1 available" volume_is "$id" available
	echo "$id"
}
attach() { # attach SERVER VOLUME: through Nova; prints the Cinder attachment's ID
	api POST "$NOVA/servers/$1/os-volume_attachments" "{\"volumeAttachment\": {\"volumeId\": \"$2\"}}" >/dev/null
	wait_for "volume $2 in-use" volume_is "$2" in-use
	api GET "$NOVA/servers/$1/os-volume_attachments/$2" | field 'd["volumeAttachment"]["attachment_id"]'
}
# The state of each volume on both sides, one line each: Cinder's status and
# the servers its attachments name, and the servers on which Nova lists it.
state() {
	local name v s nova
	for name in "${!vol[@]}"; do
		v=${vol[$name]} nova=""
		for s in web-1 db-1; do
			if [ "$(api GET "$NOVA/servers/${srv[$s]}/os-volume_attachments" | field "any(a['volumeId'] == '$v' for a in d['volumeAttachments'])")" = True ]; then
				nova+="${nova:+,}$s"
			fi
		done
		records=$(api GET "$CINDER/attachments?volume_id=$v" | field 'len(d["attachments"])')
		api GET "$CINDER/volumes/$v" | field "'data-$name cinder=%s attached-to=%s nova-lists-it-on=%s cinder-attachments=$records' % (d['volume']['status'], ','.join(next((k for k, s in srv if s == a['server_id']), 'unknown-server') for a in d['volume']['attachments']) or '-', '${nova:--}')"
	done | sort
}

# expect NAME WANT WHAT: shows the state (saved as NAME.txt) and fails the
# demo, saying WHAT went wrong, unless it is WANT.
expect() {
	state >"$dir/$1.txt"
	column -t "$dir/$1.txt"
	if [ "$(cat "$dir/$1.txt")" != "$2" ]; then
		echo "UNEXPECTED: $3; want:" >&2
		echo "$2" | column -t >&2
		exit 1
	fi
}

step "Starting the OpenStack test world (real Nova, Placement and Cinder; Keystone, Glance and Neutron stubbed)"
hack/openstack.sh up --dir "$dir" --port-base "$base"
trap cleanup EXIT
export OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml OS_CLOUD=tether-test

step "Seeding the scene"
declare -A srv vol
srv[web-1]=$(server web-1)
srv[db-1]=$(server db-1)
for name in healthy dangling forgotten stale leftover; do vol[$name]=$(volume "data-$name"); done
# srv as Python pairs, for state()'s name lookup
srv_py="[$(for s in "${!srv[@]}"; do printf '("%s", "%s"),' "$s" "${srv[$s]}"; done)]"
field() { "$PY" -c "import json, sys; srv = $srv_py; d = json.load(sys.stdin); print($1)"; }

attach "${srv[web-1]}" "${vol[healthy]}" >/dev/null
echo "data-healthy:   attached to web-1 through Nova (stays as it is)"

a=$(attach "${srv[web-1]}" "${vol[dangling]}")
api DELETE "$CINDER/attachments/$a" "" "X-Service-Token: nova:service" >/dev/null # as Nova deletes it
wait_for "data-dangling available" volume_is "${vol[dangling]}" available
echo "data-dangling:  attached to web-1, then its Cinder attachment deleted as Nova does when a detach half-fails: Nova keeps its mapping"

attach "${srv[db-1]}" "${vol[forgotten]}" >/dev/null
"$PY" - "$dir/nova/nova_cell1.sqlite" "${srv[db-1]}" "${vol[forgotten]}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("update block_device_mapping set deleted = id, deleted_at = datetime('now') "
               "where instance_uuid = ? and volume_id = ? and deleted = 0", sys.argv[2:4]).rowcount
db.commit()
assert n == 1, n
PY
echo "data-forgotten: attached to db-1, then Nova's mapping lost (soft-deleted in its database): Cinder still in-use"

ghost=$("$PY" -c 'import uuid; print(uuid.uuid4())')
a=$(api POST "$CINDER/attachments" "{\"attachment\": {\"volume_uuid\": \"${vol[stale]}\", \"instance_uuid\": \"$ghost\", \"mode\": \"rw\", \"connector\": {\"host\": \"gone\", \"initiator\": \"iqn.2026-01.dev.tether:gone\", \"ip\": \"127.0.0.1\"}}}" | field 'd["attachment"]["id"]')
api POST "$CINDER/attachments/$a/action" '{"os-complete": null}' >/dev/null
wait_for "data-stale in-use" volume_is "${vol[stale]}" in-use
echo "data-stale:     in-use in Cinder for server $ghost, which Nova never had"

attach "${srv[web-1]}" "${vol[leftover]}" >/dev/null
api POST "$CINDER/attachments" "{\"attachment\": {\"volume_uuid\": \"${vol[leftover]}\", \"instance_uuid\": \"${srv[web-1]}\"}}" >/dev/null
echo "data-leftover:  attached to web-1 through Nova, and reserved once more for web-1 (a retried attach's leftover: a second Cinder attachment, reserved, no connector)"

step "Both sides now"
state | tee "$dir/before.txt" | column -t

step "tether openstack audit"
"$BIN/tether" openstack audit --grace "$GRACE" || echo "(exit code $?: findings)"

step "tether openstack fix --grace $GRACE (the plan: reads twice $GRACE apart, changes nothing)"
"$BIN/tether" openstack fix --grace "$GRACE"

step "tether openstack fix --grace $GRACE --apply (the running servers' mappings are held: ServerRunning; a reservation without a connector is deleted on a running server)"
"$BIN/tether" openstack fix --grace "$GRACE" --apply

step "Both sides now: the attachment of the server that never existed and the leftover reservation are gone"
expect held "data-dangling cinder=available attached-to=- nova-lists-it-on=web-1 cinder-attachments=0
data-forgotten cinder=in-use attached-to=db-1 nova-lists-it-on=- cinder-attachments=1
data-healthy cinder=in-use attached-to=web-1 nova-lists-it-on=web-1 cinder-attachments=1
data-leftover cinder=in-use attached-to=web-1 nova-lists-it-on=web-1 cinder-attachments=1
data-stale cinder=available attached-to=- nova-lists-it-on=- cinder-attachments=0" "the held repairs changed something, or the leftover reservation is still there"

step "Stopping web-1 and db-1 as the holds ask (openstack server stop: POST /servers/ID/action os-stop)"
for s in web-1 db-1; do power "${srv[$s]}" stop && echo "$s: SHUTOFF"; done

step "tether openstack fix --grace $GRACE --apply --state-file ... --metrics-textfile ... (as a cron job runs it)"
"$BIN/tether" openstack fix --grace "$GRACE" --apply --state-file "$dir/fix-state.json" --metrics-textfile "$dir/tether-openstack.prom" --log-format none
echo "-- the runs' blast-radius window ($dir/fix-state.json):"
"$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); print("tripped=%s actions=%d" % (s["tripped"], len(s.get("actions", []))))' "$dir/fix-state.json"
echo "-- the run's metrics ($dir/tether-openstack.prom):"
grep -E '^tether_(actions_total|blast_radius_tripped|run_success)' "$dir/tether-openstack.prom"

step "tether openstack audit, again"
"$BIN/tether" openstack audit --grace "$GRACE" || echo "(exit code $?: findings)"

step "Both sides now"
repaired="data-dangling cinder=available attached-to=- nova-lists-it-on=- cinder-attachments=0
data-forgotten cinder=available attached-to=- nova-lists-it-on=- cinder-attachments=0
data-healthy cinder=in-use attached-to=web-1 nova-lists-it-on=web-1 cinder-attachments=1
data-leftover cinder=in-use attached-to=web-1 nova-lists-it-on=web-1 cinder-attachments=1
data-stale cinder=available attached-to=- nova-lists-it-on=- cinder-attachments=0"
expect after "$repaired" "the state after the repair differs"

step "Starting web-1 and db-1 again (openstack server start: os-start)"
for s in web-1 db-1; do power "${srv[$s]}" start && echo "$s: ACTIVE"; done
expect started "$repaired" "starting the servers changed the state"
echo "OK: the three drifted volumes are free on both sides, and the leftover reservation is gone beside the attachment Nova uses; the running servers' repairs waited until they were stopped; the healthy attachments are as they were and both servers run again."
