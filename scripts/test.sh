#!/usr/bin/env bash
# Runs every test (unit + integration). Keychain tests need a Secret Service: when none is running,
# this starts a private D-Bus session with gnome-keyring, unlocked with a throwaway password.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${AIRLOCK_IN_TEST_SESSION:-}" ] && [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ] \
   && command -v dbus-run-session >/dev/null && command -v gnome-keyring-daemon >/dev/null; then
  exec env AIRLOCK_IN_TEST_SESSION=1 dbus-run-session -- bash "$0" "$@"
fi
if [ -n "${AIRLOCK_IN_TEST_SESSION:-}" ]; then
  # A keyring of its own in a temp dir: an existing one made with another password would refuse
  # the unlock. Only the daemon sees this XDG_DATA_HOME; the tests keep the user's.
  keyrings=$(mktemp -d)
  trap 'rm -rf "$keyrings"' EXIT
  printf '%s' "airlock-test-keyring" | XDG_DATA_HOME="$keyrings" gnome-keyring-daemon --unlock --components=secrets >/dev/null
fi
npm_config_update_notifier=false npx vitest run "$@"
