#!/usr/bin/env bash
# make test-packages: builds the Debian packages (make deb), runs lintian on
# them, installs them with apt into a fresh Debian 12 root and checks what an
# administrator would: nginx -t loads the module from modules-enabled, a
# traced request reaches spanprof serve started as spanprof-serve.service
# starts it, a2enmod + apache2ctl configtest, systemd-analyze verify on the
# unit, and that purging the packages removes every file they made.
# Prints TAP (prove -v t/packages/install.t). Needs root and the Debian
# archive (the mirror of this machine's apt sources); docs/packages.md.
#
# Environment:
#   SPANPROF_PKG_SKIP_BUILD=1  test the .debs already in build/debs
#   SPANPROF_PKG_CACHE=DIR     where the Debian 12 root tarball is kept
#                              between runs (default build/packages-cache;
#                              delete it to bootstrap anew)
#   SPANPROF_DEBIAN_MIRROR=URL instead of the mirror apt is configured with
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
SRC=$(pwd -P)
BUILD=${BUILD:-build}
DEBS=$SRC/$BUILD/debs
WORK=$SRC/$BUILD/packages
CACHE=${SPANPROF_PKG_CACHE:-$SRC/$BUILD/packages-cache}
SUITE=bookworm
R=$WORK/root
# The unit's DynamicUser gets a uid in 61184..65519; this one stands for it.
DYN_UID=61999

