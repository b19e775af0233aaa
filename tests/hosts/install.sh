#!/usr/bin/env bash
# Install the pinned hosts (Claude Code, Codex CLI, Gemini CLI) into tests/hosts/.cache from
# package-lock.json with `npm ci`. Does nothing when .cache already holds this lockfile's
# install, so CI can cache tests/hosts/.cache keyed on package-lock.json.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p .cache
ok() { for h in claude codex gemini; do .cache/node_modules/.bin/$h --version >/dev/null 2>&1 || return 1; done; }
if cmp -s package-lock.json .cache/package-lock.json && ok; then
    echo "hosts: up to date in $(pwd)/.cache"; exit 0
fi
cp package.json package-lock.json .cache/
(cd .cache && timeout 900 npm ci --no-audit --no-fund --loglevel=error)
# Claude Code's postinstall copies its native binary over a placeholder; run it by hand
# if this npm skipped install scripts.
ok || (cd .cache && node node_modules/@anthropic-ai/claude-code/install.cjs)
ok || { echo "hosts: install failed: claude, codex or gemini does not run" >&2; exit 1; }
echo "hosts: $(.cache/node_modules/.bin/claude --version), $(.cache/node_modules/.bin/codex --version), gemini $(.cache/node_modules/.bin/gemini --version); $(du -sh .cache | cut -f1) in $(pwd)/.cache"
