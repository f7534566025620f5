#!/usr/bin/env bash
# Sourced by the cached builds that make test runs niced in the background
# (tools/warm-caches) and that a test may then wait for.
#
# take_lock FD PIDFILE: flock FD (opened by the caller). When another process holds it,
# that holder - the pid in PIDFILE - and every process under it are raised to this
# caller's niceness before the wait: the build that ran niced beside the tests is now
# what a test waits for, and at nice 10 among two busy sessions it took an hour on CI.
# Once the lock is taken, this process's pid goes into PIDFILE. Raising a priority needs
# root (make test's); without it the wait is as before.
take_lock() {
    local fd=$1 pidfile=$2 holder
    if ! flock -n "$fd"; then
        holder=$(cat "$pidfile" 2>/dev/null || true)
        if [[ "$holder" =~ ^[0-9]+$ ]]; then
            # shellcheck disable=SC2046  # the pids, one word each
            renice -n "$(nice)" -p "$holder" $(_descendants "$holder") >/dev/null 2>&1 || true
        fi
        flock "$fd"
    fi
    echo $$ > "$pidfile"
}

_descendants() {
    local child
    for child in $(pgrep -P "$1"); do
        echo "$child"
        _descendants "$child"
    done
}
