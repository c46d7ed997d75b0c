#!/bin/bash
# instant-clone-child.sh - the guest side of instant clones (docs/instant-clones.md,
# "The guest side"). Installed in a Linux template whose model's cloneMode is
# "instant", run by instant-clone-child.service from boot.
#
# An instant clone does not boot: it continues from its parent's memory, this
# service included. The parent boots through cloud-init (which applies its
# instance: this service only notes it), then the hatchery blanks its
# cloud-init guestinfo keys, so the service waits. On a child the hatchery wrote the child's own
# keys (the ones internal/cloudinit builds for a cloud-init clone):
#   guestinfo.metadata (+ .encoding)  instance-id, local-hostname, network (v2)
#   guestinfo.userdata (+ .encoding)  #cloud-config: write_files (the worker
#                                     config and start script) and runcmd
# The first time it sees an instance-id it has not applied, it sets the
# hostname and the network (the static address, or a new DHCP lease; the
# parent's address is dropped), writes the files and runs the runcmd, which
# starts the worker, then records the instance-id.
#
# Needs bash, python3 (a cloud-init image has it), base64, gzip, ip, and
# vmware-rpctool (open-vm-tools). Settings, for tests only:
#   CDS_CHILD_ROOT     prefix of every path written (default: none)
#   CDS_CHILD_EXEC     command prefixed to each runcmd entry (default: none)
#   CDS_CHILD_ONCE     non-empty: one check, then exit
#   CDS_CHILD_POLL     seconds between checks (default 1)
#   CDS_CHILD_RPCTOOL  the vmware-rpctool command (default vmware-rpctool)
set -euo pipefail

ROOT="${CDS_CHILD_ROOT:-}"
STATE_DIR="$ROOT/var/lib/cds-hatchery"
APPLIED="$STATE_DIR/instant-instance-id"
POLL="${CDS_CHILD_POLL:-1}"
RPCTOOL="${CDS_CHILD_RPCTOOL:-vmware-rpctool}"

log() { echo "instant-clone-child: $*" >&2; }

# info_get KEY: the value of guestinfo.KEY, empty when unset.
info_get() { "$RPCTOOL" "info-get guestinfo.$1" 2>/dev/null || true; }

# decode VALUE ENCODING: the document as the hatchery encoded it.
decode() {
	case "$2" in
	gzip+base64 | gz+b64) printf '%s' "$1" | base64 -d | gzip -dc ;;
	base64 | b64) printf '%s' "$1" | base64 -d ;;
	"") printf '%s' "$1" ;;
	*)
		log "unknown encoding $2"
		return 1
		;;
	esac
}

# first_nic: the first network interface but the loopback.
first_nic() {
	ip -o link show | awk -F': ' '$2 != "lo" { sub(/@.*/, "", $2); print $2; exit }'
}

# apply_network METADATA: the static address of the metadata's network
# config, else a new DHCP lease, on the first interface.
apply_network() {
	local plan nic
	plan=$(printf '%s' "$1" | python3 -c '
import json, sys
md = json.load(sys.stdin)
eths = ((md.get("network") or {}).get("ethernets") or {})
eth = next(iter(eths.values()), None)
if not eth or eth.get("dhcp4") or not eth.get("addresses"):
    print("dhcp")
    sys.exit(0)
for a in eth.get("addresses", []):
    print("addr", a)
for r in eth.get("routes", []):
    if r.get("to") in ("0.0.0.0/0", "default"):
        print("gw", r["via"])
for d in (eth.get("nameservers") or {}).get("addresses", []):
    print("dns", d)
')
	nic=$(first_nic)
	if [ -z "$nic" ]; then
		log "no network interface"
		return 1
	fi
	ip addr flush dev "$nic"
	if [ "$plan" = "dhcp" ]; then
		ip link set "$nic" up
		if command -v dhclient >/dev/null; then
			dhclient -r "$nic" || true
			dhclient "$nic"
		elif command -v networkctl >/dev/null; then
			networkctl renew "$nic"
		else
			log "no dhcp client (dhclient, networkctl)"
			return 1
		fi
		return 0
	fi
	local kind value resolv=""
	while read -r kind value; do
		case "$kind" in
		addr) ip addr add "$value" dev "$nic" ;;
		gw) gw="$value" ;;
		dns) resolv+="nameserver $value"$'\n' ;;
		esac
	done <<<"$plan"
	ip link set "$nic" up
	if [ -n "${gw:-}" ]; then
		ip route replace default via "$gw" dev "$nic"
	fi
	if [ -n "$resolv" ]; then
		mkdir -p "$ROOT/etc"
		printf '%s' "$resolv" >"$ROOT/etc/resolv.conf"
	fi
}

# apply_userdata USERDATA: write_files, then each runcmd entry.
apply_userdata() {
	printf '%s' "$1" | ROOT="$ROOT" CDS_CHILD_EXEC="${CDS_CHILD_EXEC:-}" python3 -c '
import json, os, shlex, subprocess, sys
doc = sys.stdin.read()
if doc.startswith("#cloud-config"):
    doc = doc.split("\n", 1)[1] if "\n" in doc else ""
ud = json.loads(doc or "{}")
root = os.environ.get("ROOT", "")
for f in ud.get("write_files", []):
    path = root + f["path"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f.get("content", ""))
    os.chmod(path, int(f.get("permissions", "0600"), 8))
prefix = shlex.split(os.environ.get("CDS_CHILD_EXEC", ""))
for argv in ud.get("runcmd", []):
    if isinstance(argv, str):
        argv = ["/bin/sh", "-c", argv]
    subprocess.run(prefix + list(argv), check=True)
'
}

# apply: the child's identity, then its worker.
apply() {
	local md="$1" id="$2" name ud_raw
	name=$(printf '%s' "$md" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("local-hostname", ""))')
	if [ -n "$name" ]; then
		mkdir -p "$ROOT/etc"
		printf '%s\n' "$name" >"$ROOT/etc/hostname"
		hostname "$name"
	fi
	apply_network "$md"
	ud_raw=$(info_get userdata)
	if [ -n "$ud_raw" ]; then
		apply_userdata "$(decode "$ud_raw" "$(info_get userdata.encoding)")"
	fi
	mkdir -p "$STATE_DIR"
	printf '%s\n' "$id" >"$APPLIED"
	log "identity of instance $id applied: hostname $name"
}

check() {
	local md_raw md id
	md_raw=$(info_get metadata)
	[ -n "$md_raw" ] || return 0 # a parent, or blanked: nothing to take
	md=$(decode "$md_raw" "$(info_get metadata.encoding)")
	id=$(printf '%s' "$md" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("instance-id", ""))')
	[ -n "$id" ] || return 0
	if [ "$id" = "$(cat "$APPLIED" 2>/dev/null || true)" ]; then
		return 0
	fi
	if [ "$id" = "$(cat "$ROOT/var/lib/cloud/data/instance-id" 2>/dev/null || true)" ]; then
		# A VM that booted (the parent): cloud-init applied this
		# instance itself. A child never boots: cloud-init's instance is
		# still its parent's.
		mkdir -p "$STATE_DIR"
		printf '%s\n' "$id" >"$APPLIED"
		return 0
	fi
	apply "$md" "$id"
}

while true; do
	# In a subshell with errexit: a failed step stops the apply before
	# the instance-id is recorded, and the next check retries it.
	set +e
	(
		set -e
		check
	)
	rc=$?
	set -e
	if [ "$rc" -ne 0 ]; then
		log "identity not applied, retried"
	fi
	if [ -n "${CDS_CHILD_ONCE:-}" ]; then
		exit 0
	fi
	sleep "$POLL"
done
