#!/usr/bin/env bash
# Installs Debian's chromium, which the report tests use to open the single-file
# Allure report headless. Safe to run again; does nothing when chromium is there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure_chromium.sh: chromium is missing and installing it needs root (apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
