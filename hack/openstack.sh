#!/usr/bin/env bash
# A real OpenStack test world on this machine: Nova (API, conductor, scheduler
# and compute with the fake driver, in one process), Placement and Cinder (API,
# scheduler and volume service with the fake driver, in one process) from
# Debian's packages, on 127.0.0.1, with SQLite databases and oslo.messaging's
# in-memory transport. Keystone, Glance and Neutron are stubs
# (hack/openstack/stubs.py); see docs/development.md, "OpenStack test world".
#
#   hack/openstack.sh install
#       apt-get install python3-nova python3-cinder python3-placement when
#       missing (needs root), and extract the api-paste.ini files of the
#       installed release from its nova-common and cinder-common packages into
#       a cache outside the checkout, with empty databases of that release.
#       Prints the cache directory.
#   hack/openstack.sh up --dir DIR [--port-base N] [--timeout S] [--sync]
#       install if needed, fresh databases in DIR (copies of empty ones that
#       install synced once for this release; --sync runs the database syncs
#       in DIR instead), start everything and wait
#       until a server can boot and a volume attach. Uses ports N..N+5
#       (nova, cinder, placement, keystone, glance, neutron; default 18770).
#       Writes DIR/clouds.yaml (cloud "tether-test") and DIR/world.env.
#   hack/openstack.sh down --dir DIR
#       stop every process of the world by its PID (TERM, KILL after 5 s).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
lib="$here/openstack"
py=/usr/bin/python3 # Debian's interpreter: it sees the packages in dist-packages
packages=(python3-nova python3-cinder python3-placement)
procs=(nova cinder placement stubs) # stop order

log() { printf 'openstack: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

installed() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || return 1
	done
}

version_of() { dpkg-query -W -f='${Version}' "$1"; }

cache_dir() {
	local root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
	local key="nova-$(version_of python3-nova)-cinder-$(version_of python3-cinder)-placement-$(version_of python3-placement)"
	printf '%s/openstack/%s' "$root" "$(printf '%s' "$key" | tr ':~' '__')"
}

apt_install() {
	local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${packages[*]}"
	command -v apt-get >/dev/null || die "apt-get not found: the test world needs Debian 12 (bookworm) packages ${packages[*]}"
	[ "$(id -u)" = 0 ] || die "${packages[*]} are not installed, and installing them needs root: run as root: $cmd"
	log "installing ${packages[*]} (first time: about 1-6 minutes)"
	local t0
	t0=$(now)
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"; } >&2 ||
		die "installing the packages failed (see above); run as root: $cmd"
	log "installed in $(since "$t0")s"
}

