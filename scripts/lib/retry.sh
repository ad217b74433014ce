# retry CMD...: run CMD up to three times, 15 s then 30 s apart, and fail
# with its status only if the last try fails too. For fetches from the
# package registry, whose transient faults (a dropped stream, which pip's own
# --retries does not cover: it retries connections, not bodies) must not fail
# a CI run. Sourced by .ci/run and the scripts it calls.
retry() {
  local try status
  for try in 1 2 3; do
    "$@" && return 0
    status=$?
    [ "$try" -lt 3 ] || break
    echo "retry: '$*' failed (exit $status), try $((try + 1)) of 3 in $((try * 15)) s" >&2
    sleep $((try * 15))
  done
  return "$status"
}
