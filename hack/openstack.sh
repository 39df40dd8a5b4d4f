#!/usr/bin/env bash
# A real OpenStack test world on this machine: Nova (API, conductor, scheduler
# and compute with the fake driver, in one process), Placement and Cinder (API,
# scheduler and volume service with the fake driver, in one process) from
# Debian's packages, on 127.0.0.1, with SQLite databases and oslo.messaging's
# in-memory transport. Keystone, Glance and Neutron are stubs
# (hack/openstack/stubs.py); see docs/development.md, "OpenStack test world".
#
# Two release lines: zed (the default) runs the host's Debian 12 (bookworm)
# packages, OpenStack Zed; 2025.1 runs Debian 13 (trixie) packages, OpenStack
# 2025.1, inside a root built with debootstrap and cached outside the
# checkout, entered with chroot in a private mount namespace
# (hack/openstack/inroot.sh). Every command takes --release LINE.
#
#   hack/openstack.sh install [--release LINE]
#       zed: apt-get install python3-nova python3-cinder python3-placement when
#       missing (needs root). 2025.1: build the trixie root once (root;
#       apt-get installs debootstrap when missing). Then extract the
#       api-paste.ini files of the release from its nova-common and
#       cinder-common packages into a cache outside the checkout, with empty
#       databases of that release. Prints the cache directory. Exits 3, with
#       one line saying why, when this host cannot run the line at all.
#   hack/openstack.sh up --dir DIR [--release LINE] [--port-base N] [--timeout S] [--sync] [--scale]
#       install if needed, fresh databases in DIR (copies of empty ones that
#       install synced once for this release; --sync runs the database syncs
#       in DIR instead), start everything and wait
#       until a server can boot and a volume attach. Uses ports N..N+5
#       (nova, cinder, placement, keystone, glance, neutron; default 18770).
#       Writes DIR/clouds.yaml (cloud "tether-test") and DIR/world.env.
#       Writes DIR/release (the versions of Nova, Cinder and Placement).
#       --scale switches Nova's quotas off and gives the fake compute driver
#       25 nodes, for thousands of servers.
#   hack/openstack.sh down --dir DIR
#       stop every process of the world by its PID (TERM, KILL after 5 s).
#       A 2025.1 world's mounts live only in its processes' namespaces and go
#       with them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
lib="$here/openstack"
py=/usr/bin/python3 # Debian's interpreter: it sees the packages in dist-packages
packages=(python3-nova python3-cinder python3-placement)
procs=(nova cinder placement stubs) # stop order
# The 2025.1 line's root: Debian 13 with the same three packages. The
# recipe's checksum names the root in the cache, so a change to it builds a
# new one; bump rootfs_recipe when the build below changes.
rootfs_suite=trixie
rootfs_recipe="1 $rootfs_suite minbase ${packages[*]}"
rootfs="" # the release root of the selected line; empty for the host's zed
run=()    # the prefix that runs a command of the selected line

