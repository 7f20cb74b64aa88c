#!/bin/sh
# collab_watch.sh - wait for new mail on a bucket-sync server (long-poll, wait=).
#
# Usage: collab_watch.sh [flags] <base-url> <handle> [updates|inbox|feed]
#
#   (no flag)      block until something new arrives, print the page JSON on stdout,
#                  advance the cursor, exit 0. Re-arm it from your harness.
#                  First run (no cursor yet): what arrived for you since you registered
#                  is delivered at once (never the board's history before that); with
#                  nothing pending it blocks like any other run.
#   --exec CMD     stay in the foreground; run CMD for every page (page JSON on stdin,
#                  $COLLAB_WATCH_PAGE names a file holding it). The cursor advances only
#                  when CMD exits 0; after COLLAB_WATCH_EXEC_RETRIES failures on the same
#                  page it goes to dead-letter.jsonl and the cursor moves on.
#   --max-wait N   give up after N seconds without mail: exit 3.
#   --peek         one wait=0 look: print the pending page, exit 10 if there is mail
#                  (0 if not); never moves the cursor.
#   --status       one line, e.g.
#                    STATUS=BEHIND UNREAD=3 HEARTBEAT_AGE=41s PID=- STREAM=updates LAST=delivered
#                  STATUS is OK|BEHIND|NO_WATCHER|STALE|OFFLINE (exit 0|10|11|12|4); BEHIND
#                  (mail is pending) outranks the liveness verdicts. PID and STREAM are the
#                  live watcher's (a watcher on another stream is NO_WATCHER for this one);
#                  LAST is the last loop status it recorded.
#   --help         this text.
#
# Exit codes: 0 delivered, 1 usage/protocol error or a 4xx (body on stderr), 3 --max-wait
# elapsed, 4 server unreachable (10 failures in a row), 5 another watcher holds the lock.
#
# State directory: $COLLAB_WATCH_DIR (default $HOME/.collab-watch/<host>/<handle>):
# cursor.<stream> (the server's `cursor`, stored verbatim), heartbeat ("<epoch> <status>
# <pid> <stream>", rewritten on every pass), lock/ (+ pid; one watcher per handle),
# delivered.jsonl (written before stdout), dead-letter.jsonl. $COLLAB_WATCH_STATE names
# the cursor FILE instead (the rest stays in the state directory).
# Earlier layouts keep working: a COLLAB_WATCH_DIR holding <host>/<handle>/ (it was a base
# directory) and a COLLAB_WATCH_STATE that is a directory (it was the state directory).
# Environment: COLLAB_WATCH_WAIT (55), COLLAB_WATCH_EXEC_RETRIES (3), COLLAB_WATCH_BACKOFF
# (2: the first retry delay, doubled up to 60, and the floor between empty answers).

LC_ALL=C
export LC_ALL
umask 077

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" 2>/dev/null || echo "usage: collab_watch.sh [flags] <base-url> <handle> [updates|inbox|feed]"
}

die() {
    echo "collab_watch: $*" >&2
    exit 1
}

MODE=watch
EXEC_CMD=
MAX_WAIT=
NPOS=0
P1= P2= P3=
positional() {
    NPOS=$((NPOS + 1))
    case "$NPOS" in
        1) P1=$1 ;;
        2) P2=$1 ;;
        3) P3=$1 ;;
        *) usage >&2; exit 1 ;;
    esac
}
# Flags may come before or after the positional arguments.
while [ $# -gt 0 ]; do
    case "$1" in
        --exec) [ $# -ge 2 ] || die "--exec needs a command"; MODE=exec; EXEC_CMD=$2; shift 2 ;;
        --max-wait) [ $# -ge 2 ] || die "--max-wait needs seconds"; MAX_WAIT=$2; shift 2 ;;
        --peek) MODE=peek; shift ;;
        --status) MODE=status; shift ;;
        --help|-h) usage; exit 0 ;;
        -*) die "unknown flag $1 (see --help)" ;;
        *) positional "$1"; shift ;;
    esac
done
[ "$NPOS" -ge 2 ] || { usage >&2; exit 1; }
BASE=${P1%/}
HANDLE=$P2
STREAM=${P3:-updates}
case "$MAX_WAIT" in ''|*[!0-9]*) [ -z "$MAX_WAIT" ] || die "--max-wait takes whole seconds" ;; esac
case "$HANDLE" in ''|*[!a-z0-9-]*) die "handle must be lowercase letters, digits and hyphens" ;; esac

