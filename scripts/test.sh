#!/usr/bin/env bash
# Runs every test (unit + integration). Keychain tests need a Secret Service: when none is running,
# this starts a private D-Bus session with gnome-keyring, unlocked with a throwaway password.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${AIRLOCK_IN_TEST_SESSION:-}" ] && [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ] \
   && command -v dbus-run-session >/dev/null && command -v gnome-keyring-daemon >/dev/null; then
  # A keyring of its own in a temp dir: an existing one made with another password would refuse
  # the unlock. Only the daemon sees this XDG_DATA_HOME; the tests keep the user's.
  # The bus starts the daemon on first use through a service file of our own, so a daemon that
  # stops mid-run (seen once in CI) comes back unlocked on the same keyring instead of the
  # system's `--start` one, which has no unlocked keyring and hangs every write on a prompt.
  session=$(mktemp -d)
  mkdir -p "$session/keyrings" "$session/services"
  cat > "$session/keyring-daemon.sh" <<EOF
#!/usr/bin/env bash
[ -e "$session/started" ] && echo "[test.sh] the Secret Service had stopped; starting it again on the same keyring" >&2
touch "$session/started"
printf '%s' airlock-test-keyring | XDG_DATA_HOME="$session/keyrings" exec gnome-keyring-daemon --unlock --foreground --components=secrets >/dev/null
EOF
  chmod +x "$session/keyring-daemon.sh"
  printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=%s\n' "$session/keyring-daemon.sh" > "$session/services/org.freedesktop.secrets.service"
  cat > "$session/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$session/services</servicedir>
  <standard_session_servicedirs/>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
EOF
  set +e
  AIRLOCK_IN_TEST_SESSION=1 dbus-run-session --config-file="$session/bus.conf" -- bash "$0" "$@"
  rc=$?
  rm -rf "$session"
  exit $rc
fi
npm_config_update_notifier=false npx vitest run "$@"
