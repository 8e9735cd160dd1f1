#!/usr/bin/env bash
# Folder quotas end to end (docs/folders.md, "Quotas and usage") with
# tessera server and the real dockerd:
#  - btrfs: a loop-mounted btrfs image (in the test's temp dir) declared as
#    a storage host. Quotas off at first: a folder made then is a
#    subvolume, api-only; once the admin turns quotas on and the server
#    restarts, it is capped by its qgroup, as are folders made from then
#    on. A session writing 20 MB into a 10 MiB folder gets "Disk quota
#    exceeded" and the folder stays within its quota; an upload past it is
#    413; raising the quota lets the write through; a session cannot make
#    a subvolume or snapshot inside its folder (the seccomp profile), and
#    still gets Docker's default refusals;
#  - uploads side by side into a folder of the plain host (api-only) that
#    together pass its quota: some are refused, the usage stays within it;
#  - a folder removed with --force while a session mounts it: the session
#    keeps writing to it in the trash, restore brings it back while still
#    mounted, and once the session has ended the purge destroys it;
#  - XFS and ext4 with project quotas where the kernel has quota support
#    (probed by mounting a loop filesystem with prjquota; a SKIP line says
#    why when it has none).
. "$(dirname "$0")/lib.sh"
e2e_setup

T() { "$TESSERA" "$@"; }
MNTS=()
# Servers and containers go before the mounts they use; the mounts before
# the temp dir is removed.
quota_cleanup() {
	for p in "${E2E_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${E2E_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	e2e_cleanup_containers
	local m
	for m in "${MNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	e2e_teardown
}
trap quota_cleanup EXIT

# loop_mount IMG MNT FSTYPE MKFS-ARGS MOUNT-OPTS: a filesystem image made
# here and loop-mounted at MNT; the mount's error in $MOUNT_ERR.
loop_mount() {
	local img=$1 mnt=$2 fstype=$3 mkfs=$4 opts=$5
	truncate -s 320M "$img" && mkdir -p "$mnt" || return 1
	# shellcheck disable=SC2086
	MOUNT_ERR=$(mkfs."$fstype" -q $mkfs "$img" 2>&1) || return 1
	MOUNT_ERR=$(mount -o "loop${opts:+,$opts}" "$img" "$mnt" 2>&1) || return 1
	MNTS+=("$mnt")
}

BT=$E2E_DIR/bt
check "a btrfs image is loop-mounted in the test's dir" loop_mount "$E2E_DIR/bt.img" "$BT" btrfs "" ""
HOSTS="local:$E2E_DIR/data/folders,bt:$BT/folders"

# Project quotas: where the kernel can mount a filesystem with them.
PRJ=()
for fs in xfs ext4; do
	case $fs in
	xfs) mkfs="" ;;
	ext4) mkfs="-O quota,project" ;;
	esac
	if loop_mount "$E2E_DIR/$fs.img" "$E2E_DIR/$fs" "$fs" "$mkfs" prjquota; then
		PRJ+=("$fs")
		HOSTS="$HOSTS,$fs:$E2E_DIR/$fs/folders"
	elif mount -o loop "$E2E_DIR/$fs.img" "$E2E_DIR/$fs" 2>/dev/null; then
		umount "$E2E_DIR/$fs"
		echo "SKIP project quotas on $fs: a loop $fs mounts, but not with prjquota: this kernel has no quota support (CONFIG_QUOTA)"
	else
		why="a loop $fs cannot be mounted here"
		[[ $fs == ext4 ]] && why="a loop ext4 made with -O quota,project cannot be mounted here (it needs a kernel with quota support, CONFIG_QUOTA)"
		echo "SKIP project quotas on $fs: $why: $(tr '\n' ' ' <<<"$MOUNT_ERR")"
	fi
done

start_server --storage-hosts "$HOSTS" || { fail "the server starts"; e2e_done; exit 1; }
json_field() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"; }
MiB=$((1 << 20))

# ---- btrfs without quotas: subvolumes, not capped; then quotas on ----
check "the server warns that btrfs quotas are off" grep -q "storage host bt: .*quotas are off" "$E2E_DIR/server.log"
check "folder create q on btrfs with a 10 MiB quota" T folder create q --host bt --quota 10m
info=$(T folder info q --json)
QID=$(json_field id <<<"$info")
check "with quotas off it is api-only ($(json_field quota_enforced <<<"$info"))" \
	[ "$(json_field quota_enforced <<<"$info")" == api-only ]