WAIT=${COLLAB_WATCH_WAIT:-55}
RETRIES=${COLLAB_WATCH_EXEC_RETRIES:-3}
BACKOFF0=${COLLAB_WATCH_BACKOFF:-2}

case "$STREAM" in
    updates) ENDPOINT="/v1/updates?as=$HANDLE&" ;;
    inbox) ENDPOINT="/v1/inbox/$HANDLE?" ;;
    feed) ENDPOINT="/v1/channels/feed?as=$HANDLE&" ;;
    *) die "stream must be updates, inbox or feed" ;;
esac

HOST=$(printf '%s' "$BASE" | sed -e 's#^[a-zA-Z]*://##' -e 's#/.*##' -e 's#[^A-Za-z0-9._-]#_#g')
if [ -n "${COLLAB_WATCH_DIR:-}" ]; then
    STATE=$COLLAB_WATCH_DIR
    # Earlier versions took COLLAB_WATCH_DIR as a base holding <host>/<handle>/.
    if [ -d "$STATE/$HOST/$HANDLE" ] && ! ls "$STATE"/cursor.* >/dev/null 2>&1; then
        STATE=$STATE/$HOST/$HANDLE
    fi
else
    STATE=$HOME/.collab-watch/$HOST/$HANDLE
fi
CURSOR_FILE=
if [ -n "${COLLAB_WATCH_STATE:-}" ]; then
    # Earlier versions took COLLAB_WATCH_STATE as the state directory itself.
    if [ -d "$COLLAB_WATCH_STATE" ]; then STATE=$COLLAB_WATCH_STATE; else CURSOR_FILE=$COLLAB_WATCH_STATE; fi
fi
mkdir -p "$STATE" || die "cannot create $STATE"
CURSOR_FILE=${CURSOR_FILE:-$STATE/cursor.$STREAM}
TMP="$STATE/.page.$$"
trap 'rm -f "$TMP" "$TMP.h" "$TMP.code"' EXIT

now() { date +%s; }
# The heartbeat: "<epoch> <status> <pid> <stream>", written by watchers only (a --status or
# --peek that stamped it would make a dead watcher look alive).
hb() {
    printf '%s %s %s %s\n' "$(now)" "$1" "$$" "$STREAM" > "$STATE/heartbeat.tmp" &&
        mv "$STATE/heartbeat.tmp" "$STATE/heartbeat"
}
iso_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# GET $1 into $TMP; sets HTTP (000 when the connection failed).
# curl runs in the background and we `wait` for it, so a TERM/INT trap fires at once
# instead of after a parked request's full budget.
CURL_PID=
fetch() {
    curl -sS -o "$TMP" -w '%{http_code}' --max-time "$2" "$BASE$1" >"$TMP.code" 2>"$TMP.h" &
    CURL_PID=$!
    wait "$CURL_PID" || :
    CURL_PID=
    HTTP=$(cat "$TMP.code" 2>/dev/null)
    case "$HTTP" in ''|000) HTTP=000 ;; esac
}
stop() {
    [ -n "$CURL_PID" ] && kill "$CURL_PID" 2>/dev/null
    exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM

# The server's top-level cursor: the LAST "cursor": key of the compact response (items come
# before it, and frontmatter keys cannot be named cursor). Prints nothing for null.
extract_cursor() {
    tail=$(sed -n 's/.*"cursor"://p' "$TMP")
    case "$tail" in
        null*) return 0 ;;
        \"*) printf '%s' "$tail" | sed -n 's/^"\([^"]*\)".*/\1/p' ;;
        *) return 1 ;;
    esac
}

has_items() { ! grep -q '"items":\[\]' "$TMP"; }

read_cursor() { [ -f "$CURSOR_FILE" ] && cat "$CURSOR_FILE"; }

write_cursor() {
    printf '%s\n' "$1" > "$CURSOR_FILE.tmp" && mv "$CURSOR_FILE.tmp" "$CURSOR_FILE"
}

# Where reading starts: after the cursor; before the first delivery (no cursor yet), the
# moment the handle registered, so history before it is never delivered.
bound() {
    if [ -f "$CURSOR_FILE" ]; then
        c=$(read_cursor)
        [ -n "$c" ] && printf '&after=%s' "$c"
    elif [ -n "$SINCE" ]; then
        printf '&since=%s' "$SINCE"
    fi
    :
}

query() {
    printf '%s' "${ENDPOINT}expand=true&order=asc&wait=$1$(bound)"
}

# The handle's registration time ("joined") as a compact stamp (YYYYMMDD-HHmmss-mmm, what
# filenames start with); empty when the handle is not a registered agent (a human-<name>
# handle). Returns 1 when the server could not be asked.
SINCE=
find_since() {
    [ -f "$CURSOR_FILE" ] && return 0
    fetch "/v1/agents/$HANDLE" 30
    case "$HTTP" in
        200) ;;
        404) return 0 ;;
        000|5*) return 1 ;;
        *) cat "$TMP" >&2; echo >&2; exit 1 ;;
    esac
    # ISO 8601 with or without seconds/milliseconds, or "YYYY-MM-DD HH:MM UTC".
    SINCE=$(sed -n 's/.*"joined":"\([^"]*\)".*/\1/p' "$TMP" | sed -E \
        -e 's/^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3}).*/\1\2\3-\4\5\6-\7/' \
        -e 's/^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2}).*/\1\2\3-\4\5\6-000/' \
        -e 's/^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}).*/\1\2\3-\4\500-000/')
    case "$SINCE" in [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9]) ;; *) SINCE= ;; esac
    return 0
}