# extract DIR: nova-common and cinder-common of the installed versions, unpacked
# into DIR without installing them (their maintainer scripts set up services
# and databases the world does not want).
extract() {
	local dir=$1 tmp
	tmp=$(mktemp -d "$(dirname "$dir")/.extract-XXXXXX")
	(
		cd "$tmp"
		apt-get download -o APT::Sandbox::User=root \
			"nova-common=$(version_of python3-nova)" "cinder-common=$(version_of python3-cinder)" >&2 ||
			die "apt-get download nova-common cinder-common failed (see above): run apt-get update as root, then retry"
		for deb in ./*.deb; do dpkg-deb -x "$deb" tree; done
	) || { rm -rf "$tmp"; exit 1; }
	for f in usr/share/nova-common/api-paste.ini usr/share/cinder-common/api-paste.ini etc/cinder/rootwrap.conf; do
		[ -f "$tmp/tree/$f" ] || { rm -rf "$tmp"; die "the nova-common/cinder-common packages have no $f"; }
	done
	rm -rf "$dir"
	mv "$tmp/tree" "$dir"
	rm -rf "$tmp"
}

cmd_install() {
	local root=${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}
	mkdir -p "$root/openstack"
	# Test binaries may start worlds at the same time: one installs, the others wait.
	exec 9>"$root/openstack/.lock"
	flock 9
	installed "${packages[@]}" || apt_install
	local dir
	dir=$(cache_dir)
	if [ ! -f "$dir/.complete" ]; then
		log "extracting api-paste.ini from nova-common and cinder-common into $dir"
		extract "$dir"
		printf 'nova %s\ncinder %s\nplacement %s\n' "$(version_of python3-nova)" \
			"$(version_of python3-cinder)" "$(version_of python3-placement)" >"$dir/.complete"
	fi
	[ -f "$dir/db/.complete" ] || db_template "$dir"
	flock -u 9
	echo "$dir"
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

cmd_down() {
	local dir=$1 name pidfile i pids=() names=()
	for name in "${procs[@]}"; do
		pidfile="$dir/$name.pid"
		[ -f "$pidfile" ] || continue
		if kill -0 "$(cat "$pidfile")" 2>/dev/null; then
			pids+=("$(cat "$pidfile")")
			names+=("$name")
		else
			rm -f "$pidfile"
		fi
	done
	[ ${#pids[@]} -gt 0 ] || return 0
	kill -TERM "${pids[@]}" 2>/dev/null || true
	for i in $(seq 50); do
		kill -0 "${pids[@]}" 2>/dev/null || break # true while any is alive
		sleep 0.1
	done
	for i in "${!pids[@]}"; do
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			log "${names[$i]} (pid ${pids[$i]}) did not stop in 5 s after SIGTERM; killing it"
			kill -KILL "${pids[$i]}" 2>/dev/null || true
		fi
		rm -f "$dir/${names[$i]}.pid"
	done
}

# start NAME CMD...: runs CMD in the background with its output in
# DIR/logs/NAME.log and its PID in DIR/NAME.pid.
start() {
	local name=$1
	shift
	nohup "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$dir/$name.pid"
}

step() {
	local what=$1 logf=$2
	shift 2
	"$@" >>"$logf" 2>&1 || die "$what failed; see $logf"
}

# sync_dbs DIR LOGDIR: creates the schemas of the world rendered in DIR
# (placement, cinder, and nova's API, cell0 and cell1 databases).
sync_dbs() {
	local d=$1 logs=$2
	(step "placement-manage db sync" "$logs/dbsync-placement.log" \
		env OS_PLACEMENT_CONFIG_DIR="$d/placement" placement-manage --config-file "$d/placement/placement.conf" db sync) &
	local placement_sync=$!
	(step "cinder-manage db sync" "$logs/dbsync-cinder.log" \
		"$py" -c 'from cinder.cmd.manage import main; main()' --config-file "$d/cinder/cinder.conf" db sync) &
	local cinder_sync=$!
	local nm=("$py" -c 'from nova.cmd.manage import main; main()' --config-file "$d/nova/nova.conf")
	step "nova-manage api_db sync" "$logs/dbsync-nova.log" "${nm[@]}" api_db sync
	step "nova-manage cell_v2 map_cell0" "$logs/dbsync-nova.log" "${nm[@]}" cell_v2 map_cell0 --database_connection "sqlite:///$d/nova/nova_cell0.sqlite"
	step "nova-manage db sync" "$logs/dbsync-nova.log" "${nm[@]}" db sync
	step "nova-manage cell_v2 create_cell" "$logs/dbsync-nova.log" "${nm[@]}" cell_v2 create_cell --name cell1
	wait "$placement_sync" || exit 1
	wait "$cinder_sync" || exit 1
}

dbfiles=(nova/nova_api.sqlite nova/nova_cell0.sqlite nova/nova_cell1.sqlite cinder/cinder.sqlite placement/placement.sqlite)

# db_template CACHE: empty, freshly synced databases of this release in
# CACHE/db, which each world copies (the syncs take most of a start).
db_template() {
	local cache=$1 tmp
	log "creating the empty databases of this release in $cache/db (once)"
	tmp=$(mktemp -d "$cache/.db-XXXXXX")
	mkdir -p "$tmp/logs" "$tmp/nova" "$tmp/cinder" "$tmp/placement"
	step "rendering the configuration" "$tmp/logs/render.log" "$py" "$lib/render.py" "$tmp" "$cache" template 18770
	(sync_dbs "$tmp" "$tmp/logs") || { rm -rf "$tmp"; exit 1; }
	echo "$tmp" >"$tmp/prefix"
	rm -rf "$cache/db"
	mv "$tmp" "$cache/db"
	touch "$cache/db/.complete"
}

# copy_dbs TEMPLATE DIR: the world's fresh databases, copied from the
# template, with Nova's cell mappings pointed at DIR's cell databases.
copy_dbs() {
	local tmpl=$1 d=$2 f
	for f in "${dbfiles[@]}"; do cp "$tmpl/$f" "$d/$f"; done
	"$py" - "$d/nova/nova_api.sqlite" "sqlite:///$(cat "$tmpl/prefix")/" "sqlite:///$d/" <<'PY' >>"$d/logs/dbsync-nova.log" 2>&1 || die "pointing the cell mappings at $d failed; see $d/logs/dbsync-nova.log"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("update cell_mappings set database_connection = replace(database_connection, ?, ?)", sys.argv[2:4]).rowcount
db.commit()
if n != 2:
    sys.exit("expected the cell mappings cell0 and cell1, updated %d" % n)
PY
}

cmd_up() {
	local base=$1 timeout=$2 t0 t1 cache
	t0=$(now)
	cache=$(cmd_install)
	cmd_down "$dir"
	# Fresh state: the fake driver keeps servers in memory, so databases from
	# an earlier run would hold servers that no hypervisor knows.
	rm -rf "$dir/nova" "$dir/cinder" "$dir/placement" "$dir/logs"
	mkdir -p "$dir/logs" "$dir/nova/state" "$dir/nova/instances" "$dir/nova/lock" \
		"$dir/cinder/state" "$dir/cinder/volumes" "$dir/cinder/lock" "$dir/placement"
	local host="tether-$base"
	step "rendering the configuration" "$dir/logs/render.log" "$py" "$lib/render.py" "$dir" "$cache" "$host" "$base"

	local p
	for p in $(seq "$base" $((base + 5))); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			die "port $p is in use: pick another --port-base (the world uses $base..$((base + 5)))"
		fi
	done

	t1=$(now)
	if [ "$sync" = 1 ]; then
		sync_dbs "$dir" "$dir/logs"
	else
		copy_dbs "$cache/db" "$dir"
	fi
	local dbsync
	dbsync=$(since "$t1")

	export PYTHONPATH="$lib${PYTHONPATH:+:$PYTHONPATH}"
	# From here on a failure stops what was started.
	trap 'cmd_down "$dir"' EXIT
	start stubs "$py" "$lib/stubs.py" "$base"
	start placement env OS_PLACEMENT_CONFIG_DIR="$dir/placement" /usr/bin/placement-api --host 127.0.0.1 --port $((base + 2))
	start cinder "$py" "$lib/cinder_all.py" --config-file "$dir/cinder/cinder.conf"
	# Nova's compute service exits at start-up when Placement does not answer.
	local i
	for i in $(seq 120); do
		curl -fsS -o /dev/null "http://127.0.0.1:$((base + 2))/" 2>/dev/null && break
		pid_alive "$dir/placement.pid" || die "placement-api exited; see $dir/logs/placement.log"
		[ "$i" = 120 ] && die "placement-api does not answer on port $((base + 2)) after 60 s; see $dir/logs/placement.log"
		sleep 0.5
	done
	start nova "$py" "$lib/nova_all.py" --config-file "$dir/nova/nova.conf"
	"$py" "$lib/ready.py" "$dir" "$base" "$timeout" || die "the world did not become ready (see above)"

	trap - EXIT
	write_clients "$base"
	printf 'dbsync_seconds=%s\nstart_seconds=%s\n' "$dbsync" "$(since "$t0")" >"$dir/timings"
	log "ready in $(since "$t0")s (databases $dbsync s): nova :$base, cinder :$((base + 1)), placement :$((base + 2)); OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml OS_CLOUD=tether-test"
}

write_clients() {
	local base=$1
	cat >"$dir/clouds.yaml" <<EOF
# The OpenStack test world (hack/openstack.sh). Its Keystone is a stub that
# accepts any password and returns the token "user:project".
clouds:
  tether-test:
    auth_type: password
    auth:
      auth_url: http://127.0.0.1:$((base + 3))/v3
      username: admin
      password: admin
      project_id: admin
      user_domain_name: Default
    region_name: RegionOne
    interface: public
    identity_api_version: 3
EOF
	cat >"$dir/world.env" <<EOF
OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml
OS_CLOUD=tether-test
TETHER_OS_COMPUTE=http://127.0.0.1:$base/v2.1
TETHER_OS_BLOCK_STORAGE=http://127.0.0.1:$((base + 1))/v3/admin
TETHER_OS_PLACEMENT=http://127.0.0.1:$((base + 2))
TETHER_OS_IDENTITY=http://127.0.0.1:$((base + 3))/v3
TETHER_OS_PROJECT=admin
TETHER_OS_NOVA_DB=$dir/nova/nova_cell1.sqlite
EOF
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 1 ] || usage
cmd=$1
shift
dir="" base=18770 timeout=180 sync=0
while [ $# -gt 0 ]; do
	case $1 in
	--dir) dir=$2; shift 2 ;;
	--port-base) base=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--sync) sync=1; shift ;;
	*) log "unknown argument $1"; usage ;;
	esac
done
case $cmd in
install) cmd_install ;;
up | down)
	[ -n "$dir" ] || die "$cmd needs --dir DIR"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ $base =~ ^[0-9]+$ ]] && [ "$base" -ge 1024 ] && [ "$base" -le 65530 ] || die "--port-base must be a number from 1024 to 65530"
	if [ "$cmd" = up ]; then cmd_up "$base" "$timeout"; else cmd_down "$dir"; fi
	;;
*) usage ;;
esac
