#!/usr/bin/env bash
# Fetch Keycloak's server distribution from Maven Central (org.keycloak:keycloak-quarkus-dist)
# with `mvn dependency:get`, and unpack it once, for the identity tests.
#
# Usage: tools/keycloak/fetch.sh [--print-home]
#   --print-home  print only where Keycloak is (or would be) unpacked, and exit
#
# Environment:
#   TENANCY_KEYCLOAK_VERSION  default 26.5.6
#   TENANCY_KEYCLOAK_CACHE    default ~/.cache/jupyterhub-tenancy/keycloak-<version>
#   TENANCY_MAVEN_REPO        mvn's local repository, default ~/.m2/repository
#
# Idempotent: once unpacked it only prints the home (bin/kc.sh inside). The last line printed on
# success is that home. Needs mvn and Java 17+ (scripts/install-system-packages installs them).
set -euo pipefail

VERSION=${TENANCY_KEYCLOAK_VERSION:-26.5.6}
CACHE=${TENANCY_KEYCLOAK_CACHE:-${HOME}/.cache/jupyterhub-tenancy/keycloak-${VERSION}}
HOME_DIR="$CACHE/keycloak-${VERSION}"
die() { echo "keycloak/fetch.sh: ERROR: $*" >&2; exit 1; }

case "${1:-}" in
  --print-home) echo "$HOME_DIR"; exit 0 ;;
  "") ;;
  *) die "unknown argument '$1' (usage: fetch.sh [--print-home])" ;;
esac

if [ -x "$HOME_DIR/bin/kc.sh" ]; then echo "$HOME_DIR"; exit 0; fi

command -v mvn >/dev/null || die "no mvn on PATH: run scripts/install-system-packages (as root) or apt-get install maven"
command -v java >/dev/null || die "no java on PATH: Keycloak needs Java 17 or newer (apt-get install openjdk-17-jre-headless)"
mkdir -p "$CACHE"
ZIP="$CACHE/keycloak-quarkus-dist-${VERSION}.zip"
if [ ! -s "$ZIP" ]; then
  echo "keycloak/fetch.sh: mvn dependency:get org.keycloak:keycloak-quarkus-dist:${VERSION}:zip" >&2
  mvn -q dependency:get -Dtransitive=false -Dartifact="org.keycloak:keycloak-quarkus-dist:${VERSION}:zip" >&2 \
    || die "mvn could not fetch org.keycloak:keycloak-quarkus-dist:${VERSION}:zip from Maven Central"
  M2=${TENANCY_MAVEN_REPO:-$HOME/.m2/repository}  # mvn's local repository (set it when settings.xml moves it)
  cp "$M2/org/keycloak/keycloak-quarkus-dist/${VERSION}/keycloak-quarkus-dist-${VERSION}.zip" "$ZIP.part"
  mv "$ZIP.part" "$ZIP"
fi
# Unpacked beside, then moved in one step: a half-unpacked tree is never taken for a whole one.
rm -rf "$CACHE/unpack"
mkdir "$CACHE/unpack"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$ZIP" "$CACHE/unpack" \
  || die "could not unpack $ZIP"
chmod +x "$CACHE/unpack/keycloak-${VERSION}/bin/"*.sh
mv "$CACHE/unpack/keycloak-${VERSION}" "$HOME_DIR"
rmdir "$CACHE/unpack"
echo "$HOME_DIR"