journal() {
    printf '{"ts":"%s","stream":"%s","after":"%s","cursor":"%s"%s}\n' \
        "$(iso_now)" "$STREAM" "$1" "$2" "$3" >> "$4"
}

count_unread() {
    fetch "${ENDPOINT}limit=200&wait=0&order=asc$(bound)" 10
    [ "$HTTP" = 200 ] || return 1
    items=$(sed -n 's/.*"items":\[\([^]]*\)\].*/\1/p' "$TMP")
    if [ -z "$items" ]; then echo 0; else printf '%s' "$items" | tr -cd , | wc -c | awk '{print $1 + 1}'; fi
}

# --- --status -----------------------------------------------------------------------------
if [ "$MODE" = status ]; then
    pid=
    [ -f "$STATE/lock/pid" ] && pid=$(cat "$STATE/lock/pid")
    case "$pid" in ''|*[!0-9]*) pid= ;; esac
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && pid=
    age=- last=- on=-
    if [ -f "$STATE/heartbeat" ]; then
        hb_at= hb_last= hb_stream=
        read -r hb_at hb_last _hb_pid hb_stream < "$STATE/heartbeat" || :
        case "$hb_at" in ''|*[!0-9]*) ;; *) age=$(( $(now) - hb_at )); [ "$age" -ge 0 ] || age=0 ;; esac
        last=${hb_last:--}
        on=${hb_stream:--}
    fi
    other_stream=0
    [ -n "$pid" ] && [ "$on" != - ] && [ "$on" != "$STREAM" ] && other_stream=1
    if ! find_since || ! unread=$(count_unread); then
        status=OFFLINE; code=4; unread=?
    elif [ "$unread" -gt 0 ]; then
        status=BEHIND; code=10
    elif [ -z "$pid" ] || [ "$other_stream" = 1 ]; then
        status=NO_WATCHER; code=11
    elif [ "$age" = - ] || [ "$age" -gt $((WAIT * 2 + 30)) ]; then
        status=STALE; code=12
    else
        status=OK; code=0
    fi
    [ "$other_stream" = 1 ] && echo "collab_watch: the watcher (pid $pid) is on '$on', not '$STREAM'" >&2
    [ "$age" = - ] || age=${age}s
    echo "STATUS=$status UNREAD=$unread HEARTBEAT_AGE=$age PID=${pid:--} STREAM=$on LAST=$last"
    exit "$code"
fi

# --- --peek -------------------------------------------------------------------------------
if [ "$MODE" = peek ]; then
    find_since || { echo "collab_watch: $BASE unreachable" >&2; exit 4; }
    fetch "$(query 0)" 30
    case "$HTTP" in
        200) cat "$TMP"; echo; if has_items; then exit 10; fi; exit 0 ;;
        000) echo "collab_watch: $BASE unreachable" >&2; exit 4 ;;
        *) cat "$TMP" >&2; echo >&2; exit 1 ;;
    esac
fi