check "folder info says writes in sessions are not capped" contains "$(T folder info q)" "not capped"
check "the folder is a subvolume all the same" btrfs subvolume show "$BT/folders/$QID"
check "... owned by the work user" [ "$(stat -c %u:%g "$BT/folders/$QID")" == 1000:1000 ]
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
check "btrfs quotas are turned on (the admin's step)" btrfs quota enable "$BT"
start_server --storage-hosts "$HOSTS" || { fail "the server starts"; e2e_done; exit 1; }
check "after a restart the server says btrfs quotas cap the host" \
	grep -q "storage host bt: .*with quotas on" "$E2E_DIR/server.log"

# ---- btrfs: the kernel caps writes inside sessions ----
info=$(T folder info q --json)
check "q's quota is now enforced by a btrfs qgroup ($(json_field quota_enforced <<<"$info"))" \
	[ "$(json_field quota_enforced <<<"$info")" == btrfs-qgroup ]
check "folder info says the quota holds in sessions" contains "$(T folder info q)" "in sessions too (btrfs qgroup)"
check "a folder made now with a 4 MiB quota" T folder create q2 --host bt --quota 4m
check "... is capped by its qgroup too" [ "$(T folder info q2 --json | json_field quota_enforced)" == btrfs-qgroup ]
check "a local folder is api-only" T folder create plain --quota 10m
check "... and says so" [ "$(T folder info plain --json | json_field quota_enforced)" == api-only ]

check "a session mounts q and q2" T session create "$TEST_IMAGE" --name w --cpu 0.1 --mem 32m --mount q --mount q2 --wait
out=$(T session exec w -- dd if=/dev/zero of=/home/work/q2/big bs=1M count=8 2>&1)
check "writing 8 MB into the 4 MiB q2 fails: Disk quota exceeded ($(tail -1 <<<"$out"))" \
	contains "$out" "Disk quota exceeded"
out=$(T session exec w -- dd if=/dev/zero of=/home/work/q/big bs=1M count=20 2>&1)
check "writing 20 MB into the 10 MiB folder fails: Disk quota exceeded ($(tail -1 <<<"$out"))" \
	contains "$out" "Disk quota exceeded"
size=$(stat -c %s "$BT/folders/$QID/big")
check "what was written stays within the quota ($size bytes)" [ "$size" -le $((10 * MiB)) ]
sync   # the qgroup's count is brought up to date at each commit
usage=$(T folder info q --json | json_field usage_bytes)
check "the folder's usage (its qgroup) is what was written, within its quota ($usage)" \
	[ "$usage" -ge $((9 * MiB)) -a "$usage" -le $((10 * MiB)) ]

# ---- btrfs: no subvolume or snapshot from inside a session ----
# A subvolume made inside a folder has a qgroup of its own, so what is
# written there is not charged to the folder's: the sessions' seccomp
# profile (docs/security.md, "System calls") refuses the four ioctls that
# make one, whatever the request's high 32 bits (which the kernel
# ignores). Without it each call below succeeds for the work user. The
# probe is python's: the images have no btrfs-progs. It also tries calls
# Docker's default profile refuses, which the profile must refuse too.
PROBE='
import ctypes, errno, os, platform, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"ioctl": 16, "unshare": 272, "add_key": 248, "keyctl": 250},
      "aarch64": {"ioctl": 29, "unshare": 97, "add_key": 217, "keyctl": 219}}[platform.machine()]
def call(what, name, *args):
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args])
    print("%s: %s" % (what, "ok" if r >= 0 else os.strerror(ctypes.get_errno())))
def vol(name, v2, src=0):
    # btrfs_ioctl_vol_args {s64 fd; char name[4088]} and _v2 {s64 fd;
    # u64 transid, flags; u64 unused[4]; char name[4040]}: 4096 bytes.
    head = struct.pack("=qQQ32s", src, 0, 0, b"") if v2 else struct.pack("=q", src)
    return ctypes.create_string_buffer(head + name.encode().ljust(4096 - len(head), b"\0"), 4096)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