log() { printf 'openstack: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
# cannot: this host cannot run the selected line at all (tests skip on 3).
cannot() {
	log "cannot run the $release line here: $*"
	exit 3
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

installed() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || return 1
	done
}

version_of() {
	if [ -n "$rootfs" ]; then
		dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f='${Version}' "$1"
	else
		dpkg-query -W -f='${Version}' "$1"
	fi
}

cache_root() { printf '%s' "${TETHER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tether}"; }

cache_dir() {
	local root
	root=$(cache_root)
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
# and databases the world does not want). The 2025.1 root keeps the two
# packages that its build downloaded.
extract() {
	local dir=$1 tmp
	tmp=$(mktemp -d "$(dirname "$dir")/.extract-XXXXXX")
	(
		cd "$tmp"
		if [ -n "$rootfs" ]; then
			cp "$rootfs"/var/cache/tether-debs/*.deb .
		else
			apt-get download -o APT::Sandbox::User=root \
				"nova-common=$(version_of python3-nova)" "cinder-common=$(version_of python3-cinder)" >&2 ||
				die "apt-get download nova-common cinder-common failed (see above): run apt-get update as root, then retry"
		fi
		for deb in ./*.deb; do dpkg-deb -x "$deb" tree; done
	) || { rm -rf "$tmp"; exit 1; }
	for f in usr/share/nova-common/api-paste.ini usr/share/cinder-common/api-paste.ini etc/cinder/rootwrap.conf; do
		[ -f "$tmp/tree/$f" ] || { rm -rf "$tmp"; die "the nova-common/cinder-common packages have no $f"; }
	done
	rm -rf "$dir"
	mv "$tmp/tree" "$dir"
	rm -rf "$tmp"
}

# rootfs_dir: where the 2025.1 line's root is cached, named by its recipe.
rootfs_dir() {
	local sum
	sum=$(printf '%s' "$rootfs_recipe" | sha256sum | cut -c1-12)
	printf '%s/openstack/root-%s-%s' "$(cache_root)" "$rootfs_suite" "$sum"
}

# build_root DEST: debootstrap a minimal Debian 13 into DEST/rootfs, then
# install the packages in it with its own apt (services kept from starting
# by policy-rc.d), and keep nova-common and cinder-common of the installed
# versions for extract.
build_root() {
	local dest=$1 tmp t0 mirror=${TETHER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
	if ! command -v debootstrap >/dev/null; then
		command -v apt-get >/dev/null || cannot "debootstrap is missing, and there is no apt-get to install it"
		log "installing debootstrap"
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap; } >&2 ||
			die "installing debootstrap failed (see above); run as root: apt-get update && apt-get install debootstrap"
	fi
	[ -e "/usr/share/debootstrap/scripts/$rootfs_suite" ] ||
		die "this debootstrap does not know Debian $rootfs_suite: install debootstrap 1.0.128 or later"
	log "building the $release root (Debian $rootfs_suite) in $dest (first time: about 3-10 minutes)"
	mkdir -p "$(dirname "$dest")"
	tmp=$(mktemp -d "$(dirname "$dest")/.root-XXXXXX")
	t0=$(now)
	debootstrap --variant=minbase "$rootfs_suite" "$tmp/rootfs" "$mirror" >"$tmp/build.log" 2>&1 ||
		{ tail -5 "$tmp/build.log" >&2; rm -rf "$tmp"; die "debootstrap $rootfs_suite from $mirror failed (above, the end of its log); TETHER_DEBIAN_MIRROR names another mirror"; }
	local strap
	strap=$(since "$t0")
	printf '#!/bin/sh\n# tether test world: no service starts at package installation.\nexit 101\n' >"$tmp/rootfs/usr/sbin/policy-rc.d"
	chmod +x "$tmp/rootfs/usr/sbin/policy-rc.d"
	"$lib/inroot.sh" "$tmp/rootfs" -- /bin/sh -ec '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update
		apt-get install -y --no-install-recommends "$@"
		mkdir -p /var/cache/tether-debs
		cd /var/cache/tether-debs
		apt-get download -o APT::Sandbox::User=root \
			"nova-common=$(dpkg-query -W -f="\${Version}" python3-nova)" \
			"cinder-common=$(dpkg-query -W -f="\${Version}" python3-cinder)"
		apt-get clean' sh "${packages[@]}" >>"$tmp/build.log" 2>&1 ||
		{ tail -5 "$tmp/build.log" >&2; rm -rf "$tmp"; die "installing ${packages[*]} in the $rootfs_suite root failed (above, the end of its log)"; }
	printf 'debootstrap_seconds=%s\nbuild_seconds=%s\n' "$strap" "$(since "$t0")" >"$tmp/timings"
	rm -rf "$dest"
	mv "$tmp" "$dest"
	touch "$dest/.complete"
	log "built the $release root in $(cat "$dest/timings" | tr '\n' ' ')($(du -sm "$dest/rootfs" | cut -f1) MB)"
}

cmd_install() {
	local root
	root=$(cache_root)
	mkdir -p "$root/openstack"
	# Test binaries may start worlds at the same time: one installs, the others wait.
	exec 9>"$root/openstack/.lock"
	flock 9
	if [ "$release" = zed ]; then
		installed "${packages[@]}" || apt_install
	else
		local rd
		rd=$(rootfs_dir)
		# Building the root and entering it both need these.
		[ "$(id -u)" = 0 ] || cannot "its Debian 13 root is built with debootstrap and entered with chroot, which need root: run as root"
		command -v unshare >/dev/null && command -v chroot >/dev/null || cannot "unshare and chroot (util-linux, coreutils) are missing"
		[ -f "$rd/.complete" ] || build_root "$rd"
		rootfs=$rd/rootfs
	fi
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

# use_line CACHE [DIR]: the prefix that runs the selected line's commands:
# nothing for zed; for 2025.1, inroot.sh with the checkout's
# hack/openstack, the release cache and the world's DIR mounted.
use_line() {
	run=()
	[ "$release" = zed ] || run=("$lib/inroot.sh" "$rootfs" "$lib" "$@" --)
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
		"${run[@]}" env OS_PLACEMENT_CONFIG_DIR="$d/placement" placement-manage --config-file "$d/placement/placement.conf" db sync) &
	local placement_sync=$!
	(step "cinder-manage db sync" "$logs/dbsync-cinder.log" \
		"${run[@]}" "$py" -c 'from cinder.cmd.manage import main; main()' --config-file "$d/cinder/cinder.conf" db sync) &
	local cinder_sync=$!
	local nm=("${run[@]}" "$py" -c 'from nova.cmd.manage import main; main()' --config-file "$d/nova/nova.conf")
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
	use_line "$cache"
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
	[ "$release" = zed ] || rootfs=$(rootfs_dir)/rootfs
	use_line "$cache" "$dir"
	local host="tether-$base"
	local scaled=()
	[ "$scale" = 0 ] || scaled=(scale)
	step "rendering the configuration" "$dir/logs/render.log" "$py" "$lib/render.py" "$dir" "$cache" "$host" "$base" "${scaled[@]}"

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
	start placement "${run[@]}" env OS_PLACEMENT_CONFIG_DIR="$dir/placement" /usr/bin/placement-api --host 127.0.0.1 --port $((base + 2))
	start cinder "${run[@]}" "$py" "$lib/cinder_all.py" --config-file "$dir/cinder/cinder.conf"
	# Nova's compute service exits at start-up when Placement does not answer.
	local i
	for i in $(seq 120); do
		curl -fsS -o /dev/null "http://127.0.0.1:$((base + 2))/" 2>/dev/null && break
		pid_alive "$dir/placement.pid" || die "placement-api exited; see $dir/logs/placement.log"
		[ "$i" = 120 ] && die "placement-api does not answer on port $((base + 2)) after 60 s; see $dir/logs/placement.log"
		sleep 0.5
	done
	start nova "${run[@]}" "$py" "$lib/nova_all.py" --config-file "$dir/nova/nova.conf"
	"$py" "$lib/ready.py" "$dir" "$base" "$timeout" || die "the world did not become ready (see above)"

	trap - EXIT
	write_clients "$base"
	printf 'python3-nova=%s python3-cinder=%s python3-placement=%s\n' "$(version_of python3-nova)" \
		"$(version_of python3-cinder)" "$(version_of python3-placement)" >"$dir/release"
	printf 'dbsync_seconds=%s\nstart_seconds=%s\n' "$dbsync" "$(since "$t0")" >"$dir/timings"
	log "$release ready in $(since "$t0")s (databases $dbsync s): nova :$base, cinder :$((base + 1)), placement :$((base + 2)); OS_CLIENT_CONFIG_FILE=$dir/clouds.yaml OS_CLOUD=tether-test"
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
dir="" base=18770 timeout=180 sync=0 scale=0 release=zed
while [ $# -gt 0 ]; do
	case $1 in
	--release) release=${2:-}; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--port-base) base=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--sync) sync=1; shift ;;
	--scale) scale=1; shift ;;
	*) log "unknown argument $1"; usage ;;
	esac
done
case $release in
zed | 2025.1) ;;
*) die "--release must be zed (the host's Debian 12 packages) or 2025.1 (Debian 13 packages in a root built with debootstrap), not '$release'" ;;
esac
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
