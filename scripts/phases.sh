# Phase timing for the test scripts (sourced): `phase NAME` ends the running phase and starts
# NAME; on exit, whatever the outcome, each phase's wall time and the total are printed, so a
# phase that grows is seen long before it reaches CI's limit.
#   PHASE_TAG=test; source scripts/phases.sh; phase "build"; ...
_phase_names=()
_phase_secs=()
_phase_current=""
_phase_started=$SECONDS
_phase_t0=$SECONDS

_phase_close() {
  if [[ -n "$_phase_current" ]]; then
    _phase_names+=("$_phase_current")
    _phase_secs+=($((SECONDS - _phase_started)))
    _phase_current=""
  fi
}

phase() {
  _phase_close
  _phase_current=$1
  _phase_started=$SECONDS
  printf '[%s] %s\n' "${PHASE_TAG:-test}" "$1" >&2
}

_phase_summary() {
  local rc=$? i
  _phase_close
  printf '[%s] wall time per phase (exit %d):\n' "${PHASE_TAG:-test}" "$rc" >&2
  for i in "${!_phase_names[@]}"; do
    printf '[%s]   %6d s  %s\n' "${PHASE_TAG:-test}" "${_phase_secs[$i]}" "${_phase_names[$i]}" >&2
  done
  printf '[%s]   %6d s  total\n' "${PHASE_TAG:-test}" $((SECONDS - _phase_t0)) >&2
  return "$rc"
}
trap _phase_summary EXIT