SUBVOL, SUBVOL2, SNAP, SNAP2, FS_INFO = 0x5000940e, 0x50009418, 0x50009401, 0x50009417, 0x8400941f
call("subvolume create", "ioctl", fd, SUBVOL, vol("s1", False))
call("subvolume create v2", "ioctl", fd, SUBVOL2, vol("s2", True))
call("snapshot", "ioctl", fd, SNAP, vol("s3", False, fd))
call("snapshot v2", "ioctl", fd, SNAP2, vol("s4", True, fd))
call("subvolume create, bit 32 set", "ioctl", fd, (1 << 32) | SUBVOL, vol("s5", False))
call("subvolume create, high bits set", "ioctl", fd, 0xffffffff00000000 | SUBVOL, vol("s6", False))
call("fs info", "ioctl", fd, FS_INFO, ctypes.create_string_buffer(1024))
call("fs info, sign-extended", "ioctl", fd, 0xffffffff00000000 | FS_INFO, ctypes.create_string_buffer(1024))
call("unshare user namespace", "unshare", 0x10000000)
call("add_key", "add_key", ctypes.c_char_p(b"user"), ctypes.c_char_p(b"k"), ctypes.c_char_p(b"v"), 1, (1 << 32) - 2)
call("keyctl", "keyctl", 1, 0)
'
check "a folder q3 on btrfs with an 8 MiB quota" T folder create q3 --host bt --quota 8m
Q3=$(T folder info q3 --json | json_field id)
check "a python session mounts it" \
	T session create tessera/python:3.11 --name py --cpu 1 --mem 256m --mount q3 --wait
out=$(T session exec py -- python3 -c "$PROBE" /home/work/q3 2>&1)
sed "s/^/# /" <<<"$out"
for what in "subvolume create" "subvolume create v2" "snapshot" "snapshot v2" \
	"subvolume create, bit 32 set" "subvolume create, high bits set"; do
	check "a session's $what in its folder: Operation not permitted" \
		has_line "$out" "$what: Operation not permitted"
done
check "no subvolume was made in the folder" not contains "$(btrfs subvolume list "$BT")" "$Q3/"
check "a btrfs ioctl that makes nothing still works (fs info)" has_line "$out" "fs info: ok"
check "... with its request sign-extended, as musl passes it" has_line "$out" "fs info, sign-extended: ok"
for what in "unshare user namespace" add_key keyctl; do
	check "as under Docker's default profile, $what: Operation not permitted" \
		has_line "$out" "$what: Operation not permitted"
done
check "the session runs under a seccomp filter" \
	has_line "$(T session exec py -- grep Seccomp: /proc/self/status)" $'Seccomp:\t2'
out=$(T session exec py -- sh -c 'mkdir -p q3/nest && dd if=/dev/zero of=q3/nest/big bs=1M count=20' 2>&1)
check "a directory is what a session can nest, and writing 20 MB there fails: Disk quota exceeded" \
	contains "$out" "Disk quota exceeded"
size=$(stat -c %s "$BT/folders/$Q3/nest/big")
check "... and stops at the quota ($size bytes)" [ "$size" -le $((8 * MiB)) ]
# The profile as the agent gave the session's container, against this
# dockerd's own default profile: every system call number is made (in a
# child process, with bad arguments) as root with a session's
# capabilities under each; a call Docker's default refuses (EPERM) must
# be refused under the session's too.
mkdir -p "$E2E_DIR/probe"
cat >"$E2E_DIR/probe/calls.py" <<'PY'
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
for nr in list(range(0, 340)) + list(range(400, 470)):
    # rt_sigreturn kills the child either way; a vfork child would run on
    # its parent's stack.
    if nr in (15, 58):
        continue
    r, w = os.pipe()
    sys.stdout.flush()   # else a child would print the lines again
    pid = os.fork()
    if pid == 0:
        # fork, vfork and clone make one more process here: each leaves
        # by _exit, whatever happens.
        try:
            os.close(r)
            signal.alarm(1)
            ret = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in (-1, 0, 0, 0, 0)])
            e = ctypes.get_errno()
            os.write(w, b"EPERM" if ret < 0 and e == 1 else b"other")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 5).decode() or "died"
    os.close(r)
    os.waitpid(pid, 0)
    print(nr, got)
PY
cid=$(jget py container_id)
docker inspect -f '{{range .HostConfig.SecurityOpt}}{{println .}}{{end}}' "$cid" |
	sed -n 's/^seccomp=//p' >"$E2E_DIR/probe/profile.json"
check "the session's container has Tessera's profile" grep -q '"SCMP_CMP_MASKED_EQ"' "$E2E_DIR/probe/profile.json"
as_session=(--rm --security-opt no-new-privileges --cap-drop NET_RAW --cap-drop MKNOD --cap-drop AUDIT_WRITE
	--cap-drop SYS_CHROOT --cap-drop SETFCAP --cap-drop SETPCAP -v "$E2E_DIR/probe:/probe:ro")