tests=0
failed=0
ok() {      # ok STATUS DESCRIPTION
    tests=$((tests + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tests - $2"
    else
        echo "not ok $tests - $2"
        failed=$((failed + 1))
    fi
}
diag() { sed 's/^/# /'; }
check() {   # check DESCRIPTION COMMAND...: ok when it exits 0, its output as diag when not
    local desc=$1 out rc
    shift
    out=$("$@" 2>&1)
    rc=$?
    ok "$rc" "$desc"
    [ "$rc" -eq 0 ] || printf '%s\n' "$out" | tail -n 30 | diag
    return "$rc"
}
bail() { echo "Bail out! $*"; exit 255; }

if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP needs root (debootstrap, chroot, namespaces)"
    exit 0
fi

# Mounts (/proc in the root, the network namespace's file) live in a
# private mount namespace: they go away with this script, however it ends.
if [ -z "${SPANPROF_PKG_IN_NS:-}" ]; then
    SPANPROF_PKG_IN_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi

# The packaging tools; the rest (gcc, nginx-dev...) scripts/install-deps has.
need=()
for p in debhelper dpkg-dev lintian debootstrap iproute2 util-linux curl; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "# installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
        >/dev/null 2>&1 || bail "apt-get install ${need[*]} failed"
fi

# The Debian archive this machine's apt uses, for suite S: "URI S main".
apt_source() {
    apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
        'Identifier: Packages' 2>/dev/null | awk -v s="$1" '$2 == s && $3 == "main" { print $1; exit }'
}
MIRROR=${SPANPROF_DEBIAN_MIRROR:-$(apt_source "$SUITE")}
[ -n "$MIRROR" ] || bail "no $SUITE main in apt's sources (run apt-get update, or set SPANPROF_DEBIAN_MIRROR)"

in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
apt_root() { in_root DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0 "$@"; }

# --- 1. build -----------------------------------------------------------------
t0=$(date +%s)
if [ -z "${SPANPROF_PKG_SKIP_BUILD:-}" ]; then
    log=$WORK.build.log
    mkdir -p "$(dirname "$log")"
    make --no-print-directory BUILD="$BUILD" deb >"$log" 2>&1
    check "dpkg-buildpackage -b -us -uc builds the packages ($(($(date +%s) - t0)) s)" test $? -eq 0 \
        || { tail -n 40 "$log" | diag; bail "build failed (log: $log)"; }
fi
VERSION=$(dpkg-parsechangelog -S Version)
ARCH=$(dpkg --print-architecture)
PKGS="libnginx-mod-http-spanprof libapache2-mod-spanprof spanprof"
DEB_FILES=()
for p in $PKGS; do
    DEB_FILES+=("$DEBS/${p}_${VERSION}_${ARCH}.deb")
done
check "the three .debs are in $BUILD/debs" ls "${DEB_FILES[@]}" || bail "no packages"

# --- 2. lintian ---------------------------------------------------------------
# Errors fail; so does any warning that no override (debian/*.lintian-
# overrides, each with its reason) accounts for. Info tags are shown.
lintian --fail-on error,warning -I --pedantic "$DEBS/spanprof_${VERSION}_${ARCH}.changes" >"$WORK.lintian.log" 2>&1
ok $? "lintian: no error and no unjustified warning"
grep -v '^running with root' "$WORK.lintian.log" | diag

# --- 3. a fresh Debian 12 root ------------------------------------------------
# Cached: debootstrap --variant=minbase plus nginx, apache2, systemd (for
# systemd-analyze) and man-db (which systemd-analyze runs for the unit's
# Documentation=), sources from this machine's apt configuration; mod_headers
# enabled (the test's requests return their trace id in a header) and
# apache2's module-state directories made, as a2enmod/a2dismod make them on
# first use: they are apache2's, and stay after any module's purge.
BASE_PKGS="nginx apache2 systemd man-db"
BASE_SETUP="a2enmod -q headers && mkdir -p /var/lib/apache2/module/enabled_by_admin \
    /var/lib/apache2/module/disabled_by_admin /var/lib/apache2/module/enabled_by_maint \
    /var/lib/apache2/module/disabled_by_maint"
base=$CACHE/$SUITE-$(echo "$BASE_PKGS $BASE_SETUP" | md5sum | cut -c1-8).tar
if [ ! -s "$base" ]; then
    t1=$(date +%s)
    mkdir -p "$CACHE"
    tmp=$CACHE/root.tmp
    rm -rf "$tmp"
    debootstrap --variant=minbase "$SUITE" "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -n 20 "$CACHE/debootstrap.log" | diag; bail "debootstrap $SUITE $MIRROR failed"; }
    {
        for s in "$SUITE" "$SUITE-updates" "$SUITE-security"; do
            u=$(apt_source "$s")
            [ -n "$u" ] && echo "deb $u $s main"
        done
    } >"$tmp/etc/apt/sources.list"
    printf '#!/bin/sh\n# no service starts in this test root\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
    chmod 755 "$tmp/usr/sbin/policy-rc.d"
    mount -t proc proc "$tmp/proc"
    R=$tmp apt_root update >"$CACHE/apt.log" 2>&1 &&
        R=$tmp apt_root install --no-install-recommends $BASE_PKGS >>"$CACHE/apt.log" 2>&1 &&
        R=$tmp in_root sh -c "$BASE_SETUP" >>"$CACHE/apt.log" 2>&1
    rc=$?
    R=$tmp apt_root clean >/dev/null 2>&1
    umount "$tmp/proc"
    [ $rc -eq 0 ] || { tail -n 20 "$CACHE/apt.log" | diag; bail "installing $BASE_PKGS in the root failed"; }
    tar -C "$tmp" -cf "$base.tmp" . && mv "$base.tmp" "$base" && rm -rf "$tmp"
    echo "# bootstrapped $SUITE from $MIRROR in $(($(date +%s) - t1)) s (cached in $base)"
fi
rm -rf "$R" && mkdir -p "$R" && tar -C "$R" -xf "$base" || bail "cannot unpack $base"
mount -t proc proc "$R/proc" || bail "cannot mount /proc in $R"
cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null

# The packages' dependencies first, so that the file list taken before
# installing spanprof's packages differs from the one after purging them by
# what those packages left behind only.
deps=$(for f in "${DEB_FILES[@]}"; do dpkg-deb -f "$f" Depends; done | paste -sd, | sed 's/,/, /g')
apt_root update >"$WORK/apt.log" 2>&1 && apt_root satisfy "$deps" >>"$WORK/apt.log" 2>&1
check "apt installs the packages' dependencies" test $? -eq 0 \
    || { tail -n 20 "$WORK/apt.log" | diag; bail "no dependencies"; }

# Every file of the root (type, mode, owner, link target, checksum of
# regular files), but for what belongs to the system's bookkeeping or to the
# test's own running servers: pseudo file systems, /tmp, /run, logs, apt's
# and dpkg's databases and caches, nginx's temp directories.
PRUNE=(\( -path ./proc -o -path ./dev -o -path ./sys -o -path ./tmp -o -path ./run
       -o -path ./var/log -o -path ./var/cache -o -path ./var/lib/apt -o -path ./var/lib/dpkg
       -o -path ./var/lib/nginx \) -prune -o)
snapshot() {
    (cd "$R" && {
        find . "${PRUNE[@]}" -printf '%p %y %m %u:%g -> %l\n'
        find . "${PRUNE[@]}" -type f -print0 | xargs -0r md5sum | sed -E 's/^([0-9a-f]{32})  (.*)$/\2 md5 \1/'
    } | sort)
}
snapshot >"$WORK/before-install.list"

mkdir -p "$R/tmp/debs" && cp "${DEB_FILES[@]}" "$R/tmp/debs/"
apt_root install --no-install-recommends $(cd "$R" && ls tmp/debs/*.deb | sed 's|^|/|') >"$WORK/install.log" 2>&1
check "apt installs $PKGS into the $SUITE root" test $? -eq 0 \
    || { tail -n 30 "$WORK/install.log" | diag; bail "install failed"; }

# --- 4. nginx -----------------------------------------------------------------
# dh_nginx's nginx-abi-* dependency names what the root's nginx provides.
abi=$(dpkg-deb -f "${DEB_FILES[0]}" Depends | grep -o 'nginx-abi-[^,]*')
provides=$(chroot "$R" dpkg-query -W -f='${Provides}' nginx)
check "the nginx module depends on the nginx ABI it was built for (${abi:-none})" \
    sh -c "test -n '$abi' && echo '$provides' | grep -qwF -- '$abi'"
check "installed: modules-enabled/50-mod-http-spanprof.conf loads ngx_http_spanprof_module.so" \
    sh -c "test \"\$(readlink '$R/etc/nginx/modules-enabled/50-mod-http-spanprof.conf')\" = /usr/share/nginx/modules-available/mod-http-spanprof.conf \
        && grep -qx 'load_module modules/ngx_http_spanprof_module.so;' '$R/usr/share/nginx/modules-available/mod-http-spanprof.conf' \
        && test -f '$R/usr/lib/nginx/modules/ngx_http_spanprof_module.so'"

# Export to spanprof serve with the modules' default protocol (OTLP/gRPC)
# to the unit's default gRPC address: the pieces fit with no protocol line.
cat >"$R/etc/nginx/conf.d/spanprof-test.conf" <<'EOF'
otel_exporter { endpoint 127.0.0.1:4317; interval 100ms; }
otel_service_name pkgtest-nginx;
server {
    listen 127.0.0.1:8081;
    otel_trace on;
    add_header X-Trace-Id $otel_trace_id always;
    location / { return 200 "traced\n"; }
}
EOF
check "nginx -t: the configuration with otel_* directives passes" in_root nginx -t
mv "$R/etc/nginx/modules-enabled/50-mod-http-spanprof.conf" "$WORK/link.saved" 2>/dev/null
out=$(in_root nginx -t 2>&1)
echo "$out" | grep -q 'unknown directive "otel_exporter"'
check "nginx -t: without modules-enabled/50-mod-http-spanprof.conf the same configuration fails" test $? -eq 0 \
    || echo "$out" | diag
[ -L "$WORK/link.saved" ] && mv "$WORK/link.saved" "$R/etc/nginx/modules-enabled/50-mod-http-spanprof.conf"

# --- 5. apache2 ---------------------------------------------------------------
check "installed: a2query -m spanprof (enabled on install)" in_root a2query -q -m spanprof
check "a2dismod spanprof" in_root a2dismod -q spanprof
check "a2enmod spanprof" in_root a2enmod -q spanprof
check "mods-enabled/spanprof.load and spanprof.conf link to mods-available" \
    sh -c "test \"\$(readlink '$R/etc/apache2/mods-enabled/spanprof.load')\" = ../mods-available/spanprof.load \
        && test \"\$(readlink '$R/etc/apache2/mods-enabled/spanprof.conf')\" = ../mods-available/spanprof.conf"
# The commented defaults of mods-available/spanprof.conf are valid once
# uncommented (the CA bundle's path pointed at a real one).
conf=$R/etc/apache2/mods-available/spanprof.conf
cp "$conf" "$WORK/spanprof.conf.saved"
cp /etc/ssl/certs/ca-certificates.crt "$R/tmp/ca.pem"
sed -i 's/^\t#\([^ ]\)/\t\1/; s|/etc/ssl/certs/ca-certificates.crt|/tmp/ca.pem|' "$conf"
check "apache2ctl configtest: mods-available/spanprof.conf with every line uncommented" \
    sh -c "grep -q '^.OtelProfilingRate 100' '$conf' && chroot '$R' apache2ctl configtest"
cp "$WORK/spanprof.conf.saved" "$conf"

cat >"$R/etc/apache2/conf-enabled/spanprof-test.conf" <<'EOF'
OtelExporterEndpoint 127.0.0.1:4317
OtelExporterInterval 0.1
OtelServiceName pkgtest-apache
Listen 127.0.0.1:8082
<VirtualHost 127.0.0.1:8082>
    OtelTrace On
    Header always set X-Trace-Id "%{OTEL_TRACE_ID}e"
</VirtualHost>
EOF
check "apache2ctl configtest: the configuration with Otel* directives passes" in_root apache2ctl configtest
in_root a2dismod -q spanprof >/dev/null 2>&1
out=$(in_root apache2ctl configtest 2>&1)
echo "$out" | grep -q "Invalid command 'OtelExporterEndpoint'"
check "apache2ctl configtest: after a2dismod spanprof the same configuration fails" test $? -eq 0 \
    || echo "$out" | diag
in_root a2enmod -q spanprof >/dev/null 2>&1

# --- 6. the spanprof-serve unit -----------------------------------------------
UNIT=/lib/systemd/system/spanprof-serve.service
check "systemd-analyze verify $UNIT" \
    sh -c "out=\$(chroot '$R' systemd-analyze verify '$UNIT' 2>&1); echo \"\$out\"; test -z \"\$out\""
check "the unit: DynamicUser, StateDirectory, EnvironmentFile, ExecStart" \
    sh -c "grep -qx 'DynamicUser=yes' '$R$UNIT' && grep -qx 'StateDirectory=spanprof' '$R$UNIT' \
        && grep -qx 'EnvironmentFile=-/etc/default/spanprof-serve' '$R$UNIT' \
        && grep -q '^ExecStart=/usr/bin/spanprof serve .*\$SPANPROF_SERVE_ARGS' '$R$UNIT'"
check "installed: spanprof-serve.service enabled (multi-user.target.wants)" \
    test -L "$R/etc/systemd/system/multi-user.target.wants/spanprof-serve.service"
check "man pages: spanprof(1) and spanprof-serve(1)" \
    test -s "$R/usr/share/man/man1/spanprof.1.gz" -a -s "$R/usr/share/man/man1/spanprof-serve.1.gz"

# Everything runs in a network namespace of its own: the unit's default
# ports (4317, 4318, 16686) and nginx's and httpd's are free there whatever else
# runs on this machine, and nothing listens outside it.
NS=$WORK/netns
touch "$NS" && unshare --net="$NS" true && nsenter --net="$NS" ip link set lo up \
    || bail "cannot make a network namespace"
in_ns() { nsenter --net="$NS" "$@"; }
# At the end, whatever still runs inside the root (started by this test:
# nothing else runs there) is stopped.
cleanup() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && kill "${p#/proc/}" 2>/dev/null
    done
}
trap cleanup EXIT

# spanprof serve as the unit starts it: ExecStart as written in the installed
# unit, $SPANPROF_SERVE_ARGS from the installed environment file split on
# white space (as systemd splits an unbraced $VAR), as an unprivileged user
# owning the StateDirectory (mode 0700), with the unit's UMask.
exec_start=$(sed -n 's/^ExecStart=//p' "$R$UNIT")
args=$(set -a; . "$R/etc/default/spanprof-serve"; echo "$SPANPROF_SERVE_ARGS")
cmd=${exec_start//\$SPANPROF_SERVE_ARGS/$args}
state_mode=$(sed -n 's/^StateDirectoryMode=//p' "$R$UNIT")
umask_unit=$(sed -n 's/^UMask=//p' "$R$UNIT")
echo "# $cmd"
install -d -m "${state_mode:-0755}" -o "$DYN_UID" -g "$DYN_UID" "$R/var/lib/spanprof"
# shellcheck disable=SC2086  # split as systemd does
nsenter --net="$NS" chroot --userspec="$DYN_UID:$DYN_UID" "$R" /usr/bin/env -i PATH=/usr/bin:/bin \
    STATE_DIRECTORY=/var/lib/spanprof sh -c "umask ${umask_unit:-0022}; cd /; exec $cmd" \
    >"$WORK/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 50); do grep -q 'OTLP on' "$WORK/serve.log" && break; sleep 0.1; done
check "spanprof serve starts with the unit's ExecStart and environment file" grep -q 'OTLP on' "$WORK/serve.log" \
    || diag <"$WORK/serve.log"
check "spanprof serve listens on loopback addresses only (127.0.0.1:4317, 127.0.0.1:4318, 127.0.0.1:16686)" \
    sh -c "l=\$(nsenter --net='$NS' ss -Hltn | awk '{print \$4}' | sort | paste -sd' '); echo \"\$l\"; test \"\$l\" = '127.0.0.1:16686 127.0.0.1:4317 127.0.0.1:4318'"
check "spanprof serve keeps its database in the StateDirectory, owned by the service's user" \
    sh -c "test \"\$(stat -c %u '$R/var/lib/spanprof/spanprof.db')\" = $DYN_UID"

# A traced request through each server, found by its trace id in serve's API.
span_in_serve() {   # span_in_serve TRACE_ID SERVICE
    local body
    for _ in $(seq 50); do
        body=$(in_ns curl -fsS "http://127.0.0.1:16686/api/traces/$1" 2>/dev/null) &&
            echo "$body" | grep -q "\"$2\"" && return 0
        sleep 0.2
    done
    echo "no span of trace $1 from $2 in spanprof serve: ${body:-nothing}"
    return 1
}
in_ns chroot "$R" nginx >"$WORK/nginx.log" 2>&1
tid=$(in_ns curl -fsS -D - -o /dev/null http://127.0.0.1:8081/ 2>/dev/null | tr -d '\r' | sed -n 's/^X-Trace-Id: //Ip')
check "nginx: a traced request's span (trace ${tid:-none}) is exported to spanprof serve" \
    span_in_serve "${tid:-none}" pkgtest-nginx || tail -n 5 "$R/var/log/nginx/error.log" 2>&1 | diag
in_ns chroot "$R" nginx -s quit 2>/dev/null

in_ns chroot "$R" apache2ctl start >"$WORK/apache.log" 2>&1
tid=$(in_ns curl -sS -D - -o /dev/null http://127.0.0.1:8082/ 2>/dev/null | tr -d '\r' | sed -n 's/^X-Trace-Id: //Ip')
check "apache2: a traced request's span (trace ${tid:-none}) is exported to spanprof serve" \
    span_in_serve "${tid:-none}" pkgtest-apache || tail -n 5 "$R/var/log/apache2/error.log" 2>&1 | diag
in_ns chroot "$R" apache2ctl stop >/dev/null 2>&1

kill -TERM "$serve_pid"
wait "$serve_pid"
check "spanprof serve stops on SIGTERM (systemctl stop) with status 0" test $? -eq 0 \
    || tail -n 5 "$WORK/serve.log" | diag
for _ in $(seq 50); do in_ns chroot "$R" pgrep -x 'nginx|apache2' >/dev/null || break; sleep 0.1; done

# --- 7. purge -----------------------------------------------------------------
rm -f "$R/etc/nginx/conf.d/spanprof-test.conf" "$R/etc/apache2/conf-enabled/spanprof-test.conf"
apt_root purge $PKGS >"$WORK/purge.log" 2>&1
check "apt-get purge $PKGS" test $? -eq 0 || tail -n 20 "$WORK/purge.log" | diag
check "dpkg knows none of them any more" \
    sh -c "! chroot '$R' dpkg-query -W -f='\${db:Status-Abbrev} \${Package}\n' $PKGS 2>/dev/null | grep -v '^un '"
snapshot >"$WORK/after-purge.list"
check "purge removes every file the packages made (the root is as before the install)" \
    diff -u "$WORK/before-install.list" "$WORK/after-purge.list"

umount "$R/proc" 2>/dev/null
echo "# $(($(date +%s) - t0)) s"
echo "1..$tests"
[ "$failed" -eq 0 ]
