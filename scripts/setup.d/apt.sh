# shellcheck shell=bash
# apt_install PKG…: install Debian packages with apt-get, one install at a time. The setup's
# background lines (web.sh's chromium, llama-server.sh's cmake) may run apt-get at the same
# moment, and apt's lists lock is not covered by DPkg::Lock::Timeout: on a cold machine
# chromium's `apt-get update` failed at once with "Could not get lock /var/lib/apt/lists/lock.
# It is held by process … (apt-get)" and every browser suite failed after it. So the installs
# take one lock file of ours (flock), and an `apt-get update` that still finds the lock held
# (by an apt-get outside this setup) is retried for up to 10 minutes.
apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  local lock="${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/apt.lock"
  mkdir -p "$(dirname "$lock")"
  (
    flock -w 1200 9 || { echo "setup: another setup holds $lock for 20 min" >&2; exit 1; }
    local waited=0
    until $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq; do
      [ "$waited" -lt 600 ] || { echo "setup: apt-get update failed for 10 min (above)" >&2; exit 1; }
      echo "setup: apt-get update failed (above); retrying in 10 s" >&2
      sleep 10
      waited=$((waited + 10))
    done
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
  ) 9>"$lock"
}