docker run "${as_session[@]}" tessera/python:3.11 python3 /probe/calls.py >"$E2E_DIR/probe/docker" 2>&1
docker run "${as_session[@]}" --security-opt "seccomp=$E2E_DIR/probe/profile.json" tessera/python:3.11 \
	python3 /probe/calls.py >"$E2E_DIR/probe/tessera" 2>&1
refused=$(grep -c ' EPERM$' "$E2E_DIR/probe/docker")
check "every call was made under both ($refused refused by Docker's default)" \
	[ "$(grep -c '^[0-9]* [a-zA-Z]*$' "$E2E_DIR/probe/docker")" -eq 408 -a \
	"$(grep -c '^[0-9]* [a-zA-Z]*$' "$E2E_DIR/probe/tessera")" -eq 408 -a "$refused" -ge 30 ]
both() { join <(sort -k1,1 "$E2E_DIR/probe/docker") <(sort -k1,1 "$E2E_DIR/probe/tessera"); }
looser=$(both | awk '$2 == "EPERM" && $3 != "EPERM" {print $1}' | tr '\n' ' ')
stricter=$(both | awk '$2 != "EPERM" && $3 == "EPERM" {print $1}' | tr '\n' ' ')
check "no call Docker's default refuses is let through by the session's profile (${looser:-none})" [ -z "$looser" ]
e2e_log "calls the session's profile refuses and this dockerd's default does not: ${stricter:-none}"
T session rm py >/dev/null

head -c $((12 * MiB)) /dev/urandom >"$E2E_DIR/twelve"
out=$(T folder upload q "$E2E_DIR/twelve" up.bin 2>&1)
check "an upload past the quota is refused ($out)" contains "$out" "quota"
check "... and leaves nothing" not test -e "$BT/folders/$QID/up.bin"

check "set-quota raises it to 40 MiB" T folder set-quota q 40m
check "folder info shows the new quota" contains "$(T folder info q)" "40 MiB"
check "now the session's 20 MB write goes through" \
	T session exec w -- dd if=/dev/zero of=/home/work/q/big bs=1M count=20
check "... all of it" [ "$(stat -c %s "$BT/folders/$QID/big")" -eq $((20 * MiB)) ]
check "and the 12 MB upload fits" T folder upload q "$E2E_DIR/twelve" up.bin
out=$(T folder set-quota q 5m && T session exec w -- dd if=/dev/zero of=/home/work/q/more bs=1M count=1 2>&1)
check "lowered below the usage, a new write fails ($(tail -1 <<<"$out"))" contains "$out" "Disk quota exceeded"
out=$(T folder set-quota q -1 2>&1)
check "a negative quota is refused in one line ($out)" [ "$(wc -l <<<"$out")" -eq 1 ]

# ---- removed with --force while mounted ----
check "trashed folders are purged at once from now on" T config set folder_trash_days 0
check "set-quota 0 lifts the quota" T folder set-quota q 0
# A subvolume made inside the folder, as a session can (the ioctl needs
# no privilege; made here from the host, whose test dir the work user
# cannot reach): its qgroup is not the folder's, but its bytes count in
# the folder's usage, and the purge takes it too.
sync
before=$(T folder info q --json | json_field usage_bytes)
check "a subvolume is made inside the folder" eval "btrfs subvolume create \"$BT/folders/$QID/nested\" >/dev/null"
check "... and 3 MiB written into it" dd if=/dev/zero of="$BT/folders/$QID/nested/x" bs=1M count=3 status=none
sync
after=$(T folder info q --json | json_field usage_bytes)
check "they count in the folder's usage ($before, then $after)" [ "$after" -ge $((before + 3 * MiB)) ]
check "rm --force while w mounts it" T folder rm q --force
check "the subvolume is in the host's trash" test -d "$BT/folders/.trash/$QID"
check "the session keeps writing to it" T session exec w -- sh -c 'echo still > /home/work/q/after-rm'
check "... into the trashed copy" [ "$(cat "$BT/folders/.trash/$QID/after-rm" 2>&1)" == still ]
mounted=$(T folder ls --trash --json)
check "folder ls --trash says which session mounts it" contains "$mounted" '"mounted_by": ['
check "... w" contains "$(T folder ls --trash --json | tr -d ' \n')" '"mounted_by":["w"]'
check "it is not purged while mounted, and restore works while mounted" T folder restore q
check "... with the files written meanwhile" [ "$(cat "$BT/folders/$QID/after-rm" 2>&1)" == still ]
check "the session still writes to it, now live again" T session exec w -- sh -c 'echo back > /home/work/q/after-restore'
check "... in the live folder" [ "$(cat "$BT/folders/$QID/after-restore" 2>&1)" == back ]
check "rm --force again" T folder rm q --force
T session rm w >/dev/null
gone=no
for _ in $(seq 1 300); do
	[[ ! -e $BT/folders/.trash/$QID ]] && { gone=yes; break; }
	sleep 0.1
