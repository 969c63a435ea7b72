# Sourced (`. examples/supervisor-tls.sh`) by a SkyPilot `run` before it starts anything: writes the supervisor
# certificate and key Haru issued for this host to files only this user can read, and exports
# HARU_SUPERVISOR_TLS_CERT_FILE and HARU_SUPERVISOR_TLS_KEY_FILE for `haru supervisor`.
#
# Haru hands them over with the launch as secrets (`sky launch --secret HARU_SUPERVISOR_TLS_CERT_B64 --secret
# HARU_SUPERVISOR_TLS_KEY_B64`: the PEM text, base64 on one line) when the domain's layout says
# `"supervisor": {"issueCertificate": true, "serverName": …}`. The values are then removed from the environment,
# so neither the vLLM servers nor the trainers started after this inherit the key. Without them it does nothing
# (the supervisor serves plain HTTP, or HTTPS from files the image holds).
#
# HARU_SUPERVISOR_TLS_DIR: where the files go (default ~/.haru/tls, created 0700).
if [ -n "${HARU_SUPERVISOR_TLS_CERT_B64:-}${HARU_SUPERVISOR_TLS_KEY_B64:-}" ]; then
  if [ -z "${HARU_SUPERVISOR_TLS_CERT_B64:-}" ] || [ -z "${HARU_SUPERVISOR_TLS_KEY_B64:-}" ]; then
    echo 'supervisor-tls: HARU_SUPERVISOR_TLS_CERT_B64 and HARU_SUPERVISOR_TLS_KEY_B64 come together' >&2
    exit 1
  fi
  haru_tls_dir=${HARU_SUPERVISOR_TLS_DIR:-$HOME/.haru/tls}
  # A new file gets 0600 from the umask; one left by an earlier launch is removed first so that its mode does not stay.
  if ! (umask 077 && mkdir -p "$haru_tls_dir" &&
    rm -f "$haru_tls_dir/supervisor.pem" "$haru_tls_dir/supervisor.key" &&
    printf '%s' "$HARU_SUPERVISOR_TLS_CERT_B64" | base64 -d >"$haru_tls_dir/supervisor.pem" &&
    printf '%s' "$HARU_SUPERVISOR_TLS_KEY_B64" | base64 -d >"$haru_tls_dir/supervisor.key"); then
    echo "supervisor-tls: could not write the certificate and key to $haru_tls_dir" >&2
    exit 1
  fi
  export HARU_SUPERVISOR_TLS_CERT_FILE="$haru_tls_dir/supervisor.pem"
  export HARU_SUPERVISOR_TLS_KEY_FILE="$haru_tls_dir/supervisor.key"
  unset HARU_SUPERVISOR_TLS_CERT_B64 HARU_SUPERVISOR_TLS_KEY_B64 haru_tls_dir
fi
