#!/usr/bin/env bash
# System packages textgym's tests need, installed as root before the Python install (.ci/run).
# Idempotent and quick when everything is present: apt runs only for what is missing.
#
#   bubblewrap  the Code-v0 sandbox's namespaces (textgym/sandbox, docs/sandbox.md); without it
#               the sandbox refuses to run code unless backend="unsafe" is chosen explicitly.
#   libc-bin    ldd, used to find the shared libraries the interpreter needs inside the sandbox.
#   chromium, chromium-driver
#               the headless browser that tests/view drives with selenium (textgym view's page);
#               the tests expect /usr/bin/chromium and /usr/bin/chromedriver.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v ldd >/dev/null 2>&1 || need+=(libc-bin)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)

if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "system-deps: need root to install: ${need[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# Say early, with bwrap's own message, if this machine cannot create the sandbox's namespaces
# (the sandbox tests will then fail with SandboxUnavailable); the other tests still run.
if bwrap --unshare-pid --unshare-net --unshare-ipc --unshare-uts --die-with-parent \
        --ro-bind / / --proc /proc --dev /dev true; then
    echo "system-deps: ok ($(bwrap --version))"
else
    echo "system-deps: WARNING: bwrap cannot create namespaces here; the code sandbox will refuse to run" >&2
fi