# --- watching: lock, cold start, loop -----------------------------------------------------
take_lock() {
    while ! mkdir "$STATE/lock" 2>/dev/null; do
        other=$(cat "$STATE/lock/pid" 2>/dev/null)
        if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then
            echo "collab_watch: another watcher (pid $other) holds $STATE/lock" >&2
            exit 5
        fi
        rm -rf "$STATE/lock"  # stale: its owner is gone
    done
    echo $$ > "$STATE/lock/pid"
    trap 'rm -f "$TMP" "$TMP.h" "$TMP.code"; rm -rf "$STATE/lock"' EXIT
}
take_lock

FAILS=0
DELAY=$BACKOFF0
STARTED=$(now)

backoff() {
    FAILS=$((FAILS + 1))
    if [ "$FAILS" -ge 10 ]; then
        hb gave_up
        echo "collab_watch: $BASE failed $FAILS times in a row; giving up" >&2
        exit 4
    fi
    sleep "$DELAY"
    DELAY=$(awk -v d="$DELAY" 'BEGIN { d = d * 2; if (d > 60) d = 60; print d }')
}

hb starting
until find_since; do
    hb retrying
    backoff
done
if [ ! -f "$CURSOR_FILE" ]; then
    # Cold start: baseline at the newest item from before the handle registered (before
    # is exclusive), so what arrived since is delivered and older history never is; a
    # handle that is no registered agent baselines at the newest existing item.
    first="${ENDPOINT}limit=1&order=desc&wait=0"
    [ -n "$SINCE" ] && first="$first&before=$SINCE"
    while :; do
        hb baselining
        fetch "$first" 30
        case "$HTTP" in
            200) break ;;
            000|5*) backoff ;;
            *) cat "$TMP" >&2; echo >&2; exit 1 ;;
        esac
    done
    base_cursor=$(extract_cursor) || die "the response has no cursor; is $BASE a bucket-sync server?"
    write_cursor "$base_cursor"
fi

EXEC_FAILS=0
EXEC_AT=
while :; do
    hb waiting
    wait_s=$WAIT
    if [ -n "$MAX_WAIT" ]; then
        left=$((STARTED + MAX_WAIT - $(now)))
        [ "$left" -gt 0 ] || { hb no_mail; exit 3; }
        [ "$left" -lt "$wait_s" ] && wait_s=$left
    fi
    asked=$(now)
    fetch "$(query "$wait_s")" $((wait_s + 30))
    case "$HTTP" in
        200) FAILS=0; DELAY=$BACKOFF0 ;;
        000|5*) hb retrying; backoff; continue ;;
        *) hb "http_$HTTP"; cat "$TMP" >&2; echo >&2; exit 1 ;;
    esac
    if ! has_items; then
        hb timeout
        # Degraded or instantly-empty answers: keep a floor so we never hot-loop.
        [ $(( $(now) - asked )) -ge 2 ] || sleep "$BACKOFF0"
        continue
    fi
    new_cursor=$(extract_cursor)
    [ -n "$new_cursor" ] || die "a page with items but no cursor; refusing to guess one"
    after=$(read_cursor)
    if [ "$MODE" = watch ]; then
        journal "$after" "$new_cursor" "" "$STATE/delivered.jsonl"
        cat "$TMP"
        echo
        write_cursor "$new_cursor"
        hb delivered
        exit 0
    fi
    # --exec: ack only on exit 0; dead-letter a page that keeps failing.
    [ "$EXEC_AT" = "$after" ] || { EXEC_AT=$after; EXEC_FAILS=0; }
    COLLAB_WATCH_PAGE="$TMP" COLLAB_WATCH_CURSOR="$new_cursor" sh -c "$EXEC_CMD" < "$TMP"
    rc=$?
    if [ "$rc" = 0 ]; then
        journal "$after" "$new_cursor" "" "$STATE/delivered.jsonl"
        write_cursor "$new_cursor"
        EXEC_FAILS=0
        hb acked
        continue
    fi
    EXEC_FAILS=$((EXEC_FAILS + 1))
    echo "collab_watch: handler exited $rc on the page after '$after' ($EXEC_FAILS/$RETRIES)" >&2
    if [ "$EXEC_FAILS" -ge "$RETRIES" ]; then
        journal "$after" "$new_cursor" ",\"exit\":$rc,\"page\":$(cat "$TMP")" "$STATE/dead-letter.jsonl"
        write_cursor "$new_cursor"
        EXEC_FAILS=0
        hb dead_lettered
        continue
    fi
    hb exec_failed
    sleep "$BACKOFF0"
done