done
check "once the session ended, the purge destroys the subvolume" [ $gone == yes ]
check "... with the subvolume made inside it: none of it is left" not contains "$(btrfs subvolume list "$BT")" "$QID"
T config set folder_trash_days 7 >/dev/null

# ---- uploads side by side do not pass the quota together ----
PID_DIR=$(T folder info plain --json | json_field id)
PYTHONPATH=$(dirname "$0") python3 - "$TESSERA_CONFIG" "$E2E_DIR/data/folders/$PID_DIR" <<'PY' >"$E2E_DIR/par.out" 2>&1
import hashlib, os, socket, sys
from signed import Api, load_conf
conf = load_conf(sys.argv[1])
folder_dir = sys.argv[2]
a = Api(conf["endpoint"], conf["access_key"], conf["secret_key"])
def say(good, what):
    print("%s %s" % ("ok  " if good else "FAIL", what))
# Five uploads of 3 MiB into the 10 MiB folder: every request's head is
# sent before any body, so all are in progress at once.
socks, bodies = [], []
for i in range(5):
    body = os.urandom(3 << 20)
    q = "/v1/folders/plain/upload?path=p%d.bin" % i
    h = a.sign("PUT", q, body)
    h["X-Tessera-Content-SHA256"] = hashlib.sha256(body).hexdigest()
    s = socket.create_connection((a.host, int(a.port)))
    s.sendall(("PUT %s HTTP/1.1\r\n" % q + "".join("%s: %s\r\n" % kv for kv in h.items()) +
               "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)).encode())
    socks.append(s)
    bodies.append(body)
statuses = []
for s, body in zip(socks, bodies):
    try:
        s.sendall(body)
    except OSError:
        pass  # refused at once: the server may close before the body
for s in socks:
    data = b""
    s.settimeout(60)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    s.close()
    statuses.append(int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0)
print("# statuses %s" % statuses)
say(statuses.count(201) == 3, "three of the five fit and are written (%s)" % statuses)
say(statuses.count(413) == 2, "the others are refused with 413 (%s)" % statuses)
total = sum(os.path.getsize(os.path.join(folder_dir, f)) for f in os.listdir(folder_dir))
say(total <= 10 << 20, "the folder holds %d bytes, within its 10 MiB quota" % total)
st, r = a.call("GET", "/v1/folders/plain")
say(st == 200 and r["usage_bytes"] <= 10 << 20, "its usage is within the quota (%s)" % (r or {}).get("usage_bytes"))
PY
while IFS= read -r line; do
	case "$line" in
	"ok  "*) ok "${line#ok  }" ;;
	"FAIL "*) fail "${line#FAIL }" ;;
	*) e2e_log "$line" ;;
	esac
done <"$E2E_DIR/par.out"
check "the parallel upload checks ran" grep -q "within the quota" "$E2E_DIR/par.out"

# ---- project quotas (XFS, ext4), where the kernel has them ----
for fs in "${PRJ[@]}"; do
	check "folder create on $fs with a 10 MiB quota" T folder create "p$fs" --host "$fs" --quota 10m
	check "... enforced by a project quota" [ "$(T folder info "p$fs" --json | json_field quota_enforced)" == project-quota ]
	check "a session mounts it" T session create "$TEST_IMAGE" --name "s$fs" --cpu 0.1 --mem 32m --mount "p$fs" --wait
	out=$(T session exec "s$fs" -- dd if=/dev/zero of="/home/work/p$fs/big" bs=1M count=20 2>&1)
	# XFS reports a project quota's end as a full filesystem (ENOSPC).
	want="Disk quota exceeded"
	[[ $fs == xfs ]] && want="No space left on device"
	check "writing 20 MB on $fs fails: $want ($(tail -1 <<<"$out"))" contains "$out" "$want"
	size=$(stat -c %s "$E2E_DIR/$fs/folders/$(T folder info "p$fs" --json | json_field id)/big")
	check "... and stops at the quota ($size bytes)" [ "$size" -le $((10 * MiB)) ]
	T session rm "s$fs" >/dev/null
done

rm -f "$E2E_DIR/twelve"
e2e_done
